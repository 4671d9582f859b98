"""What the steps of one host-failure run share: the host, what Nova and
the journal said of it, and what the run changed, so that a failure
undoes only that."""

import dataclasses
import datetime
from collections.abc import Callable
from typing import Protocol

from recovery.confirmation import Confirmation
from recovery.fencing import HostFence
from recovery.fencing import Proof
from recovery.flows.context import Env
from recovery.flows.placement import Placement
from recovery.flows.placement import auto
from recovery.models import ComputeService
from recovery.models import Server
from recovery.pacing import LagBook
from recovery.probe import Probe
from recovery.results import HostReport
from recovery.results import InstanceResult

Confirmed = Callable[[], Confirmation | None]


class Majority(Protocol):
    """Whether a majority of the live engines see a host silent."""

    @property
    def reached(self) -> bool: ...

    def describe(self) -> str: ...


class EngineViews(Protocol):
    """What the engines' probes say of a host: the engine's side
    implements it from the views they keep in the store, by the fast
    path's majority (a flow does not ask the store itself)."""

    def agreement(self, host: str, window: float) -> Majority:
        """Which live engines have seen ``host`` silent on their probes
        for ``window`` seconds at least, lately; a majority or not."""


@dataclasses.dataclass
class HostContext:
    env: Env
    host: str
    fencer: HostFence | None
    report: HostReport
    # The probe whose silence proves the host off (no fencer), if any.
    liveness: Probe | None = None
    # The detector's: the heartbeat the failure was judged on. A newer
    # one proves the host alive.
    heartbeat: datetime.datetime | None = None
    # An operator's confirmation that the host is off, if one was given
    # for this failure: asked when fencing starts, and when it fails.
    confirmed: Confirmed | None = None
    # The engines' views of the host, for the evidence rule.
    engines: EngineViews | None = None
    # Where each fencing device's lag is learned, to pace its requests.
    lags: LagBook | None = None
    # What proved the host off (None: not fenced by this run).
    proof: Proof | None = None
    placement: Placement = dataclasses.field(default_factory=auto)
    service: ComputeService | None = None
    # Every Nova service as the last census saw it: the capacity
    # forecast reads the other hosts there instead of asking again.
    services: tuple[ComputeService, ...] = ()
    forced_down_by_us: bool = False
    disabled_by_us: bool = False
    servers: list[Server] = dataclasses.field(default_factory=list)
    # Earlier runs' results not yet taken up by this run, by instance.
    journal: dict[str, InstanceResult] = dataclasses.field(
        default_factory=dict)
    # The 1-based phase of each restart priority; a resumed run starts
    # from its journal's, so each instance keeps its phase.
    phase_of: dict[int, int] = dataclasses.field(default_factory=dict)
