"""What the operator sees: live progress on stderr, results on stdout."""

import json
import sys
from typing import Any
from typing import TextIO

import prettytable

from recovery.api import views
from recovery.db.control import Arming
from recovery.db.control import EngineRecord
from recovery.db.segments import Host
from recovery.db.segments import Segment
from recovery.events import Event
from recovery.events import News
from recovery.notification import Notification
from recovery.notification import StepEvent
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Phase
from recovery.results import StepState


class ProgressPrinter:
    """One line on stderr per step and instance state change."""

    def __init__(self, stream: TextIO = sys.stderr):
        self._stream = stream

    def step_changed(self, step: str, state: str, message: str, *,
                     news: News | None = None,
                     instances: int | None = None) -> None:
        # A failed step is the command's error message; say it once. A
        # step that waits says on what.
        waiting = state == StepState.RUNNING and message != "started"
        if waiting or state in (StepState.SUCCESS, StepState.REVERTED):
            print(f"[{step}] {state.lower()}: {message}", file=self._stream,
                  flush=True)

    def instance_changed(self, result: InstanceResult) -> None:
        state = result.phase.value
        if result.phase in (Phase.PENDING, Phase.DONE) and result.outcome:
            state = result.outcome.value
        where = f" -> {result.dest_host}" if result.dest_host else ""
        why = f": {result.reason}" if result.reason else ""
        print(f"{result.name or result.uuid} ({result.uuid[:8]}) "
              f"{state}{where}{why}", file=self._stream, flush=True)


def _seconds(result: InstanceResult) -> str:
    if result.started_at and result.finished_at:
        elapsed = result.finished_at - result.started_at
        return f"{elapsed.total_seconds():.1f}"
    return ""


def _priority(result: InstanceResult) -> str:
    """Its priority, and its phase when there are phases: "10 (phase 1)"."""
    if result.priority is None:
        return ""
    if result.priority_phase is None:
        return str(result.priority)
    return f"{result.priority} (phase {result.priority_phase})"


def render_table(report: HostReport) -> str:
    table = prettytable.PrettyTable(
        ["Instance", "UUID", "Outcome", "Priority", "From", "To", "Method",
         "State", "Seconds", "Reason"])
    table.align = "l"
    for r in report.instances:
        state = r.original_state
        if r.final_state:
            state = f"{r.original_state} -> {r.final_state}"
        reason = r.reason or ""
        if r.capacity_warning:
            reason = "; ".join(filter(None, [
                reason, f"capacity warning: {r.capacity_warning}"]))
        table.add_row([r.name, r.uuid, r.outcome.value if r.outcome else "",
                       _priority(r), r.source_host, r.dest_host or "",
                       r.method or "", state, _seconds(r), reason])
    title = "Plan" if report.dry_run else "Results"
    return (f"{title} for host {report.host}: {report.summary()}\n"
            f"{table.get_string()}")


def render_json(report: HostReport) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=True)


def render_arming(arming: Arming) -> str:
    if arming.changed_at is None:
        return "armed (never disarmed)"
    since = f"since {arming.changed_at:%Y-%m-%d %H:%M:%S} UTC"
    if arming.armed:
        return f"armed by {arming.changed_by} {since}"
    return (f"DISARMED by {arming.changed_by} {since}: {arming.reason}. "
            f"No recovery starts until 'recovery arm'.")


def render_engines(engines: list[EngineRecord]) -> str:
    """The engines that share the store, and the runs each one holds."""
    if not engines:
        return "engines: none running"
    table = prettytable.PrettyTable(
        ["Engine", "Host", "PID", "Backend", "Last seen", "Runs"])
    table.align = "l"
    for engine in engines:
        table.add_row([engine.name, engine.host, engine.pid,
                       engine.backend or "-",
                       f"{engine.silent_for:.0f} s ago",
                       "\n".join(engine.runs) or "-"])
    return f"engines: {len(engines)}\n{table}"


