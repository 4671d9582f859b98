"""Where the instances of a failed host go: the recovery methods.

- ``auto``: the scheduler picks each destination.
- ``reserved_host``: the failed host's segment keeps spare, disabled
  hosts. One is taken at a time (``ReservedHosts``): it must be up in
  Nova; it is claimed in the store first, so two recoveries never take
  the same one; then its compute service is enabled and, optionally, it
  joins the failed host's aggregates. The instances go to it until it is
  full, then to the next, for the instances not yet recovered only.
- ``auto_priority`` and ``rh_priority`` chain the two: an instance the
  first method could not recover tries the second.

Each instance asks its methods in order for a ``Target`` and reports how
an evacuation to it ended (``failed``). A method decides from that
whether the same instance may try its next target: after a scheduler
refusal (the host is full) it may; after any other failure the instance
is suspect and moves on to the next method, so that one bad instance
never uses up the pool. A reserved host where two instances failed for
other reasons, or where an evacuation timed out, is left for the next.
"""

import dataclasses
import logging
from typing import Protocol

from recovery import exception
from recovery.concurrency import Event
from recovery.concurrency import Lock
from recovery.flows.context import Env
from recovery.results import StepName
from recovery.results import StepState

LOG = logging.getLogger(__name__)

AUTO = "auto"
RESERVED_HOST = "reserved_host"
CHAINS = {"auto": (AUTO,), "reserved_host": (RESERVED_HOST,),
          "auto_priority": (AUTO, RESERVED_HOST),
          "rh_priority": (RESERVED_HOST, AUTO)}
# Failures not caused by a full host after which a reserved host is left.
MAX_FAILURES_PER_HOST = 2


@dataclasses.dataclass(frozen=True)
class Target:
    method: str
    host: str | None        # None: the scheduler picks


class HostRecord(Protocol):
    uuid: str
    name: str
    claimed_by: str | None


class SegmentRecord(Protocol):
    uuid: str
    recovery_method: str


class ReservedHostStore(Protocol):
    """What the methods need from the store (``SegmentStore``)."""
    def host_record(self, name: str
                    ) -> tuple[HostRecord, SegmentRecord] | None: ...
    def reserved_hosts(self, segment_uuid: str,
                       notification_uuid: str) -> list[HostRecord]: ...
    def claim_reserved(self, host_uuid: str, notification_uuid: str,
                       now) -> bool: ...
    def release_reserved(self, host_uuid: str, notification_uuid: str,
                         now) -> None: ...


class Method(Protocol):
    """One recovery method: where an instance's next evacuation goes."""

    name: str

    def target(self) -> Target | None:
        """The next place to try, or None when the method has none left
        (``why_none`` says why)."""

    def failed(self, target: Target, no_valid_host: bool) -> bool:
        """An evacuation to ``target`` failed; whether to ask ``target``
        again (False: go on to the next method)."""

    def timed_out(self, target: Target) -> None:
        """An evacuation to ``target`` did not finish in time."""

    def why_none(self) -> str:
        """Why ``target`` returned None."""

    def describe(self) -> str:
        """The method, for the dry run and the results."""

    def destinations(self) -> list[str]:
        """The hosts it sends instances to, in the order it takes them;
        empty when the scheduler picks."""


class Auto:
    """The scheduler picks; an instance gets one try."""

    name = AUTO

    def target(self) -> Target:
        return Target(AUTO, None)

    def failed(self, target: Target, no_valid_host: bool) -> bool:
        return False

    def timed_out(self, target: Target) -> None:
        """Nothing to leave: the scheduler avoids what it must."""

    def why_none(self) -> str:
        return "the scheduler is asked once per instance"

    def describe(self) -> str:
        return "the scheduler picks"

    def destinations(self) -> list[str]:
        return []


@dataclasses.dataclass(eq=False)
class _Take:
    """One task's take of the next reserved host."""

    done: Event
    answered: bool = False
    host: str | None = None


