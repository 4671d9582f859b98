"""Per-instance results and the per-host report of a recovery."""

import dataclasses
import datetime
import enum
from collections import Counter
from typing import Any
from typing import Protocol

from recovery.events import News


class Outcome(str, enum.Enum):
    RECOVERED = "recovered"
    FAILED = "failed"
    SKIPPED = "skipped"
    PLANNED = "planned"     # --dry-run: would be evacuated


# The method of a drain's or a bring-back's result (``method``).
LIVE_MIGRATION = "live-migration"


class Phase(str, enum.Enum):
    """Where an instance is in its recovery; recorded before each step."""

    PENDING = "pending"
    LOCKING = "locking"
    EVACUATING = "evacuating"
    MIGRATING = "migrating"     # a drain's live migration
    CONFIRMING = "confirming"
    RESTORING = "restoring"
    UNLOCKING = "unlocking"
    DONE = "done"


class StepName(enum.StrEnum):
    """Every step a run records, in one place. The values are what the
    store, the events and the API show (a StrEnum: byte-identical to the
    strings they replace)."""

    # A host failure (recovery.flows.host_failure).
    VERIFY_HOST_DOWN = "verify-host-down"
    FENCE = "fence"
    LIVENESS_PROBE = "liveness-probe"
    FORCE_DOWN = "force-down"
    DISABLE = "disable"
    LIST_INSTANCES = "list-instances"
    RESERVED_HOSTS = "reserved-hosts"
    CAPACITY_CHECK = "capacity-check"
    RECOVER_INSTANCES = "recover-instances"
    # A priority phase ran past phase_timeout and the next one started.
    PHASE_TIMEOUT = "phase-timeout"
    # Recovery's locks still on the run's instances are lifted.
    RELEASE_LOCKS = "release-locks"
    # A host drain (with disable, list-instances and capacity-check).
    VERIFY_HOST_UP = "verify-host-up"
    DRAIN_INSTANCES = "drain-instances"
    # A host return's last step, when asked: its instances come home.
    BRING_BACK = "bring-back"
    # A host return.
    CHECK_EVACUATIONS = "check-evacuations"
    AWAIT_HEARTBEAT = "await-heartbeat"
    LIFT_STORAGE_FENCE = "lift-storage-fence"
    CLEAR_FORCE_DOWN = "clear-force-down"
    ENABLE = "enable"
    # An instance failure.
    LOCK = "lock"
    STOP = "stop"
    START = "start"
    CONFIRM_ACTIVE = "confirm-active"
    UNLOCK = "unlock"
    # A process failure (disable and enable as above).
    AWAIT_SERVICE_UP = "await-service-up"


class StepState(str, enum.Enum):
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    REVERTED = "REVERTED"


@dataclasses.dataclass
class InstanceResult:
    uuid: str
    name: str
    source_host: str
    original_state: str
    dest_host: str | None = None
    final_state: str | None = None
    started_at: datetime.datetime | None = None
    finished_at: datetime.datetime | None = None
    outcome: Outcome | None = None
    reason: str | None = None
    phase: Phase = Phase.PENDING
    locked_by_us: bool = False
    # Evacuation migrations of this instance with a higher id than this
    # are this recovery's. Set before the evacuate is sent, so a resumed
    # run can ask Nova whether it acted before sending another.
    migration_floor: int | None = None
    # When the last evacuate was sent (recorded before it is). Until
    # [nova] timeout + late_request_margin after it, an evacuate whose
    # outcome is unknown may still reach Nova: none is sent again unless
    # Nova shows this one, failed.
    evacuate_sent_at: datetime.datetime | None = None
    # When a lock of ours had an unknown outcome (it may reach Nova after
    # the unlock): the run looks for it once the same window has passed.
    lock_uncertain_at: datetime.datetime | None = None
    # How the destination was chosen: "auto" (the scheduler) or
    # "reserved_host" (dest_host is a reserved host taken for this run);
    # "live-migration" for a drain's or a bring-back's, which moves a
    # running instance instead.
    method: str | None = None
    # Restart priority (higher first) and the 1-based phase it is
    # recovered in (None when [host_failure] priority_phases is false).
    priority: int | None = None
    priority_phase: int | None = None
    # Why the destination may lack capacity for it (a warning, not a
    # failure).
    capacity_warning: str | None = None
    # Its owner, as Nova named it. The project is journaled (the API
    # shows an owner its vmoves); the user is not: a resumed run's
    # results read from the journal have none until Nova is asked again.
    project_id: str | None = None
    user_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for key in ("started_at", "finished_at", "evacuate_sent_at",
                    "lock_uncertain_at"):
            data[key] = data[key].isoformat() if data[key] else None
        data["outcome"] = self.outcome.value if self.outcome else None
        data["phase"] = self.phase.value
        return data


class Recorder(Protocol):
    """Told of every change of a run, as it happens."""

    def instance_changed(self, result: InstanceResult) -> None:
        """An instance entered a phase or got its outcome."""

    def step_changed(self, step: str, state: str, message: str, *,
                     news: News | None = None,
                     instances: int | None = None) -> None:
        """A host-level step changed state (see ``StepState``).
        ``news``: the event the change records, as the step declares it.
        ``instances``: how many instances a step that starts works on,
        when it says (they are told of one by one as each starts)."""


@dataclasses.dataclass
class HostReport:
    host: str
    started_at: datetime.datetime
    finished_at: datetime.datetime | None = None
    instances: list[InstanceResult] = dataclasses.field(default_factory=list)
    dry_run: bool = False
    # What proved the host off when it was not its power: a storage
    # fence alone with its evidence, or an operator's confirmation. The
    # run's message says it.
    evidence: str | None = None

    def counts(self) -> dict[str, int]:
        counted = Counter(r.outcome.value for r in self.instances
                          if r.outcome)
        return {o.value: counted.get(o.value, 0) for o in Outcome}

    def summary(self) -> str:
        """The non-zero counts, e.g. "7 recovered, 1 skipped"."""
        return ", ".join(f"{n} {o}" for o, n in self.counts().items()
                         if n) or "no instances"

    @property
    def succeeded(self) -> bool:
        return not any(r.outcome is Outcome.FAILED for r in self.instances)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "dry_run": self.dry_run,
            "evidence": self.evidence,
            "started_at": self.started_at.isoformat(),
            "finished_at": (self.finished_at.isoformat()
                            if self.finished_at else None),
            "summary": self.counts(),
            "instances": [r.to_dict() for r in self.instances],
        }
