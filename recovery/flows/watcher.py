"""One poll of Nova's evacuation migrations serves every instance in
flight, from every host the engine is recovering; it is made when the
evacuations are expected to have ended, as the ones before them did, and
it asks only for the migrations changed since shortly before the newest
change the last one saw."""

import collections
import contextlib
import datetime
import statistics
from collections.abc import Iterator

from recovery.concurrency import Clock
from recovery.concurrency import Event
from recovery.concurrency import Lock
from recovery.exception import WaitTimeout
from recovery.models import Migration
from recovery.nova import Nova

# Nova compares changes-since with its own clock. A run's first poll (its
# baseline) looks this far back from the run's start, so that an engine
# whose clock runs ahead of Nova's still sees every migration; an older
# migration of the same instance is told apart by its lower id.
CLOCK_SKEW_MARGIN = datetime.timedelta(hours=1)
# Later polls look back this far from the newest change a poll saw, by
# Nova's own stamps (or from this engine's clock, if that is earlier: a
# controller whose clock runs ahead does not move the poll past the
# others' changes): one poll of a rack's recovery then lists the
# migrations that changed lately, not every one since the run began.
# Every stamp on a migration is a controller's (nova-compute saves its
# migrations through nova-conductor), and a controller whose clock is
# further behind than Nova's service_down_time (60 s by default) already
# breaks Nova's own liveness checks.
STAMP_MARGIN = datetime.timedelta(seconds=60)
# Lock, evacuate and unlock are three requests an instance; a poll that
# confirms two evacuations adds half of one: 3.5 in all, the budget.
CONFIRMS_PER_POLL = 2
# Never longer between two polls while anyone waits, whatever the
# evacuations have taken: an evacuation that ends just after a poll is
# confirmed this long after it ended, at most.
MAX_GAP = 5.0
# The duration expected is that of the last evacuations that ended.
SAMPLES = 50