class ReservedHosts:
    """The reserved hosts of a segment, taken one at a time, shared by
    every instance of one host recovery.

    Every task of the run asks it at once. Its lock guards what it knows
    (the host in use, those left, the failures) and is never held across
    a call to Nova or the store: taking the next host is one task's
    (the others wait for its outcome, and take the same host), and what
    is reported to the recorder is reported once the lock is released.
    """

    name = RESERVED_HOST

    def __init__(self, env: Env, store: ReservedHostStore,
                 segment_uuid: str | None, notification_uuid: str,
                 failed_host: str):
        self._env = env
        self._store = store
        self._segment = segment_uuid
        self._notification = notification_uuid
        self._failed_host = failed_host
        self._lock = Lock()
        self._current: str | None = None
        self._left: set[str] = set()     # taken, then left: full or bad
        self._failures: dict[str, int] = {}
        self._why_none = ""
        # The take in progress (one task's), if any.
        self._taking: _Take | None = None

    def describe(self) -> str:
        if self._segment is None:
            return f"no reserved hosts: {self._failed_host} is in no segment"
        names = [h.name for h in self._candidates()]
        return f"reserved hosts {', '.join(names) or '(none left)'}"

    def destinations(self) -> list[str]:
        """The reserved hosts not yet left: the one in use first."""
        names = [h.name for h in self._candidates()]
        with self._lock:
            current = self._current
        return ([current] if current in names else []) + [
            n for n in names if n != current]

    def _candidates(self) -> list[HostRecord]:
        hosts = self._store.reserved_hosts(self._segment, self._notification)
        with self._lock:
            left = set(self._left)
        return [h for h in hosts
                if h.name not in left and h.name != self._failed_host]

    def target(self) -> Target | None:
        """The reserved host to evacuate to now, taking the next one if
        needed; None when none is left. While one task takes the next
        host, the others wait for it: one host is taken at a time."""
        while True:
            with self._lock:
                if self._current is not None:
                    return Target(RESERVED_HOST, self._current)
                take = self._taking
                mine = take is None
                if mine:
                    take = self._taking = _Take(Event())
            if mine:
                return self._take(take)
            self._env.clock.wait(take.done, None)
            if take.answered and take.host is None:
                return None     # the take this task waited for found none

    def _take(self, take: "_Take") -> Target | None:
        """This task's take of the next host, with no lock held. The
        tasks waiting for it go on once it ends: with its host, with
        none when none is left, or (it raised) the next of them tries."""
        try:
            take.host = self._take_next()
            take.answered = True
        finally:
            with self._lock:
                self._taking = None
                if take.answered:
                    self._current = take.host
            take.done.set()
        return None if take.host is None else Target(RESERVED_HOST,
                                                     take.host)

    def failed(self, target: Target, no_valid_host: bool) -> bool:
        """An evacuation to ``target`` failed. Whether the same instance
        may try the next reserved host: yes when the host refused it
        (full), no when the instance itself may be the cause."""
        with self._lock:
            if no_valid_host:
                told = self._leave(target.host, "the scheduler refused it "
                                                "(full or unfit)")
                retry = True
            else:
                count = self._failures.get(target.host, 0) + 1
                self._failures[target.host] = count
                told = (self._leave(target.host, f"{count} evacuations to "
                                                 f"it failed")
                        if count >= MAX_FAILURES_PER_HOST else None)
                retry = False
        self._tell(told)
        return retry

    def timed_out(self, target: Target) -> None:
        with self._lock:
            told = self._leave(target.host, "an evacuation to it did not "
                                            "finish in time")
        self._tell(told)

    def why_none(self) -> str:
        with self._lock:
            return self._why_none

    def _leave(self, host: str, why: str) -> tuple[StepState, str] | None:
        """Under the lock: leave ``host``; what to report, if anything
        (``_tell``, after the lock)."""
        if host in self._left:
            return None
        self._left.add(host)
        if self._current == host:
            self._current = None
        return StepState.RUNNING, f"moving on from reserved host {host}: {why}"

    def _tell(self, report: tuple[StepState, str] | None) -> None:
        if report is not None:
            self._report(*report)

    def _report(self, state: StepState, message: str) -> None:
        LOG.info("%s: %s", self._failed_host, message)
        # The step under which the reserved hosts taken show in the
        # workflow.
        self._env.recorder.step_changed(StepName.RESERVED_HOSTS, state,
                                        message)

    def _take_next(self) -> str | None:
        """The next usable host, claimed and readied; None when none is
        left. One task at a time (``target``), with no lock held."""
        if self._segment is None:
            with self._lock:
                self._why_none = (f"{self._failed_host} is in no failover "
                                  f"segment, so it has no reserved hosts")
            return None
        for host in self._candidates():
            if self._usable(host):
                return host.name
        why = ("no reserved host of the segment is left (up in Nova, not "
               "on maintenance, not taken by another recovery)")
        with self._lock:
            self._why_none = why
        self._report(StepState.FAILURE, why)
        return None

    def _usable(self, host: HostRecord) -> bool:
        """Check ``host`` is up, claim it, and ready it; False (and it is
        left) if any of that fails."""
        nova, now = self._env.nova, self._env.clock.now
        try:
            service = nova.get_compute_service(host.name)
        except exception.RecoveryError as exc:
            self._skip(host, f"cannot read its service: {exc}")
            return False
        if not service.is_up:
            self._skip(host, f"Nova reports it {service.state}")
            return False
        if host.claimed_by != self._notification and not (
                self._store.claim_reserved(host.uuid, self._notification,
                                           now())):
            self._skip(host, "another recovery took it")
            return False
        try:
            done = self._ready(service)
        except exception.RecoveryError as exc:
            self._store.release_reserved(host.uuid, self._notification,
                                         now())
            self._skip(host, f"could not ready it: {exc}; it stays "
                             f"reserved")
            return False
        self._report(StepState.SUCCESS,
                     f"took reserved host {host.name}: {done}")
        return True

    def _skip(self, host: HostRecord, why: str) -> None:
        with self._lock:
            self._left.add(host.name)
        self._report(StepState.RUNNING, f"skipping reserved host "
                                        f"{host.name}: {why}")

    def _ready(self, service) -> str:
        nova, settings = self._env.nova, self._env.settings
        done = ["no longer reserved"]
        if not service.is_enabled:
            nova.enable(service)
            done.append("compute service enabled")
        if settings.add_reserved_host_to_aggregate:
            for aggregate in nova.aggregates_of(self._failed_host):
                nova.add_to_aggregate(aggregate, service.host)
                done.append(f"added to aggregate {aggregate.name}")
        return ", ".join(done)


class Placement:
    """The methods of one host recovery, in the order instances try
    them."""

    def __init__(self, method: str, methods: list[Method]):
        self.method = method
        self.methods = methods

    def describe(self) -> str:
        return f"{self.method}: " + ", then ".join(
            f"{m.name} ({m.describe()})" for m in self.methods)


def auto() -> Placement:
    return Placement(AUTO, [Auto()])


def for_host(env: Env, store: ReservedHostStore, host: str,
             notification_uuid: str) -> Placement:
    """The methods of ``host``'s segment, or of ``[host_failure]
    default_recovery_method`` for a host in no segment."""
    record = store.host_record(host)
    segment = record[1] if record is not None else None
    method = (segment.recovery_method if segment is not None
              else env.settings.default_recovery_method)
    pick: dict[str, Method] = {AUTO: Auto(), RESERVED_HOST: ReservedHosts(
        env, store, segment.uuid if segment is not None else None,
        notification_uuid, host)}
    return Placement(method, [pick[name] for name in CHAINS[method]])
