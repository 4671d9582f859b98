"""The evidence rule: when a storage fence alone may prove a failed host
off.

A storage fence (a Ceph blocklist) cuts the host's clients off from its
guests' disks. The host itself may still run, its guests frozen on I/O
errors: a real fence, but one to use only when the host is lost to
everyone else. So the storage-only levels of a host are tried last, and
only when each of these holds (``Evidence``, the gate ``HostFence``
asks before such a level):

- power: none of the host's power devices answered anything. A BMC
  that answers, even that the host is On, has power: the host may be
  live (``bmc_answered``);
- probe: the host is silent on every port of every one of its probe
  addresses (``[detector] liveness_probe`` and ``probe_addresses``); a
  host with no probe is held (``no_probe``);
- engines: a majority of the live engines see it silent, by the fast
  path's rule over their probe views. An engine cut off from the hosts
  has withdrawn its views already (``no_agreement``);
- storage: its clients hold no watch of its instances' images. A dead
  client's watch outlives it by the storage's watch timeout, so a watch
  listed while the host has been silent for less is inconclusive; one
  still listed after that means the host still talks to its storage, so
  it is not lost to everyone (``ceph_talks``).

The storage fence must then succeed and be read back (its device does
that). Each decision is an event (``evidence``) saying which condition
held and which did not, and the proof or the hold says it again.
"""

import dataclasses
import logging
from collections.abc import Callable
from collections.abc import Sequence
from typing import cast

from recovery import exception
from recovery.exception import FenceHoldCause
from recovery.fencing import DeviceAttempt
from recovery.fencing import DeviceKind
from recovery.fencing import Level
from recovery.fencing import StorageFence
from recovery.flows.host_context import HostContext
from recovery.models import Server

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One condition of the rule: whether it held, and what was seen;
    ``cause``: the hold when it did not."""

    condition: str
    held: bool
    says: str
    cause: FenceHoldCause | None = None

    def describe(self) -> str:
        return f"{self.condition} {'yes' if self.held else 'NO'}: {self.says}"


class Evidence:
    """The rule for one host's fencing, as its levels' gate: the
    evidence's words, or ``FenceHeld`` with the first condition that did
    not hold. ``say`` hears each decision."""

    def __init__(self, ctx: HostContext, say: Callable[[str], None]):
        self.ctx = ctx
        self.say = say

    def __call__(self, attempts: Sequence[DeviceAttempt],
                 level: Level) -> str:
        findings = [power(attempts), self.probe(), self.engines(),
                    self.storage(level)]
        text = "; ".join(finding.describe() for finding in findings)
        failed = [finding for finding in findings if not finding.held]
        if failed:
            cause = cast(FenceHoldCause, failed[0].cause)
            message = f"a storage fence alone is refused ({cause}): {text}"
            LOG.warning("%s: %s", self.ctx.host, message)
            self.say(message)
            raise exception.FenceHeld(message, cause)
        LOG.info("%s: a storage fence alone is accepted: %s", self.ctx.host,
                 text)
        self.say(f"a storage fence alone is accepted: {text}")
        return text

    def probe(self) -> Finding:
        host, probe = self.ctx.host, self.ctx.env.settings.liveness_probe
        if probe is None:
            return Finding("probe", False, "no [detector] liveness_probe: "
                           "its silence cannot be checked",
                           FenceHoldCause.NO_PROBE)
        try:
            answer = probe.answer(host)
        except exception.ProbeFailed as exc:
            return Finding("probe", False, str(exc), FenceHoldCause.NO_PROBE)
        if answer is not None:
            return Finding("probe", False, answer,
                           FenceHoldCause.PROBE_ANSWERED)
        return Finding("probe", True, f"silent on {probe.describe(host)}")

    def engines(self) -> Finding:
        agreement = None
        if self.ctx.engines is not None:
            agreement = self.ctx.engines.agreement(
                self.ctx.host, self.ctx.env.settings.silence_window)
            if agreement.reached:
                return Finding("engines", True, agreement.describe())
        earlier = self._proved_earlier()
        if earlier is not None:
            return earlier
        if agreement is None:
            return Finding("engines", False, "no engine's probe views to "
                           "ask", FenceHoldCause.NO_AGREEMENT)
        return Finding("engines", False, agreement.describe(),
                       FenceHoldCause.NO_AGREEMENT)

    def _proved_earlier(self) -> Finding | None:
        """An earlier attempt of this failure proved the host off and
        evacuated on that proof. The engines stop probing a host once it
        is isolated, so their views are gone on a retry: the earlier
        proof stands for them (the power and the probe are asked
        again)."""
        sent = [r for r in self.ctx.journal.values()
                if r.evacuate_sent_at is not None]
        if not sent:
            return None
        return Finding("engines", True, (
            f"an earlier attempt of this failure proved it off and "
            f"evacuated {len(sent)} instance(s) on that proof (the engines "
            f"stop probing a host once it is isolated)"))

    def storage(self, level: Level) -> Finding:
        """The watches of the host's instances' images, from each
        storage device of ``level``."""
        servers = self.ctx.env.nova.list_servers(self.ctx.host)
        if not servers:
            return Finding("storage", True, "no instance on it: no image "
                           "to watch")
        said = []
        for device in level.devices:
            finding = self._watches(cast(StorageFence, device.fencer),
                                    device.name, servers)
            if not finding.held:
                return finding
            said.append(finding.says)
        return Finding("storage", True, "; ".join(said))

    def _watches(self, fencer: StorageFence, name: str,
                 servers: list[Server]) -> Finding:
        clock = self.ctx.env.clock
        try:
            watchers = fencer.watchers(servers, clock)
        except exception.FencingError as exc:
            return Finding("storage", False, f"{name}: cannot list the "
                           f"watchers of its images: {exc}",
                           FenceHoldCause.FENCE_FAILED)
        if not watchers:
            return Finding("storage", True, f"{name}: no watch of its "
                           f"{len(servers)} instance(s)' images from its "
                           f"addresses")
        listed = ", ".join(watchers)
        timeout = fencer.watch_timeout
        if (self.ctx.engines is not None and self.ctx.engines.agreement(
                self.ctx.host, timeout).reached):
            return Finding("storage", False, (
                f"{name}: its images are still watched from its addresses "
                f"({listed}) after it was silent for the watch timeout "
                f"({timeout:g} s): it still talks to its storage, so it is "
                f"not lost to everyone"), FenceHoldCause.CEPH_TALKS)
        return Finding("storage", True, (
            f"{name}: watched from its addresses ({listed}), but it has "
            f"been silent for less than the watch timeout ({timeout:g} "
            f"s), which a dead client's watch outlives it by: "
            f"inconclusive"))


def power(attempts: Sequence[DeviceAttempt]) -> Finding:
    """Whether every power device tried was out of reach."""
    tried = [a for a in attempts if a.device_kind is DeviceKind.POWER]
    answered = [a for a in tried if a.reached]
    if answered:
        return Finding("power", False, "; ".join(
            f"{a.device} answered ({a.answer})" for a in answered)
            + ": a BMC that answers has power, so the host may be live",
            FenceHoldCause.BMC_ANSWERED)
    if not tried:
        return Finding("power", True, "no power device to ask")
    return Finding("power", True, "no power device answered at all ("
                   + ", ".join(a.device for a in tried) + ")")
