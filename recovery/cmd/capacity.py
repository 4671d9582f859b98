"""``recovery capacity`` and ``recovery simulate``: before a failure,
how many the cloud can absorb, and what a given one would do.

Both read today's Nova and Placement and change nothing in them; the
simulation records one event, that it ran.
"""

import argparse
import json
from typing import Any

import prettytable

from recovery.cmd import output
from recovery.engine.capacity import View
from recovery.engine.simulation import Simulation
from recovery.flows import Plan
from recovery.models import Need
from recovery.results import Outcome


def add_parsers(commands: Any) -> None:
    """Register ``capacity`` and ``simulate``."""
    what = ("How many host failures each failover segment (or the "
            "detector's watched hosts) can absorb, the most loaded hosts "
            "failing first; each host's HA load, the free room, and where "
            "each host's instances would go if it failed. Reads Nova and "
            "Placement only.")
    view = commands.add_parser("capacity", help="Failures tolerated, per "
                                                "segment.",
                               description=what)
    _format(view)
    what = ("A game day with no side effects: what the failure of these "
            "hosts, at once, would do now: which instances go where, by "
            "phase, which are skipped and why, which gates would hold, "
            "and how long it would take, from this cloud's past "
            "evacuations. Reads Nova and Placement only; records one "
            "event, that the simulation ran.")
    game = commands.add_parser("simulate", help="Simulate host failures.",
                               description=what)
    game.add_argument("--fail", required=True, metavar="HOST[,HOST...]",
                      type=_hosts,
                      help="The hosts that fail, as Nova names them.")
    _format(game)


def _format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("table", "json"),
                        default="table",
                        help="Output format (default: table).")
    parser.add_argument("--json", dest="format", action="store_const",
                        const="json", help="The same as --format json.")


def _hosts(value: str) -> list[str]:
    hosts = [h.strip() for h in value.split(",") if h.strip()]
    if not hosts or len(set(hosts)) != len(hosts):
        raise argparse.ArgumentTypeError(
            f"{value!r}: name each host once, separated by commas")
    return hosts


def _need(need: Need) -> dict[str, int]:
    return {"VCPU": need.vcpus, "MEMORY_MB": need.ram_mb,
            "DISK_GB": need.disk_gb}


def _where(plan: Plan) -> list[str]:
    """Each instance of a plan: where it goes, or why it does not."""
    found = []
    destinations = plan.forecast.destinations if plan.forecast else {}
    short = plan.forecast.short if plan.forecast else ()
    for result in plan.report.instances:
        name = result.name or result.uuid
        if result.outcome is Outcome.SKIPPED:
            found.append(f"{name}: skipped ({result.reason})")
            continue
        if destinations.get(result.uuid):
            where = f"{name} -> {destinations[result.uuid]}"
        elif result.uuid in short:
            where = f"{name}: NO ROOM"
        else:
            where = f"{name}: the scheduler picks (flavor unknown)"
        if result.uuid in plan.coverage:
            reason = plan.coverage[result.uuid]
            where += ("; storage fence covers it" if reason is None else
                      f"; NOT covered by the storage fence ({reason})")
        found.append(where)
    return found


def _plan_dict(plan: Plan) -> dict[str, Any]:
    body = plan.report.to_dict()
    destinations = plan.forecast.destinations if plan.forecast else {}
    for result in body["instances"]:
        result["predicted_host"] = destinations.get(result["uuid"])
        result["no_room"] = bool(plan.forecast) and (
            result["uuid"] in plan.forecast.short)
        # A host with a storage-only fencing level: whether it alone
        # covers the instance (null: the host has none).
        covered = result["uuid"] in plan.coverage
        result["storage_covered"] = (
            plan.coverage[result["uuid"]] is None if covered else None)
        result["storage_not_covered_why"] = (
            plan.coverage[result["uuid"]] if covered else None)
    return body


def render_view(view: View, fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"failures_to_tolerate": view.target, "segments": [
            {"segment": t.group.name, "hosts": list(t.group.hosts),
             "failures_tolerated": t.tolerated,
             "below_target": t.tolerated < view.target,
             "free": _need(t.free), "breaks": t.breaks,
             "ha_load": [{"host": h.host, "instances": h.instances,
                          "load": _need(h.load)} for h in t.order],
             "if_failed": {p.report.host: _plan_dict(p) for p in plans}}
            for t, plans in view.groups]}, indent=2, sort_keys=True)
    blocks = []
    for tolerance, plans in view.groups:
        below = ("  BELOW [capacity] failures_to_tolerate = "
                 f"{view.target}" if tolerance.tolerated < view.target
                 else "")
        lines = [f"Segment {tolerance.group.name}: tolerates "
                 f"{tolerance.tolerated} host failure(s) of "
                 f"{len(tolerance.group.hosts)}{below}",
                 f"  free room: {tolerance.free}"]
        if tolerance.breaks:
            lines.append(f"  one more: {tolerance.breaks}")
        table = prettytable.PrettyTable(
            ["Host", "HA instances", "HA load", "If it failed"])
        table.align = "l"
        table.max_width["If it failed"] = 80
        load = {h.host: h for h in tolerance.order}
        for plan in plans:
            host = load.get(plan.report.host)
            table.add_row([plan.report.host,
                           host.instances if host else "down",
                           host.load if host else "",
                           "\n".join(_where(plan)) or "-"])
        lines.append(table.get_string())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) or "No failover segment, and no watched host"


def render_simulation(simulation: Simulation, fmt: str) -> str:
    if fmt == "json":
        return json.dumps({
            "failed": list(simulation.failed),
            "plans": [_plan_dict(p) for p in simulation.plans],
            "gates": [{"gate": g.gate, "holds": g.holds, "says": g.says}
                      for g in simulation.gates],
            "estimate": {"seconds": simulation.estimate.seconds,
                         "says": simulation.estimate.says}},
            indent=2, sort_keys=True)
    parts = [f"Simulated failure of {', '.join(simulation.failed)}: "
             f"nothing was changed in Nova"]
    for plan in simulation.plans:
        parts.append(output.render_table(plan.report))
    gates = prettytable.PrettyTable(["Gate", "Would hold", "Why"])
    gates.align = "l"
    gates.max_width["Why"] = 80
    for gate in simulation.gates:
        gates.add_row([gate.gate, "yes" if gate.holds else "no", gate.says])
    parts.append(f"Gates:\n{gates}")
    parts.append(f"Time to recover: {simulation.estimate.says}")
    return "\n\n".join(parts)
