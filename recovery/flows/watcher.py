"""One poll of a host's evacuations serves every instance in flight."""

import datetime

from recovery.concurrency import Clock
from recovery.concurrency import Lock
from recovery.models import Migration
from recovery.nova import Nova

# Nova compares changes-since with its own clock. Look this far back so a
# controller whose clock runs ahead of Nova's still sees every migration;
# an older migration of the same instance is told apart by its lower id.
CLOCK_SKEW_MARGIN = datetime.timedelta(hours=1)


class EvacuationWatcher:
    """The newest evacuation migration of each instance from one host.

    Every caller may ask at any time; Nova is asked at most once per
    ``interval`` seconds, whatever the number of callers. The first poll
    is the baseline: what existed before this run sent any evacuate.
    """

    def __init__(self, nova: Nova, source_host: str, clock: Clock,
                 interval: float):
        self._nova = nova
        self._source_host = source_host
        self._clock = clock
        self._interval = interval
        since = clock.now() - CLOCK_SKEW_MARGIN
        self._since = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        self._lock = Lock()
        self._latest: dict[str, Migration] = {}
        self._baseline: dict[str, int] | None = None
        self._polled_at: float | None = None

    def baseline(self, instance_uuid: str) -> int:
        """The id of the instance's newest evacuation before this run
        (0 if none): the floor above which migrations are this run's."""
        with self._lock:
            if self._baseline is None:
                self._poll()
            return self._baseline.get(instance_uuid, 0)

    def latest(self, instance_uuid: str, floor: int, fresh: bool = False
               ) -> Migration | None:
        """The newest evacuation of the instance with an id above
        ``floor``, polled at most once per interval; ``fresh`` forces a
        poll (to check whether an evacuate was acted on)."""
        with self._lock:
            now = self._clock.monotonic()
            if (fresh or self._polled_at is None
                    or now - self._polled_at >= self._interval):
                self._poll()
            migration = self._latest.get(instance_uuid)
            if migration is None or migration.id <= floor:
                return None
            return migration

    def _poll(self) -> None:
        self._polled_at = self._clock.monotonic()
        for migration in self._nova.list_evacuations(self._source_host,
                                                     self._since):
            known = self._latest.get(migration.instance_uuid)
            if known is None or migration.id >= known.id:
                self._latest[migration.instance_uuid] = migration
        if self._baseline is None:
            self._baseline = {uuid: m.id for uuid, m in self._latest.items()}
