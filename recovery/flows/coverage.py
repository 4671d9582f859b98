"""Which instances a storage fence covers: those whose every disk is on
the fenced storage. A host proved off by a storage fence alone may
still run, and an instance with a disk elsewhere (a local root or
ephemeral disk) could still write it there: it is never evacuated on
that proof. It is held instead (an instance outcome FAILED, whose reason
starts "held:" and says which disk), so that the run ends in error and
is tried again: a later attempt whose power proof works, or an
operator's confirmation ('recovery fencing confirm HOST'), moves it.

A dry run, which fences nothing, says of each instance of a host that
has a storage-only level whether that level alone would cover it.
"""

import logging
from collections.abc import Sequence
from typing import cast

from recovery import concurrency
from recovery.exception import FencingError
from recovery.fencing import Fencer
from recovery.fencing import StorageFence
from recovery.flows.host_context import HostContext
from recovery.flows.triage import settle
from recovery.models import Server
from recovery.results import InstanceResult
from recovery.results import Outcome

LOG = logging.getLogger(__name__)

Selected = list[tuple[Server, InstanceResult]]


def of(fencers: Sequence[Fencer], servers: Sequence[Server],
       clock: concurrency.Clock) -> dict[str, str | None]:
    """Each server's uuid: None when one of the storage ``fencers``
    covers every disk of it, else why none does."""
    reasons: dict[str, list[str]] = {server.id: [] for server in servers}
    covered: set[str] = set()
    for fencer in fencers:
        try:
            found = cast(StorageFence, fencer).coverage(servers, clock)
        except FencingError as exc:
            found = {server.id: f"its disks could not be checked "
                                f"({exc})" for server in servers}
        for uuid, reason in found.items():
            if reason is None:
                covered.add(uuid)
            elif uuid in reasons:
                reasons[uuid].append(reason)
    return {uuid: None if uuid in covered else
            "; ".join(dict.fromkeys(said)) or "no storage fence answered "
                                                "for it"
            for uuid, said in reasons.items()}


def hold_uncovered(ctx: HostContext, selected: Selected) -> Selected:
    """With a storage-only proof, hold each instance it does not cover;
    return the others. An instance whose evacuation an earlier run sent
    went ahead on that run's proof: it is not held now."""
    proof = ctx.proof
    if proof is None or not proof.storage_only:
        return selected
    unsent = [server for server, result in selected
              if result.evacuate_sent_at is None]
    if not unsent:
        return selected
    found = of(proof.storage, unsent, ctx.env.clock)
    kept = []
    for server, result in selected:
        reason = found.get(server.id)
        if reason is None:
            kept.append((server, result))
            continue
        LOG.warning("%s: instance %s (%s) held: %s", ctx.host, server.id,
                    server.name, reason)
        settle(ctx, result, Outcome.FAILED, held(ctx.host, reason))
    return kept


def held(host: str, reason: str) -> str:
    """An instance's reason when a storage fence alone does not cover
    it."""
    return (f"held: not covered by the storage fence, the only proof that "
            f"{host} is off: {reason}. Never evacuated on that proof: once "
            f"you have made sure {host} is off, 'recovery fencing confirm "
            f"{host} --reason ...' releases it")


def planned(ctx: HostContext, selected: Selected) -> dict[str, str | None]:
    """For a dry run of a host with a storage-only level: whether that
    level alone would cover each selected instance ({} when the host
    has none)."""
    fencers = ctx.fencer.storage if ctx.fencer is not None else ()
    if not fencers:
        return {}
    return of(fencers, [server for server, _ in selected], ctx.env.clock)


def note(reason: str | None) -> str:
    """What a plan says of an instance's coverage."""
    if reason is None:
        return "covered by the storage fence alone"
    return (f"not covered by the storage fence alone ({reason}): held if "
            f"that is the only proof")
