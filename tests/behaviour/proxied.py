"""``recovery host-failure`` through a fault proxy, and what the run left
behind, read from Nova directly (not through the proxy).

Shared by tests/behaviour/test_faults.py and benchmarks/soak.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakenova.placement import endpoint_for
from tests.faultproxy import Rule
from tests.functional.cli_process import LOCK_REASON

ROOT = Path(__file__).resolve().parents[2]
#: [nova] timeout: small, so that held requests cost little time.
TIMEOUT = 3.0


def write_config(workdir: Path, endpoint: str, *, timeout: float = TIMEOUT,
                 threads: int = 3, poll_interval: float = 0.2,
                 nova_extra: str = "", extra: str = "") -> Path:
    """A config for recovery against ``endpoint`` (the proxy's), with a
    sqlite journal of its own in ``workdir``. ``nova_extra`` goes into
    ``[nova]``, ``extra`` into ``[host_failure]``."""
    path = workdir / "recovery.conf"
    path.write_text(
        f"[DEFAULT]\nhost_failure_recovery_threads = {threads}\n\n"
        f"[host_failure]\npoll_interval = {poll_interval}\n"
        f"evacuation_timeout = 60\n{extra}\n"
        f"[safety]\nservice_down_time = 3\n\n"
        f"[nova]\nauth_type = admin_token\nendpoint = {endpoint}\n"
        f"placement_endpoint_override = {endpoint_for(endpoint)}\n"
        f"token = admin:admin:admin\ntimeout = {timeout:g}\n"
        f"{nova_extra}\n"
        f"[database]\nconnection = sqlite:///{workdir}/recovery.sqlite\n")
    return path


@dataclasses.dataclass
class Run:
    """One ``recovery host-failure`` run."""

    returncode: int
    report: dict[str, Any] | None   # its --format json output
    stderr: str
    seconds: float


def run_recovery(config: Path, host: str, timeout: float = 600.0) -> Run:
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "recovery.cmd.cli", "--config-file",
             str(config), "host-failure", host, "--format", "json"],
            capture_output=True, text=True, timeout=timeout, cwd=ROOT,
            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired as exc:
        return Run(-1, None, f"timed out after {timeout:g} s: "
                   f"{exc.stderr or ''}", time.monotonic() - started)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = None
    return Run(proc.returncode, report, proc.stderr,
               time.monotonic() - started)


def evacuations(cloud: Any, uuid: str) -> list[dict[str, Any]]:
    """The instance's evacuation migrations, by ``instance_uuid`` (no
    ``changes-since``: a migration just accepted has no ``updated_at``)."""
    status, body = cloud.api(
        "GET", f"/os-migrations?instance_uuid={uuid}"
        f"&migration_type=evacuation")
    assert status == 200, (status, body)
    return list(body["migrations"])


def settle(cloud: Any, uuids: list[str], timeout: float = 30.0) -> bool:
    """Wait until no instance has a task running; whether they all
    settled in time (a second evacuate can leave one stuck)."""
    deadline = time.monotonic() + timeout
    while True:
        busy = [u for u in uuids if cloud.server(u)["task_state"]]
        if not busy:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


@dataclasses.dataclass
class Outcome:
    """What one run left behind, for the instances it was to recover."""

    instances: int
    moved: list[str]                       # names off the failed host
    failed: dict[str, str]                 # name: reason (the report's)
    locked: dict[str, str | None]          # name: locked_reason
    twice: dict[str, int]                  # name: evacuation migrations
    not_recovered: dict[str, str]          # name: outcome in the report
    settled: bool

    def clean(self) -> bool:
        return (len(self.moved) == self.instances and not self.failed
                and not self.locked and not self.twice
                and not self.not_recovered and self.settled)


def outcome(cloud: Any, host: str, ids: dict[str, str],
            run: Run) -> Outcome:
    """Read every instance from Nova directly, after ``settle``."""
    settled = settle(cloud, list(ids.values()))
    results = {r["name"]: r for r in (run.report or {}).get("instances", [])}
    moved, locked, twice = [], {}, {}
    for name, uuid in ids.items():
        server = cloud.server(uuid)
        if server["host"] not in (host, None):
            moved.append(name)
        if server["locked"]:
            locked[name] = server["locked_reason"]
        count = len(evacuations(cloud, uuid))
        if count > 1:
            twice[name] = count
    failed = {name: str(r.get("reason") or "")
              for name, r in results.items() if r["outcome"] == "failed"}
    not_recovered = {name: results[name]["outcome"] if name in results
                     else "missing from the report"
                     for name in ids
                     if name not in results
                     or results[name]["outcome"] != "recovered"}
    return Outcome(len(ids), moved, failed, locked, twice, not_recovered,
                   settled)


def ours(locked_reason: str | None) -> bool:
    """Whether a lock is recovery's own."""
    return locked_reason == LOCK_REASON


def realistic_mix(late_by: tuple[float, float] = (0.2, 4.0),
                  scale: float = 1.0,
                  max_in_a_row: int | None = None) -> list[Rule]:
    """A seeded soak's faults: server actions (lock, evacuate, unlock...)
    often, every other request (reads, service updates, Placement)
    less; ``scale`` multiplies every fraction. A late delivery lands
    ``late_by`` after the client gave up, which must stay below the
    ``[nova] late_request_margin`` given to recovery: a request later
    than that is beyond what it can know. ``max_in_a_row``: at most that
    many faults in a row for one request (None: no limit)."""
    actions = {"503": 0.06, "reset_before": 0.04, "reset_after": 0.04,
               "late_answer": 0.04, "late_delivery": 0.06}
    others = {"503": 0.03, "reset_before": 0.01, "reset_after": 0.01,
              "late_answer": 0.02, "late_delivery": 0.01}
    return [
        Rule.mix({f: p * scale for f, p in actions.items()},
                 method="POST", path=r"/servers/[^/]+/action$",
                 late_by=late_by, max_in_a_row=max_in_a_row),
        Rule.mix({f: p * scale for f, p in others.items()},
                 late_by=late_by, max_in_a_row=max_in_a_row),
    ]
