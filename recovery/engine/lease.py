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

from recovery import concurrency
from recovery import exception
from recovery.db.claims import Holder
from recovery.db.store import Store
from recovery.metrics import METRICS
from recovery.notification import Notification

LOG = logging.getLogger(__name__)


class Lease:
    def __init__(self, notification: Notification, owner: str,
                 seconds: float, clock: concurrency.Clock, taken_at: float):
        """``taken_at``: the monotonic time before the take was sent."""
        self.uuid = notification.uuid
        self.holder = Holder(owner, notification.version, seconds)
        self._clock = clock
        self._deadline = taken_at + seconds
        self._lost: str | None = None

    def extended(self, sent_at: float) -> None:
        """The database extended the lease by a statement sent at
        ``sent_at`` (monotonic)."""
        self._deadline = max(self._deadline, sent_at + self.holder.lease)

    def lose(self, why: str) -> None:
        if self._lost is None:
            METRICS.leases_lost.inc()
            LOG.error("Lost the lease of notification %s: %s. This "
                      "process sends nothing more to Nova for it; the "
                      "engine that takes it over finishes it from the "
                      "journal", self.uuid, why)
            self._lost = why

    def check(self) -> None:
        """Raise ``LeaseLost`` unless this process may still act."""
        late = self._clock.monotonic() - self._deadline
        if self._lost is None and late >= 0:
            self.lose(f"it ran out {late:.1f} s ago by this process's "
                      f"clock (it was frozen, or cut off from the "
                      f"database)")
        if self._lost is not None:
            raise exception.LeaseLost(
                f"notification {self.uuid}: lease lost: {self._lost}")

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


class LeaseKeeper:
    """Renews the leases of this process's runs every third of a lease,
    so no other engine takes over a run that is alive. A lease the
    database no longer grants is lost, never revived."""

    def __init__(self, store: Store, clock: concurrency.Clock,
                 seconds: float):
        self._store, self._clock, self._seconds = store, clock, seconds
        self._leases: dict[str, Lease] = {}
        self._closed = concurrency.Event()
        self._task: concurrency.Task | None = None

    def start(self) -> None:
        self._task = concurrency.spawn(self._renew_until_closed)

    def track(self, lease: Lease) -> None:
        self._leases[lease.uuid] = lease
        METRICS.leases.set(len(self._leases))

    def untrack(self, lease: Lease) -> None:
        self._leases.pop(lease.uuid, None)
        METRICS.leases.set(len(self._leases))

    def renew(self) -> None:
        for lease in list(self._leases.values()):
            try:
                lease.write(self._store.renew, lease.uuid)
                METRICS.renewals.labels("renewed").inc()
            except exception.LeaseLost:
                METRICS.renewals.labels("lost").inc()
                self.untrack(lease)
            except exception.StoreError as exc:
                METRICS.renewals.labels("store_unavailable").inc()
                LOG.warning("Could not renew the lease of notification "
                            "%s: %s", lease.uuid, exc)

    def _renew_until_closed(self) -> None:
        while not self._closed.wait(self._seconds / 3):
            self.renew()

    def close(self) -> None:
        self._closed.set()
        if self._task is not None:
            self._task.wait()
