"""A run's lease, as the process holding it sees it, and the keeper that
renews it.

The store judges leases by the database's clock, and every write that a
holder makes for its run (above all the journal entry before each side
effect) checks the run's fencing token in the same transaction. Between
two such writes the process keeps its own deadline on its monotonic
clock, counted from before the write that extended the lease was sent: the
lease cannot run out in the database before it runs out here. A process
that froze past that deadline (SIGSTOP, a stalled VM, a long pause) sends
nothing more to Nova for the run when it wakes up: the run's Nova facade
checks the lease before every request, and last just before each write
to the socket (``recovery.nova``).
"""

import logging
from collections.abc import Mapping
from typing import Protocol

from recovery import concurrency
from recovery import exception
from recovery.db.claims import Holder
from recovery.metrics import METRICS
from recovery.notification import Notification

LOG = logging.getLogger(__name__)


class Lease:
    """One run's lease. The run's tasks, and the keeper's, use it at
    once: its lock guards the deadline, the loss and the end, and is
    never held across a write, a log line or a metric."""

    def __init__(self, notification: Notification, owner: str,
                 seconds: float, clock: concurrency.Clock, taken_at: float):
        """``taken_at``: the monotonic time before the take was sent."""
        self.uuid = notification.uuid
        self.holder = Holder(owner, notification.version, seconds)
        self._clock = clock
        self._lock = concurrency.Lock()
        self._deadline = taken_at + seconds
        self._lost: str | None = None
        # The run's last write (``end``) is sent or made: the keeper
        # renews it no more.
        self._ending = False

    def extended(self, sent_at: float) -> None:
        """The database extended the lease by a statement sent at
        ``sent_at`` (monotonic)."""
        until = sent_at + self.holder.lease
        with self._lock:
            # Two writes may answer in either order: the later deadline
            # stays.
            self._deadline = max(self._deadline, until)

    def lose(self, why: str) -> None:
        with self._lock:
            first = self._lost is None
            if first:
                self._lost = why
        if first:
            # Once, whichever of the run's tasks found it first.
            METRICS.leases_lost.inc()
            LOG.error("Lost the lease of notification %s: %s. This "
                      "process sends nothing more to Nova for it; the "
                      "engine that takes it over finishes it from the "
                      "journal", self.uuid, why)

    def check(self) -> None:
        """Raise ``LeaseLost`` unless this process may still act."""
        now = self._clock.monotonic()
        with self._lock:
            late, lost = now - self._deadline, self._lost
        if lost is None and late < 0:
            return      # before every Nova request: one look
        if lost is None:
            self.lose(f"it ran out {late:.1f} s ago by this process's "
                      f"clock (it was frozen, or cut off from the "
                      f"database)")
        with self._lock:
            lost = self._lost
        if lost is not None:
            raise exception.LeaseLost(
                f"notification {self.uuid}: lease lost: {lost}")

    def write(self, fn, *args, **kwargs):
        """Make the store write ``fn(*args, holder=..., **kwargs)`` for
        this run: refused once the lease is lost, and an extension of the
        lease when it succeeds."""
        self.check()
        sent_at = self._clock.monotonic()
        try:
            result = fn(*args, holder=self.holder, **kwargs)
        except exception.LeaseLost as exc:
            self.lose(str(exc))
            raise
        self.extended(sent_at)
        return result

    def end(self, fn, *args, **kwargs):
        """``write``, for the run's last write (the store's ``finish``):
        from now on the keeper renews it no more, and a renewal that the
        end overtook (the run is no longer running, so no longer held) is
        not a loss."""
        with self._lock:
            self._ending = True
        return self.write(fn, *args, **kwargs)

    def renewing(self) -> bool:
        """Whether the keeper renews it: False once the run is ending (its
        last write is sent or made); ``LeaseLost`` once it ran out by this
        process's clock."""
        with self._lock:
            if self._ending:
                return False
        self.check()
        return True

    def not_renewed(self) -> bool:
        """The database did not renew it: lost, and True; False when the
        run's end overtook the renewal (the run is no longer running, so
        no longer held: that is its end, not a loss)."""
        with self._lock:
            if self._ending:
                return False
        self.lose(f"it is no longer held by {self.holder.owner} (its "
                  f"lease ran out by the database's clock, or another "
                  f"process took the run over)")
        return True


class Renewals(Protocol):
    """What the keeper needs from the store."""

    def renew_leases(self, holders: Mapping[str, Holder]) -> set[str]: ...


class LeaseKeeper:
    """Renews the leases of this process's runs every third of a lease,
    so no other engine takes over a run that is alive. A lease the
    database no longer grants is lost, never revived.

    The engine's loop tracks a run, the run's own task untracks it, and
    the keeper's task renews: the lock guards the leases it keeps, and
    is held neither across a renewal nor for the metric."""

    def __init__(self, store: Renewals, clock: concurrency.Clock,
                 seconds: float):
        self._store, self._clock, self._seconds = store, clock, seconds
        self._lock = concurrency.Lock()
        self._leases: dict[str, Lease] = {}
        self._closed = concurrency.Event()
        self._task: concurrency.Task | None = None

    def start(self) -> None:
        self._task = concurrency.spawn(self._renew_until_closed)

    def track(self, lease: Lease) -> None:
        with self._lock:
            added = self._leases.setdefault(lease.uuid, lease) is lease
        if added:
            # Counted up and down, not set to a size: changes made at once
            # by several tasks add up, in whatever order they land.
            METRICS.leases.inc()

    def untrack(self, lease: Lease) -> None:
        with self._lock:
            removed = self._leases.get(lease.uuid) is lease
            if removed:
                del self._leases[lease.uuid]
        if removed:
            METRICS.leases.dec()

    def tracked(self) -> list[Lease]:
        with self._lock:
            return list(self._leases.values())

    def renew(self) -> None:
        """Renew every lease it tracks that is not ending, in one store
        call (one statement per engine)."""
        due = []
        for lease in self.tracked():
            try:
                if lease.renewing():
                    due.append(lease)
            except exception.LeaseLost:
                METRICS.renewals.labels("lost").inc()
                self.untrack(lease)
        if not due:
            return
        sent_at = self._clock.monotonic()
        try:
            lost = self._store.renew_leases(
                {lease.uuid: lease.holder for lease in due})
        except exception.StoreError as exc:
            METRICS.renewals.labels("store_unavailable").inc(len(due))
            LOG.warning("Could not renew the leases of notifications %s: "
                        "%s", ", ".join(lease.uuid for lease in due), exc)
            return
        for lease in due:
            if lease.uuid not in lost:
                lease.extended(sent_at)
                METRICS.renewals.labels("renewed").inc()
            elif lease.not_renewed():
                METRICS.renewals.labels("lost").inc()
                self.untrack(lease)

    def _renew_until_closed(self) -> None:
        while not self._closed.wait(self._seconds / 3):
            self.renew()

    def close(self) -> None:
        self._closed.set()
        if self._task is not None:
            self._task.wait()
