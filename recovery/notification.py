"""What a notification is: its kind, its status, and its record.

The kind is decided once, when a notification comes in (``classify``, at
the API and at the CLI's ``host-failure`` and ``host-return``), and is
stored with it. Everything after that (the engine's dispatch, the safety
gates, the store's counts) asks for the kind; nothing parses the payload
again to find out what a notification is.
"""

import dataclasses
import datetime
import enum
from typing import Any


class Status(str, enum.Enum):
    NEW = "new"
    RUNNING = "running"
    FINISHED = "finished"
    ERROR = "error"
    FAILED = "failed"
    IGNORED = "ignored"


# The origin of the notifications the engine's detector makes.
DETECTOR = "detector"

# The statuses of a notification still to be acted on.
IN_FLIGHT = (Status.NEW, Status.RUNNING, Status.ERROR)


class Kind(str, enum.Enum):
    """What recovery does about a notification."""

    HOST_FAILURE = "host_failure"   # COMPUTE_HOST STOPPED: evacuate
    HOST_RETURN = "host_return"     # COMPUTE_HOST STARTED: bring it back
    INSTANCE = "instance"           # VM: restart the instance
    PROCESS = "process"             # PROCESS: disable, later re-enable


# A COMPUTE_HOST notification's event, when the payload names none (the
# Masakari default): the host failed.
DEFAULT_EVENT = "STOPPED"
_HOST_EVENTS = {"STOPPED": Kind.HOST_FAILURE, "STARTED": Kind.HOST_RETURN}
_TYPES = {"VM": Kind.INSTANCE, "PROCESS": Kind.PROCESS}


def classify(type: str, payload: dict[str, Any]) -> Kind:
    """The kind of a notification of Masakari's ``type`` with ``payload``.

    Raises ``ValueError`` for a type, or a COMPUTE_HOST event, that no
    flow acts on: the intake validates both before it asks.
    """
    if type in _TYPES:
        return _TYPES[type]
    event = payload.get("event", DEFAULT_EVENT)
    if type == "COMPUTE_HOST" and event in _HOST_EVENTS:
        return _HOST_EVENTS[event]
    raise ValueError(f"a {type} notification with event {event!r} is not "
                     f"one recovery knows")


@dataclasses.dataclass
class Notification:
    id: int
    uuid: str
    type: str
    kind: Kind
    hostname: str
    generated_time: datetime.datetime
    payload: dict[str, Any]
    origin: str
    status: Status
    created_at: datetime.datetime
    updated_at: datetime.datetime
    # Masakari's: the host's entry in a failover segment, and the segment.
    source_host_uuid: str | None = None
    failover_segment_uuid: str | None = None
    message: str | None = None
    attempts: int = 0
    next_attempt_at: datetime.datetime | None = None
    owner: str | None = None
    lease_until: datetime.datetime | None = None
    version: int = 0
    started_at: datetime.datetime | None = None
    # The failure the detector saw, as "host@last heartbeat"; None for a
    # notification it did not make.
    detection: str | None = None

    @property
    def event(self) -> str:
        """The monitor's event: STOPPED or STARTED, for a host or a
        process."""
        return self.payload.get("event", DEFAULT_EVENT)


@dataclasses.dataclass(frozen=True)
class StepEvent:
    """One change of one step of a notification's run, as recorded."""

    step: str
    state: str
    progress: float
    message: str
    created_at: datetime.datetime
