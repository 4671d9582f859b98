"""What an operator is told: the kinds of events, a decision to record,
an event as recorded, and the news a step's change brings.

Below the store and the flows alike: a step declares the events its
changes record (``News``) without knowing the store, and the store
(``recovery.db.events``) records them.
"""

import dataclasses
import datetime
import enum


class EventKind(str, enum.Enum):
    """What an event says happened: a short code for listings."""

    RECEIVED = "received"           # a notification stored, to act on
    IGNORED = "ignored"             # stored, not acted on (the reason)
    HELD = "held"                   # a gate holds it (the verdict)
    RELEASED = "released"           # a gate let it go after a hold
    CLAIMED = "claimed"             # an attempt starts
    TAKEN_OVER = "taken-over"       # a dead holder's run resumed
    FENCED = "fenced"               # powered off, verified Off
    FENCE_FAILED = "fence-failed"
    FENCE_ATTEMPT = "fence-attempt"  # one device of a level: its answer
    EVIDENCE = "evidence"           # the evidence rule's decision on a
                                    # storage fence alone: which held
    CONFIRMED = "confirmed"         # an operator's word: the host is off
    UNFENCED = "unfenced"           # host-return lifted a storage fence
    UNFENCE_FAILED = "unfence-failed"
    PROBE_SILENT = "probe-silent"   # the liveness probe: no answer
    PROBE_ANSWERED = "probe-answered"
    ISOLATED = "isolated"           # forced down and disabled in Nova
    CAPACITY = "capacity"           # the room predicted for the instances
    CAPACITY_SHORT = "capacity-short"  # fewer failures tolerated than asked
    CAPACITY_OK = "capacity-ok"     # as many as asked again
    SIMULATED = "simulated"         # 'recovery simulate' ran, nothing done
    UNDONE = "undone"               # an isolation step rolled back
    EVACUATING = "evacuating"       # an instance's evacuation starts
    RECOVERED = "recovered"
    FAILED = "failed"               # an instance, or a run given up
    SKIPPED = "skipped"
    PHASE_TIMEOUT = "phase-timeout"  # a priority phase ran late
    FINISHED = "finished"           # a run's end
    ERROR = "error"                 # a run's end, retried
    SUSPECT = "suspect"             # the detector: seen down
    AGREED = "agreed"               # the detector: engines see it silent
    CLEARED = "cleared"             # the detector: heartbeats again
    DISARMED = "disarmed"
    ARMED = "armed"
    BUS_DROPPED = "bus-dropped"     # notifications for the bus dropped
    HEALTH = "health"               # a host's hardware health changed


@dataclasses.dataclass(frozen=True)
class Decision:
    """An event to record: who decided what about which subject (a host
    name, or an instance's "name (uuid)"), and why."""

    actor: str
    subject: str
    kind: EventKind
    message: str


@dataclasses.dataclass(frozen=True)
class Event:
    """An event as stored. ``kind`` is kept as text: an engine of a
    newer version may record kinds this one does not know."""

    id: int
    notification_uuid: str | None
    created_at: datetime.datetime
    actor: str
    subject: str
    kind: str
    message: str


@dataclasses.dataclass(frozen=True)
class News:
    """What a step's change tells an operator: an event of ``kind`` about
    the run's host, in ``words``, or in the step's own message when
    ``words`` is None. A step declares its news by state
    (``flows.base.Step.news``); the run's recorder records it with the
    step's change, in the same write."""

    kind: EventKind
    words: str | None = None
