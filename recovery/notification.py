"""What a notification is: its kind, its status, and its record.

The kind is decided once, when a notification comes in (``classify``, at
the intake of the API's, the detector's and the CLI's ``host-failure``
and ``host-return``), and is stored with it. Everything after that (the
engine's dispatch, the safety gates, the store's counts) asks for the
kind; nothing parses the payload again to find out what a notification
is.

The type (``NotificationType``) is Masakari's word for what a monitor
reports, on the wire and in the store; the kind is recovery's for what it
does about it. One type may be two kinds (COMPUTE_HOST STOPPED and
STARTED), and each kind has one type (``Kind.type``).
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


# The origins of notifications: a monitor's, through the API; the
# engine's detector's; an operator's command ('recovery host-failure').
API = "api"
DETECTOR = "detector"
CLI = "cli"
# The engine's watch of the hosts' hardware health (a drain it starts).
HEALTH = "health"

# The statuses of a notification still to be acted on.
IN_FLIGHT = (Status.NEW, Status.RUNNING, Status.ERROR)


class NotificationType(str, enum.Enum):
    """Masakari's notification types: what a monitor reports (the API's
    ``type``, stored as it is). Compare and store its ``value``: in
    messages, an enum member does not read as its value."""

    COMPUTE_HOST = "COMPUTE_HOST"
    PROCESS = "PROCESS"
    VM = "VM"


class Kind(str, enum.Enum):
    """What recovery does about a notification."""

    HOST_FAILURE = "host_failure"   # COMPUTE_HOST STOPPED: evacuate
    HOST_RETURN = "host_return"     # COMPUTE_HOST STARTED: bring it back
    HOST_DRAIN = "host_drain"       # recovery's own: live-migrate all away
    INSTANCE = "instance"           # VM: restart the instance
    PROCESS = "process"             # PROCESS: disable, later re-enable

    @property
    def type(self) -> NotificationType:
        """The Masakari type of a notification of this kind."""
        return _TYPE_OF[self]


_TYPE_OF = {Kind.HOST_FAILURE: NotificationType.COMPUTE_HOST,
            Kind.HOST_RETURN: NotificationType.COMPUTE_HOST,
            Kind.HOST_DRAIN: NotificationType.COMPUTE_HOST,
            Kind.INSTANCE: NotificationType.VM,
            Kind.PROCESS: NotificationType.PROCESS}

# A COMPUTE_HOST notification's event, when the payload names none (the
# Masakari default): the host failed.
DEFAULT_EVENT = "STOPPED"
_HOST_EVENTS = {"STOPPED": Kind.HOST_FAILURE, "STARTED": Kind.HOST_RETURN}
# The COMPUTE_HOST event of each kind of host run. A drain's is
# recovery's own: no monitor sends it, and the intake takes none.
HOST_EVENT = {**{kind: event for event, kind in _HOST_EVENTS.items()},
              Kind.HOST_DRAIN: "DRAIN"}
_TYPES = {NotificationType.VM: Kind.INSTANCE,
          NotificationType.PROCESS: Kind.PROCESS}
# The command an operator runs each kind of host run with, by hand.
COMMANDS = {Kind.HOST_FAILURE: "host-failure",
            Kind.HOST_RETURN: "host-return", Kind.HOST_DRAIN: "host-drain"}


def classify(type: str, payload: dict[str, Any]) -> Kind:
    """The kind of a notification of Masakari's ``type`` with ``payload``.

    Raises ``ValueError`` for a type, or a COMPUTE_HOST event, that no
    flow acts on: the intake validates both before it asks.
    """
    known = next((t for t in NotificationType if t.value == type), None)
    if known in _TYPES:
        return _TYPES[known]
    event = payload.get("event", DEFAULT_EVENT)
    if known is NotificationType.COMPUTE_HOST and event in _HOST_EVENTS:
        return _HOST_EVENTS[event]
    said = type if known is None else known.value
    raise ValueError(f"a {said} notification with event {event!r} is not "
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
    # The failure domain, down as a whole, its first attempt started as
    # part of (the per-window cap counts the domain once).
    failure_domain: str | None = None

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
    # How many instances the step said it starts on, when it said (None
    # too for a row recorded before schema 0016).
    instances: int | None = None
