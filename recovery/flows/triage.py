"""Triage, for a host-failure run: one result per instance of the host,
the skipped ones settled, the others in recovery order (highest restart
priority first, numbered into phases), each taken up from the journal
where an earlier run left it."""

import logging

from recovery.flows.host_context import HostContext
from recovery.flows.priority import priority_of
from recovery.flows.selection import order_for_recovery
from recovery.flows.selection import skip_reason
from recovery.models import Server
from recovery.results import InstanceResult
from recovery.results import Outcome

LOG = logging.getLogger(__name__)

DONE_OUTCOMES = frozenset({Outcome.RECOVERED, Outcome.SKIPPED})


def finished(prior: InstanceResult) -> bool:
    """Whether an earlier run finished the instance: its outcome is final
    and our lock no longer holds it (a run can end between recording the
    outcome and the unlock; the next one unlocks it)."""
    return prior.outcome in DONE_OUTCOMES and not prior.locked_by_us


def new_result(ctx: HostContext, server: Server) -> InstanceResult:
    result = InstanceResult(uuid=server.id, name=server.name,
                            source_host=ctx.host,
                            original_state=server.vm_state,
                            project_id=server.project_id,
                            user_id=server.user_id)
    ctx.report.instances.append(result)
    return result


def settle(ctx: HostContext, result: InstanceResult, outcome: Outcome,
           reason: str | None) -> None:
    result.outcome, result.reason = outcome, reason
    ctx.env.recorder.instance_changed(result)


def triage(ctx: HostContext,
           servers: list[Server]) -> list[tuple[Server, InstanceResult]]:
    """Record a result for each server; settle the skipped ones and return
    the others, in recovery order. A server an earlier run finished keeps
    its result; one it left in flight or failed is taken up again with its
    journal entry, whose original state predates any reset of ours."""
    settings = ctx.env.settings
    entries = []
    for server in order_for_recovery(servers, settings):
        prior = ctx.journal.pop(server.id, None)
        priority, note = priority_of(server, settings)
        if prior is not None and prior.priority is not None:
            priority, note = prior.priority, None
        entries.append((server, prior, priority, note))
    # Highest priority first; within one, the order above (stable sort).
    entries.sort(key=lambda entry: -entry[2])
    selected = []
    for server, prior, priority, note in entries:
        if prior is not None and finished(prior):
            ctx.report.instances.append(prior)
        elif prior is not None:
            prior.outcome = prior.reason = None
            prior.priority = priority
            prior.project_id, prior.user_id = server.project_id, server.user_id
            ctx.report.instances.append(prior)
            selected.append((server, prior))
        elif reason := skip_reason(server, settings):
            result = new_result(ctx, server)
            result.priority = priority
            settle(ctx, result, Outcome.SKIPPED, reason)
        else:
            result = new_result(ctx, server)
            result.priority = priority
            if note:
                # Said once: each instance is triaged once per run.
                LOG.warning("Instance %s (%s): %s", server.id, server.name,
                            note)
                result.reason = note
            selected.append((server, result))
    _number_phases(ctx, [result for _, result in selected])
    selected.sort(key=lambda entry: entry[1].priority_phase or 0)
    return selected


def _number_phases(ctx: HostContext, results: list[InstanceResult]) -> None:
    """Give each result its phase: the one its journal entry holds, else
    its priority's; a priority new to the run gets the next number, the
    highest first. None without priority_phases."""
    if not ctx.env.settings.priority_phases:
        for result in results:
            result.priority_phase = None
        return
    new = {r.priority for r in results if r.priority_phase is None}
    for priority in sorted(new - ctx.phase_of.keys(), reverse=True):
        ctx.phase_of[priority] = max(ctx.phase_of.values(), default=0) + 1
    for result in results:
        if result.priority_phase is None:
            result.priority_phase = ctx.phase_of[result.priority]

