"""Host failures held by fencing, and their ALARM: once per hold, and
once for a failure domain.

A host-failure attempt that fencing cannot prove off (a
``FencingError``; its ``cause`` says why, ``fence_failed`` when it names
none) moves nothing and ends in error: it is retried with backoff until
the host is proved off, an operator confirms it off ('recovery fencing
confirm HOST --reason TEXT'), or the run gives up. The engine, not the
Fence step, tells the operator:

- a host's hold *episode* runs from the first attempt of its host
  failure (its notification) that fencing holds until that notification
  ends (recovered, given up, ignored) or is confirmed. Its first held
  attempt is an ALARM line and an event (kind ``held``, about the host);
  every later one is a WARNING;
- the hosts of one failure domain (``recovery.domains``: a rack, a power
  feed) held together are one episode of the domain: ONE ALARM line and
  one event about the domain, naming the domain, the hosts held and the
  domain's hosts whose failure is being recovered with them (a rack's
  hosts fence at once and fail within moments: whichever is held first
  names the rest). Each host's own line is a WARNING under it, and a host
  held later joins it. The episode ends when none of its hosts is held
  any more; a later hold raises a new ALARM.

Engines that share a database share the episodes: every decision is
read from the store's events, not from this engine's memory, so a retry
another engine runs knows the ALARM was raised. A held host records its
hold (an event) before it looks at its domain, and the domain's ALARM is
raised by the host whose hold was recorded first: of two engines whose
hosts are held at the same moment, the second reads the first's hold and
joins it. (On a server database, two holds committed out of the order
of their ids could both see themselves first: two ALARMs, at worst one
per engine, never none.)
"""

import datetime
import logging
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Mapping
from typing import Any
from typing import Protocol

from recovery import concurrency
from recovery import exception
from recovery.events import Decision
from recovery.events import Event
from recovery.events import EventKind
from recovery.metrics import METRICS
from recovery.notification import IN_FLIGHT
from recovery.notification import Kind
from recovery.notification import Notification

LOG = logging.getLogger(__name__)

# The cause of a fencing failure that names none.
FENCE_FAILED = "fence_failed"
# The event of an operator's confirmation (``recovery fencing confirm``):
# it releases the host from its hold.
CONFIRMED = EventKind.CONFIRMED.value
# Events looked at for each host of a domain: its latest holds and
# confirmations (a notification's own, and those about the host).
LOOK_BACK = 50


class HoldStore(Protocol):
    """What the holds read and write: the events (the holds recorded,
    the confirmations), and the host failures still to act on."""

    def add_event(self, decision: Decision,
                  now: datetime.datetime) -> None: ...

    def events(self, notification_uuid: str | None = None,
               since: datetime.datetime | None = None,
               limit: int | None = None, host: str | None = None,
               kinds: Collection[str] | None = None) -> list[Event]: ...

    def list_notifications(self, *, filters: dict[str, Any] | None = None
                           ) -> list[Notification]: ...


def cause_of(error: BaseException) -> str:
    """Why fencing held: the error's ``cause``, or ``fence_failed``."""
    return str(getattr(error, "cause", None) or FENCE_FAILED)


def release(host: str, retried: bool = True) -> str:
    """What releases a held host; once its run is ``retried`` no more,
    no BMC repaired proves it off on its own."""
    confirm = f"'recovery fencing confirm {host} --reason TEXT'"
    if not retried:
        return (f"it is retried no more: check that it is off and run "
                f"{confirm} (its run goes on at once), or repair its BMC "
                f"and run 'recovery host-failure {host}'")
    return (f"repair its BMC so that fencing proves it off, or check that "
            f"it is off and run {confirm}")


def detail(host: str, error: BaseException) -> str:
    """What fencing said, without the host's name in front."""
    said = str(error)
    return said.removeprefix(f"{host} could not be proved off: ")


def alarm(host: str, error: BaseException, retried: bool = True) -> str:
    """The ALARM of a host held by fencing, alone; its run ``retried``
    or not."""
    return (f"ALARM: {host} could not be proved off: {detail(host, error)}. "
            f"Nothing is forced down or evacuated, so its instances stay "
            f"down until it is (held: {cause_of(error)}): "
            f"{release(host, retried)}")


def _marker(notification: Notification) -> str:
    """How a hold event names the host failure it holds."""
    return f"(notification {notification.uuid})"


