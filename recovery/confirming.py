"""Taking an operator's confirmation that a failed host is off: the proof
a human gives after checking it, when no fencing device can (``recovery
fencing confirm HOST --reason TEXT``, and ``POST
/v1/fencing/{hostname}/confirm``), as Pacemaker's ``stonith_admin
--confirm``.

It is for the host's current failure only: the store records it on that
notification (``Store.confirm_fenced``), and a later failure has none.
It is refused, before anything is recorded, while anything shows the
host may still run: Nova hears from its nova-compute (``recovery.census``,
as the host-failure flow judges it), or the host answers the liveness
probe (``[detector] liveness_probe``) on any of its addresses, or cannot
be probed. With no probe configured, Nova's view is all that is checked,
and the answer says so.
"""

import dataclasses
import datetime
from typing import Any
from typing import Protocol

from recovery import exception
from recovery.census import Census
from recovery.concurrency import Clock
from recovery.confirmation import Confirmation
from recovery.models import ComputeService
from recovery.nova import Nova
from recovery.probe import Probe


class ConfirmStore(Protocol):
    """What taking a confirmation needs from the store."""
    def confirm_fenced(self, hostname: str, user: str, reason: str,
                       now: datetime.datetime) -> Confirmation: ...


class OffCheck(Protocol):
    """What shows a host may be off: ``silent`` says what was checked,
    or raises ``HostNotDown`` with what shows it may run."""
    def silent(self, host: str) -> str: ...


@dataclasses.dataclass(frozen=True)
class Liveness:
    """Nova's heartbeats of a host, and the liveness probe (None: not
    configured)."""

    nova: Nova
    down_after: float       # Nova's service_down_time ([safety])
    probe: Probe | None

    @classmethod
    def from_conf(cls, conf: Any, nova: Nova) -> "Liveness":
        return cls(nova, conf.safety.service_down_time,
                   Probe.from_conf(conf))

    def silent(self, host: str) -> str:
        """What shows ``host`` silent, for the operator. Raises
        ``HostNotDown`` when Nova hears from it, it answers the probe, or
        it cannot be probed; ``UnknownHost``; a Nova error when Nova
        cannot say."""
        census = Census.take(self.nova, self.down_after)
        service = census.compute(host)
        if census.heartbeats(service):
            raise _refused(f"Nova still hears from the compute service of "
                           f"{host} ({census.describe(service)}): a host "
                           f"that heartbeats is not off")
        nova = f"Nova hears nothing from {host}: {_quiet(census, service)}"
        if self.probe is None:
            return (f"{nova}; no liveness probe to ask ([detector] "
                    f"liveness_probe is not set)")
        try:
            answer = self.probe.answer(host)
        except exception.ProbeFailed as exc:
            raise _refused(f"{exc}: its silence cannot be shown") from exc
        if answer is not None:
            raise _refused(f"{answer}: a host that answers is not off")
        return f"{nova}, and no answer on {self.probe.describe(host)}"


def _quiet(census: Census, service: ComputeService) -> str:
    if service.updated_at is None or census.nova_now is None:
        return "it has never reported"
    age = (census.nova_now - service.updated_at).total_seconds()
    return f"its last heartbeat is {age:.0f} s old by Nova's clock"


def _refused(why: str) -> exception.HostNotDown:
    return exception.HostNotDown(
        f"refused: {why}, and its guests could run twice. Nothing was "
        f"recorded")


@dataclasses.dataclass(frozen=True)
class Confirmed:
    """A confirmation taken, and what was checked before it."""

    confirmation: Confirmation
    checked: str


def confirm(store: ConfirmStore, liveness: OffCheck, host: str, user: str,
            reason: str, clock: Clock) -> Confirmed:
    """Check that ``host`` may be off (``liveness``), then record
    ``user``'s confirmation; ``HostNotDown`` (nothing recorded) when it
    may run, ``NotFound`` when no recovery of it waits for a proof."""
    checked = liveness.silent(host)
    return Confirmed(store.confirm_fenced(host, user, reason, clock.now()),
                     checked)
