"""How a notification enters the store, from the API, the detector or an
operator's command: classified once, recorded by its host's segment
entry, given its first status and its first event, its origin's
decision, and stored.

``new`` for what the engine acts on; ``ignored``, with the reason, for
what it does not (a disabled segment, a host on maintenance, an event no
flow acts on, a host failure or return nobody vouched for). An operator's
command (``by_hand``) is neither: it is claimed as it is stored, and
runs.
"""

import datetime
from typing import Any
from typing import Protocol

from recovery import bus
from recovery.bus.wire import notification_event
from recovery.db.segments import Host
from recovery.db.segments import Segment
from recovery.events import Decision
from recovery.events import EventKind
from recovery.notification import CLI
from recovery.notification import COMMANDS
from recovery.notification import DEFAULT_EVENT
from recovery.notification import HOST_EVENT
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import NotificationType
from recovery.notification import Status
from recovery.notification import classify


class HostRecords(Protocol):
    """Which failover segment entry a host name has, if any."""
    def host_record(self, name: str) -> tuple[Host, Segment] | None: ...


class AcceptStore(HostRecords, Protocol):
    """What ``accept`` needs from the store."""
    def add(self, *, type: str, kind: Kind, hostname: str,
            generated_time: datetime.datetime, payload: dict[str, Any],
            origin: str, status: Status, now: datetime.datetime,
            message: str | None = None, source_host_uuid: str | None = None,
            failover_segment_uuid: str | None = None,
            duplicate_window: float = 0, detection: str | None = None,
            event: Decision | None = None) -> Notification: ...


class ByHandStore(HostRecords, Protocol):
    """What ``by_hand`` needs from the store."""
    def claim_host(self, *, type: str, kind: Kind, hostname: str,
                   payload: dict[str, Any], origin: str, owner: str,
                   lease: float, actor: str, event: Decision,
                   source_host_uuid: str | None = None,
                   failover_segment_uuid: str | None = None
                   ) -> tuple[Notification, bool]: ...


def accept(store: AcceptStore, *, type: str | NotificationType,
           hostname: str, generated_time: datetime.datetime,
           payload: dict[str, Any], origin: str, now: datetime.datetime,
           note: str | None = None,
           duplicate_window: float = 0, detection: str | None = None,
           ignore: str | None = None,
           kind: Kind | None = None) -> Notification:
    """Store a notification; raise ``Duplicate`` as ``Store.add`` does.

    ``note``: a remark kept as its message when nothing else is said.
    A host in a failover segment is recorded by its entry there, as
    Masakari does (``source_host_uuid``, ``failover_segment_uuid``).
    ``ignore``: why the caller will not have it acted on; it is stored
    ``ignored`` with that reason if nothing else ignores it first.
    ``kind``: recovery's own runs (a drain), which no monitor's type and
    event name; else classified from them.
    """
    kind = kind or classify(type, payload)
    type = kind.type.value
    record = store.host_record(hostname)
    status, reason = initial_status(kind, payload, record)
    if status is Status.NEW and ignore is not None:
        status, reason = Status.IGNORED, ignore
    what = describe(type, payload)
    if status is Status.NEW:
        event = Decision(origin, hostname, EventKind.RECEIVED,
                         f"{what}; {note}" if note else what)
    else:
        event = Decision(origin, hostname, EventKind.IGNORED,
                         f"{what}: {reason}")
    stored = store.add(
        type=type, kind=kind, hostname=hostname,
        generated_time=generated_time, payload=payload, origin=origin,
        status=status, message=reason or note,
        source_host_uuid=record and record[0].uuid,
        failover_segment_uuid=record and record[1].uuid, now=now,
        duplicate_window=duplicate_window, detection=detection,
        event=event)
    # Masakari's pair, both once the notification is stored.
    for phase in ("start", "end"):
        bus.publish(notification_event(stored, "notification.create", phase))
    return stored