def render_notifications(items: list[Notification], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([views.notification(n) for n in items], indent=2)
    table = prettytable.PrettyTable(
        ["UUID", "Type", "Host", "Status", "Origin", "Created (UTC)",
         "Message"])
    table.align = "l"
    for n in items:
        table.add_row([n.uuid, n.type, n.hostname, n.status.value, n.origin,
                       f"{n.created_at:%Y-%m-%d %H:%M:%S}", n.message or ""])
    return table.get_string()


def render_notification(item: Notification, steps: list[StepEvent],
                        journal: list[InstanceResult], fmt: str,
                        events: list[Event]) -> str:
    if fmt == "json":
        body = views.notification(item)
        body["recovery_workflow_details"] = views.workflow_details(steps)
        body["instances"] = [r.to_dict() for r in journal]
        body["events"] = [views.event(e) for e in events]
        return json.dumps(body, indent=2, sort_keys=True)
    lines = [f"Notification {item.uuid}: {item.type} {item.event} "
             f"{item.hostname}, "
             f"{item.status.value} (attempt {item.attempts}, "
             f"{item.origin})"]
    if item.message:
        lines.append(f"  {item.message}")
    for step in views.workflow_details(steps):
        last = step["progress_details"][-1]
        lines.append(f"  step {step['name']}: {step['state']} "
                     f"({last['message']})")
    report = HostReport(item.hostname, item.created_at, instances=journal)
    lines.append(render_table(report))
    lines.append(f"Events:\n{_events_table(events, across=False)}")
    return "\n".join(lines)


def render_events(items: list[Event], fmt: str) -> str:
    """Events of any notifications, in the order they were recorded."""
    if fmt == "json":
        return json.dumps([views.event(e) for e in items], indent=2)
    return _events_table(items, across=True)


def _events_table(items: list[Event], across: bool) -> str:
    """``across`` notifications: with a column that says whose."""
    columns = ["Time (UTC)", "Actor", "Subject", "Kind", "Message"]
    if across:
        columns.insert(1, "Notification")
    table = prettytable.PrettyTable(columns)
    table.align = "l"
    # Long reasons wrap rather than widen every row.
    table.max_width["Message"] = 72
    for e in items:
        row = [f"{e.created_at:%Y-%m-%d %H:%M:%S}", e.actor, e.subject,
               e.kind, e.message]
        if across:
            row.insert(1, e.notification_uuid or "-")
        table.add_row(row)
    return table.get_string()


# Masakari's soft-delete fields: always the same here, not worth a row.
_MASAKARI_ONLY = ("deleted", "deleted_at")


def _record(fields: dict[str, Any]) -> str:
    """One record as a Field/Value table, as openstack's CLI shows it."""
    table = prettytable.PrettyTable(["Field", "Value"])
    table.align = "l"
    for key, value in fields.items():
        if key not in _MASAKARI_ONLY:
            table.add_row([key, "" if value is None else value])
    return table.get_string()


def render_segments(items: list[Segment], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([views.segment(s) for s in items], indent=2)
    table = prettytable.PrettyTable(
        ["UUID", "Name", "Recovery method", "Service type", "Enabled",
         "Description"])
    table.align = "l"
    for s in items:
        table.add_row([s.uuid, s.name, s.recovery_method, s.service_type,
                       s.enabled, s.description or ""])
    return table.get_string()


def render_segment(item: Segment, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(views.segment(item), indent=2, sort_keys=True)
    return _record(views.segment(item))


def render_hosts(items: list[Host], segment: Segment, fmt: str) -> str:
    if fmt == "json":
        return json.dumps([views.host(h, segment) for h in items],
                          indent=2)
    table = prettytable.PrettyTable(
        ["UUID", "Name", "Type", "Reserved", "On maintenance",
         "Control attributes"])
    table.align = "l"
    for h in items:
        table.add_row([h.uuid, h.name, h.type, h.reserved, h.on_maintenance,
                       h.control_attributes])
    return f"Hosts of failover segment {segment.name}:\n{table}"


def render_host(item: Host, segment: Segment, fmt: str) -> str:
    body = views.host(item, segment)
    if fmt == "json":
        return json.dumps(body, indent=2, sort_keys=True)
    # The segment by name; 'recovery segment show' has the rest.
    body["failover_segment"] = segment.name
    return _record(body)