class EvacuationWatcher:
    """The newest evacuation migration of each instance, for the whole
    engine (one per process): a rack of failed hosts costs one request
    per poll, not one per host.

    Nova is polled only while a run follows it, and only when a caller
    waits, when the evacuations are expected to have ended rather than
    at a fixed cadence. The duration expected is the median of the
    evacuations that ended while the runs followed (accepted to done, by
    Nova's own stamps, so how late a poll saw one does not lengthen it),
    the poll interval until one has. The next poll is due when the
    longest-waiting caller's evacuation is expected to end, but never
    sooner after the previous poll started than the time in which
    ``CONFIRMS_PER_POLL`` of the callers' evacuations are expected to end
    (at most the duration, and at least the interval): one poll
    confirms several, and an evacuation overdue is looked at again that
    often. Never more than ``MAX_GAP`` apart either.

    One caller keeps the time: it waits until the poll is due, and makes
    it, for everyone, through its own run's Nova: a run whose lease is
    lost sends nothing more, not even this read (the next caller keeps
    the time instead). The others wait until a poll shows their
    evacuation ended, or their timeout: no caller wakes for a poll that
    does not concern it.
    """

    def __init__(self, clock: Clock):
        self._clock = clock
        self._lock = Lock()
        self._latest: dict[str, Migration] = {}
        # The newest updated_at of the migrations polled (Nova's clock).
        self._newest: datetime.datetime | None = None
        # Each following run: its start (wall clock), poll interval, and
        # the number of its baseline poll.
        self._runs: dict[int, tuple[datetime.datetime, float, int]] = {}
        self._next_run = 0
        self._started = 0         # polls started
        self._completed = 0       # polls that answered
        self._polling: Event | None = None    # set when the poll ends
        self._last_poll = float("-inf")      # when the last one started
        # The callers waiting for an evacuation to end, the longest
        # waiting first; the one that keeps the time, and when it wakes.
        self._waiters: dict[int, _Waiter] = {}
        self._next_waiter = 0
        self._keeper: int | None = None
        self._keeper_wakes = float("inf")
        self._durations: collections.deque[float] = collections.deque(
            maxlen=SAMPLES)

    @contextlib.contextmanager
    def follow(self, nova: Nova, interval: float) -> Iterator["Watch"]:
        """Poll for one run while it lasts, at most once per ``interval``
        (the shortest of the runs' wins). ``nova`` is the run's: its
        guard is checked whenever the run's caller wakes, and raises if
        the run may no longer act (its lease is lost)."""
        with self._lock:
            key = self._next_run
            self._next_run += 1
            # The run's baseline: a poll that starts from now on.
            baseline_poll = self._started + 1
            self._runs[key] = (self._clock.now(), interval, baseline_poll)
        try:
            yield Watch(self, baseline_poll, nova)
        finally:
            with self._lock:
                del self._runs[key]
                if not self._runs:
                    # Nothing kept between runs.
                    self._latest.clear()
                    self._durations.clear()
                    self._newest = None

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
        now = self._clock.monotonic()
        deadline = now + timeout
        waiter = _Waiter(instance_uuid, floor, now)
        with self._lock:
            token = self._next_waiter
            self._next_waiter += 1
            self._waiters[token] = waiter
            if self._keeper is not None and self._due() < self._keeper_wakes:
                # The next poll moved earlier: the time keeper is told.
                self._waiters[self._keeper].woken.set()
        try:
            while True:
                nova.check()
                with self._lock:
                    waiter.woken.clear()
                    migration = self._found(instance_uuid, floor,
                                            final=True)
                    if migration is not None:
                        self._learn(migration)
                        return migration
                    now = self._clock.monotonic()
                    if now >= deadline:
                        return None
                    if self._keeper is None:
                        self._keeper = token
                    event, wake, poll = waiter.woken, deadline, False
                    if self._keeper == token and self._polling is not None:
                        # A baseline's poll: the schedule is looked at
                        # again once it has answered.
                        event = self._polling
                        self._keeper_wakes = float("-inf")
                    elif self._keeper == token:
                        due = self._due()
                        poll = now >= due
                        if poll:
                            self._begin_poll()
                        else:
                            wake = self._keeper_wakes = min(due, deadline)
                if poll:
                    self._poll(nova)
                else:
                    self._clock.wait(event, wake - now)
        finally:
            with self._lock:
                del self._waiters[token]
                if self._keeper == token:
                    self._keeper = None
                    self._keeper_wakes = float("inf")
                if self._keeper is None:
                    # The next longest-waiting caller keeps the time. One
                    # woken for it as it leaves (the poll that ended the
                    # keeper's wait ended its own, or its timeout came)
                    # passes it on here in turn, so none is left asleep.
                    for other in self._waiters.values():
                        other.woken.set()
                        break

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
        if final and not (migration.failed or migration.done):
            return None
        return migration

    # -- the schedule ------------------------------------------------------
    def _learn(self, migration: Migration) -> None:
        """Under the lock: one more evacuation that ended, once for each
        caller that waited for it."""
        if migration.duration is not None:
            self._durations.append(migration.duration)

    def _due(self) -> float:
        """Under the lock, with someone waiting: when the next poll is
        due (monotonic)."""
        interval = min(i for _, i, _ in self._runs.values())
        expected = (statistics.median(self._durations) if self._durations
                    else interval)
        longest = next(iter(self._waiters.values()))
        spread = CONFIRMS_PER_POLL * expected / len(self._waiters)
        gap = max(interval, min(spread, expected, MAX_GAP))
        due = max(longest.since + expected, self._last_poll + gap)
        # However long the evacuations are expected to take.
        return min(due, max(self._last_poll, longest.since) + MAX_GAP)

    # -- polling ---------------------------------------------------------
    def _begin_poll(self) -> None:
        """Under the lock: this caller polls; the others wait for it."""
        self._started += 1
        self._polling = Event()
        self._last_poll = self._clock.monotonic()

    def _since(self) -> datetime.datetime:
        """Under the lock: how far back the poll starting now looks. As
        far as a run's start, less ``CLOCK_SKEW_MARGIN``, until a poll
        has answered since the run began following (its baseline: it
        must see the run's instances' older migrations); then only
        ``STAMP_MARGIN`` before the newest change seen, or before now
        if that is earlier. A migration not listed since is one that has
        not changed: its last state is in ``_latest``."""
        recent = (None if self._newest is None
                  else min(self._newest, self._clock.now()) - STAMP_MARGIN)
        return min(
            start - CLOCK_SKEW_MARGIN
            if recent is None or self._completed < baseline_poll
            else recent
            for start, _, baseline_poll in self._runs.values())

    def _poll(self, nova: Nova) -> None:
        with self._lock:
            since = self._since()
            done = self._polling
        try:
            migrations = nova.list_evacuations(
                changes_since=since.strftime("%Y-%m-%dT%H:%M:%SZ"))
            with self._lock:
                for migration in migrations:
                    known = self._latest.get(migration.instance_uuid)
                    if known is None or migration.id >= known.id:
                        self._latest[migration.instance_uuid] = migration
                    changed = migration.updated_at
                    if changed is not None and (self._newest is None
                                                or changed > self._newest):
                        self._newest = changed
                self._completed = self._started
                for waiter in self._waiters.values():
                    if self._found(waiter.instance_uuid, waiter.floor,
                                   final=True) is not None:
                        waiter.woken.set()
        finally:
            with self._lock:
                self._polling = None
            done.set()


class _Waiter:
    """A caller waiting for an instance's evacuation to end."""

    __slots__ = ("instance_uuid", "floor", "since", "woken")

    def __init__(self, instance_uuid: str, floor: int, since: float):
        self.instance_uuid = instance_uuid
        self.floor = floor
        self.since = since          # monotonic: when it began waiting
        self.woken = Event()


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