def by_hand(store: ByHandStore, *, kind: Kind, hostname: str, owner: str,
            lease: float, actor: str,
            options: dict[str, Any] | None = None
            ) -> tuple[Notification, bool]:
    """An operator's run of ``hostname`` ('recovery host-failure' or
    'host-return', by ``kind``), claimed by ``owner`` in the transaction
    that checks the host (``Store.claim_host``): the host's abandoned run
    of that kind is resumed (returned with True), or a new one is stored
    running, with origin ``cli`` and ``actor``'s claim as its first
    event. ``RecoveryInProgress`` while a live process recovers the host.

    Nothing ignores it: the operator vouches for the host, so neither a
    host_status nor the segment's state is asked for. ``options`` go in
    its payload (a drain's ``allow_partial``); a resumed run keeps those
    it started with.
    """
    record = store.host_record(hostname)
    return store.claim_host(
        type=kind.type.value, kind=kind, hostname=hostname,
        payload={"event": HOST_EVENT[kind], **(options or {})},
        origin=CLI, owner=owner,
        lease=lease, actor=actor,
        source_host_uuid=record and record[0].uuid,
        failover_segment_uuid=record and record[1].uuid,
        event=Decision(actor, hostname, EventKind.CLAIMED,
                       f"run by hand ('recovery {COMMANDS[kind]} "
                       f"{hostname}'): attempt 1 starts on {owner}"))


def describe(type: str, payload: dict[str, Any]) -> str:
    """What a notification says, in a few words."""
    if type == NotificationType.VM.value:
        return (f"VM {payload['event']}/{payload['vir_domain_event']} of "
                f"instance {payload['instance_uuid']}")
    if type == NotificationType.PROCESS.value:
        return f"PROCESS {payload['process_name']} {payload['event']}"
    status = payload.get("host_status")
    return (f"{type} {payload.get('event', DEFAULT_EVENT)}"
            + (f", host_status {status}" if status else ""))


# The (event, vir_domain_event) pairs of a VM notification that mean the
# guest died and a restart may help: Masakari's instance events
# (masakari/engine/instance_events.py), matched as exactly as Masakari
# matches them. The instance monitor sends the first two, the
# introspective one (the QEMU guest agent stopped answering) the third.
VM_EVENTS = {("LIFECYCLE", "STOPPED_FAILED"), ("IO_ERROR", "IO_ERROR_REPORT"),
             ("QEMU_GUEST_AGENT_ERROR", "STOPPED_FAILED")}


def initial_status(kind: Kind, payload: dict[str, Any],
                   record: tuple[Host, Segment] | None
                   ) -> tuple[Status, str | None]:
    """``new`` for what the engine acts on; ``ignored`` with the reason
    for what it does not. ``record`` is the host's segment entry."""
    if record is not None:
        host, segment = record
        if not segment.enabled:
            return Status.IGNORED, (
                f"segment {segment.name} of host {host.name} is disabled: "
                f"its hosts' notifications are recorded, not acted on")
        if host.on_maintenance:
            return Status.IGNORED, (
                f"host {host.name} is on maintenance in segment "
                f"{segment.name}: recovery leaves it alone until "
                f"'recovery host update {segment.name} {host.name} "
                f"--no-maintenance'")
    if kind is Kind.INSTANCE:
        pair = (payload["event"], payload["vir_domain_event"])
        if pair not in VM_EVENTS:
            return Status.IGNORED, (
                f"event {payload['event']}/{payload['vir_domain_event']} "
                f"is not an instance failure recovery acts on (only "
                f"{', '.join(sorted('/'.join(p) for p in VM_EVENTS))})")
        return Status.NEW, None
    if kind is Kind.PROCESS:
        if payload["process_name"] != "nova-compute":
            return Status.IGNORED, (
                f"process {payload['process_name']} is not nova-compute: "
                f"recovery acts only on nova-compute process failures")
        return Status.NEW, None
    if kind is Kind.HOST_DRAIN:
        # Recovery's own, of a host that is up: the drain checks it.
        return Status.NEW, None
    status = payload.get("host_status", "missing")
    if kind is Kind.HOST_RETURN:
        # As Masakari: a return the monitor does not vouch for is not
        # acted on ('recovery host-return' is the operator's way). One it
        # vouches for still waits for the host's own heartbeats.
        if status != "NORMAL":
            return Status.IGNORED, (
                f"host_status is {status}: the monitor did not confirm "
                f"the host is back; 'recovery host-return' brings it back "
                f"by hand")
        return Status.NEW, None
    if status != "NORMAL":
        return Status.IGNORED, (
            f"host_status is {status}: the monitor did not confirm the "
            f"host is off, and evacuating a host that may still run its "
            f"guests would run them twice")
    return Status.NEW, None
