"""One poll of Nova's evacuation migrations serves every instance in
flight, from every host the engine is recovering."""

import contextlib
import datetime
from collections.abc import Iterator

from recovery.concurrency import Clock
from recovery.concurrency import Event
from recovery.concurrency import Lock
from recovery.exception import WaitTimeout
from recovery.models import Migration
from recovery.nova import Nova

# Nova compares changes-since with its own clock. Look this far back so a
# controller whose clock runs ahead of Nova's still sees every migration;
# an older migration of the same instance is told apart by its lower id.
CLOCK_SKEW_MARGIN = datetime.timedelta(hours=1)


class EvacuationWatcher:
    """The newest evacuation migration of each instance, for the whole
    engine (one per process): a rack of failed hosts costs one request
    per interval, not one per host.

    Nova is polled only while a run follows it, and only when a caller
    waits: each poll starts ``interval`` after the previous one started
    (at once if that one took longer), so the cadence is the interval,
    whatever a request costs. A caller that waits for a result sleeps
    until the next poll is due, or until the poll in progress ends; the
    caller that finds it due makes it, for everyone, through its own
    run's Nova: a run whose lease is lost sends nothing more, not even
    this read (the next caller polls instead).
    """

    def __init__(self, clock: Clock):
        self._clock = clock
        self._lock = Lock()
        self._latest: dict[str, Migration] = {}
        # Each following run: its start (wall clock) and poll interval.
        self._runs: dict[int, tuple[datetime.datetime, float]] = {}
        self._next_run = 0
        self._started = 0         # polls started
        self._completed = 0       # polls that answered
        self._polling: Event | None = None    # set when the poll ends
        self._next_due = float("-inf")

    @contextlib.contextmanager
    def follow(self, nova: Nova, interval: float) -> Iterator["Watch"]:
        """Poll for one run while it lasts, at most once per ``interval``
        (the shortest of the runs' wins). ``nova`` is the run's: its
        guard is checked whenever the run's caller wakes, and raises if
        the run may no longer act (its lease is lost)."""
        with self._lock:
            key = self._next_run
            self._next_run += 1
            self._runs[key] = (self._clock.now(), interval)
            # The run's baseline: a poll that starts from now on.
            baseline_poll = self._started + 1
        try:
            yield Watch(self, baseline_poll, nova)
        finally:
            with self._lock:
                del self._runs[key]
                if not self._runs:
                    self._latest.clear()     # nothing kept between runs

    # -- for one run (through its Watch) --------------------------------
    def baseline(self, instance_uuid: str, poll: int,
                 nova: Nova) -> int:
        self._wait_for_poll(poll, nova)
        with self._lock:
            migration = self._latest.get(instance_uuid)
        return 0 if migration is None else migration.id

    def ended(self, instance_uuid: str, floor: int, timeout: float,
              nova: Nova) -> Migration | None:
        """None when ``timeout`` seconds pass first."""
        deadline = self._clock.monotonic() + timeout
        while True:
            nova.check()
            with self._lock:
                migration = self._found(instance_uuid, floor, final=True)
                if migration is not None:
                    return migration
                now = self._clock.monotonic()
                if now >= deadline:
                    return None
                in_progress, next_due = self._polling, self._next_due
                due = in_progress is None and now >= next_due
                if due:
                    self._begin_poll()
            if due:
                self._poll(nova)
            elif in_progress is not None:
                self._clock.wait(in_progress, deadline - now)
            else:
                self._clock.sleep(min(next_due, deadline) - now)

    def _wait_for_poll(self, number: int, nova: Nova) -> None:
        """Until poll ``number`` (counted from 1) has answered: polling
        at once if none is in progress, whatever the cadence."""
        while True:
            nova.check()
            with self._lock:
                if self._completed >= number:
                    return
                in_progress = self._polling
                if in_progress is None:
                    self._begin_poll()
            if in_progress is None:
                self._poll(nova)
            else:
                self._clock.wait(in_progress, None)

    def _found(self, instance_uuid: str, floor: int,
               final: bool) -> Migration | None:
        """Under the lock: the newest migration above ``floor``, if any
        (and, if ``final``, only once it has ended)."""
        migration = self._latest.get(instance_uuid)
        if migration is None or migration.id <= floor:
            return None
        if final and not (migration.failed or migration.status == "done"):
            return None
        return migration

    # -- polling ---------------------------------------------------------
    def _begin_poll(self) -> None:
        """Under the lock: this caller polls; the others wait for it."""
        self._started += 1
        self._polling = Event()
        interval = min(i for _, i in self._runs.values())
        self._next_due = self._clock.monotonic() + interval

    def _poll(self, nova: Nova) -> None:
        with self._lock:
            since = min(s for s, _ in self._runs.values()) - CLOCK_SKEW_MARGIN
            done = self._polling
        try:
            migrations = nova.list_evacuations(
                changes_since=since.strftime("%Y-%m-%dT%H:%M:%SZ"))
            with self._lock:
                for migration in migrations:
                    known = self._latest.get(migration.instance_uuid)
                    if known is None or migration.id >= known.id:
                        self._latest[migration.instance_uuid] = migration
                self._completed = self._started
        finally:
            with self._lock:
                self._polling = None
            done.set()


class Watch:
    """One run's view of the engine's watcher."""

    def __init__(self, watcher: EvacuationWatcher, baseline_poll: int,
                 nova: Nova):
        self._watcher = watcher
        self._baseline_poll = baseline_poll
        self._nova = nova

    def baseline(self, instance_uuid: str) -> int:
        """The id of the instance's newest evacuation before this run sent
        one (0 if none): the floor above which migrations are this run's.
        Known from a poll that started after the run began following."""
        return self._watcher.baseline(instance_uuid, self._baseline_poll,
                                      self._nova)

    def ended(self, instance_uuid: str, floor: int, *, timeout: float,
              what: str) -> Migration:
        """The instance's evacuation above ``floor`` once it has ended
        (done, failed or error); ``WaitTimeout`` naming ``what`` when
        ``timeout`` seconds pass first."""
        migration = self._watcher.ended(instance_uuid, floor, timeout,
                                        self._nova)
        if migration is None:
            raise WaitTimeout(
                f"gave up after {timeout:g}s waiting for {what}")
        return migration