class Holds:
    """Tells each fencing hold of a host failure: its ALARM once per
    episode of the host or of its failure domain, its WARNING on every
    other held attempt, and the hold count."""

    def __init__(self, store: HoldStore, clock: concurrency.Clock,
                 domain_of: Callable[[], Mapping[str, str]], actor: str):
        """``domain_of``: each host's failure domain (host -> name; a
        host missing is in none). ``actor``: this engine, in the
        events."""
        self._store, self._clock = store, clock
        self._domain_of, self._actor = domain_of, actor

    def held(self, notification: Notification, error: BaseException,
             attempt: str, *, retried: bool = True) -> None:
        """``notification``'s attempt ended held by ``error``, and is
        recorded; ``attempt`` says which, and when it is ``retried`` (an
        attempt that gave up is an error line, not a warning). A store
        that fails cannot say whether this hold was told: it is told as
        a new one."""
        METRICS.fencing_holds.labels(cause_of(error)).inc()
        host = notification.hostname
        told = _Told(notification, error, attempt, retried)
        try:
            first = self._hold_of(notification) is None
            domains = self._domain_of()
            domain = domains.get(host)
            if domain is None:
                self._alone(told, first)
            else:
                members = {h for h, d in domains.items() if d == domain}
                self._in_domain(told, first, domain, members)
        except exception.StoreError as exc:
            LOG.error("%s. Notification %s: %s (the store could not say "
                      "whether this hold was told before: %s)",
                      alarm(host, error, retried), notification.uuid,
                      attempt, exc)

    def _alone(self, told: "_Told", first: bool) -> None:
        if not first:
            told.again("still held", "its alarm")
            return
        host = told.notification.hostname
        text = alarm(host, told.error, told.retried)
        self._record(told.notification, text)
        LOG.error("%s. Notification %s: %s", text, told.notification.uuid,
                  told.attempt)

    def _in_domain(self, told: "_Told", first: bool, domain: str,
                   members: set[str]) -> None:
        host, cause = told.notification.hostname, told.cause
        if first:
            self._record(told.notification, (
                f"held by fencing ({cause}), one of failure domain "
                f"{domain}: {detail(host, told.error)}"))
        held, failing = self._held_among(members)
        # The domain's episode is this host's if no host of it is held
        # since before this one: its hold was recorded first.
        if first and next(iter(held), host) == host:
            self._raise(domain, held or [host], failing or [host], cause)
            if told.retried:
                return
        told.again("held" if first else "still held",
                   f"the alarm of failure domain {domain}")

    def _raise(self, domain: str, held: list[str], failing: list[str],
               cause: str) -> None:
        """The domain's ALARM, and its event."""
        text = (f"ALARM: failure domain {domain} is held by fencing: "
                f"{', '.join(held)} could not be proved off ({cause}); its "
                f"hosts whose failure is being recovered: "
                f"{', '.join(failing)}. Nothing is forced down or evacuated "
                f"on a held host until it is proved off: repair its BMC, "
                f"or check that it is off and run 'recovery fencing "
                f"confirm HOST --reason TEXT' for each. Each host of "
                f"{domain} held in this failure is a warning under this "
                f"alarm")
        self._store.add_event(Decision(self._actor, domain, EventKind.HELD,
                                       text), self._clock.now())
        LOG.error("%s", text)

    def _record(self, notification: Notification, told: str) -> None:
        """The event of a host's hold: the first of its episode."""
        self._store.add_event(Decision(
            self._actor, notification.hostname, EventKind.HELD,
            f"{told} {_marker(notification)}"), self._clock.now())

    def _hold_of(self, notification: Notification) -> int | None:
        """The id of ``notification``'s hold event, if its hold is told
        already: none before, and none once an operator has confirmed
        the host off."""
        found = None
        for event in self._store.events(
                host=notification.hostname, limit=LOOK_BACK,
                kinds=(EventKind.HELD.value, CONFIRMED)):
            if (event.kind == CONFIRMED
                    and event.notification_uuid == notification.uuid):
                found = None
            elif (event.kind == EventKind.HELD.value
                  and event.notification_uuid is None
                  and _marker(notification) in event.message):
                found = event.id if found is None else found
        return found

    def _held_among(self, hosts: set[str]) -> tuple[list[str], list[str]]:
        """Of ``hosts``: those held by fencing now, in the order their
        holds were recorded, and those whose host failure is still to be
        acted on (held or not), by name."""
        failing = [n for status in IN_FLIGHT
                   for n in self._store.list_notifications(filters={
                       "kind": Kind.HOST_FAILURE.value,
                       "status": status.value})
                   if n.hostname in hosts]
        holds = {n.hostname: hold for n in failing
                 if (hold := self._hold_of(n)) is not None}
        return (sorted(holds, key=holds.__getitem__),
                sorted({n.hostname for n in failing}))


class _Told:
    """One held attempt, as its lines tell it."""

    def __init__(self, notification: Notification, error: BaseException,
                 attempt: str, retried: bool):
        self.notification, self.error = notification, error
        self.attempt, self.retried = attempt, retried
        self.cause = cause_of(error)

    def again(self, state: str, under: str) -> None:
        """The line of a held attempt under an alarm raised already: a
        warning while it is retried, an error once it is not."""
        host = self.notification.hostname
        log = LOG.warning if self.retried else LOG.error
        log("%s is %s by fencing (%s), under %s: %s. Notification %s: %s. "
            "To release it: %s", host, state, self.cause, under,
            detail(host, self.error), self.notification.uuid, self.attempt,
            release(host, self.retried))
