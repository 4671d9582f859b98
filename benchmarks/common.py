"""What the benchmarks share: running recovery, reading what Nova saw,
and reporting (a table on stdout, the numbers in a JSON file)."""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FAILED = "compute-1"


def failed_host(fake: Any, instances: int) -> None:
    """``instances`` ACTIVE instances on FAILED, just reported down, in the
    fake Nova; compute-2 takes them."""
    for host in (FAILED, "compute-2"):
        fake.add_compute(host)
    for n in range(instances):
        fake.add_server(f"vm-{n}", FAILED)
    fake.fail_host(FAILED)


def failed_rack(fake: Any, hosts: list[str], per_host: int) -> None:
    """``hosts``, each with ``per_host`` instances, all reported down at
    once in the fake Nova; two spare hosts take them."""
    for host in hosts + ["spare-1", "spare-2"]:
        fake.add_compute(host)
    for host in hosts:
        for n in range(per_host):
            fake.add_server(f"{host}-vm-{n}", host)
        fake.fail_host(host)


def wait_finished(engine: Any, uuids: list[str],
                  timeout: float = 600) -> None:
    """Until ``recovery-engine`` has finished every notification, each
    within ``timeout`` s of the last; raise if one ends otherwise. Asks
    once a second: every question costs the engine CPU too."""
    from tests.fakenova.server import wait_until

    for uuid in uuids:
        done = wait_until(
            lambda u=uuid: (n := engine.notification(u))["status"]
            in ("finished", "error", "failed") and n, timeout,
            interval=1.0, what=f"notification {uuid}")
        if done["status"] != "finished":
            raise RuntimeError(done["message"])


def recovery_config(workdir: Path, endpoint: str, threads: int,
                    poll_interval: float, rate: float) -> Path:
    path = workdir / "recovery.conf"
    path.write_text(
        f"[DEFAULT]\nhost_failure_recovery_threads = {threads}\n\n"
        f"[host_failure]\npoll_interval = {poll_interval}\n"
        f"evacuation_timeout = 600\n\n"
        f"[nova]\nauth_type = admin_token\nendpoint = {endpoint}\n"
        f"token = admin:admin:admin\nmax_requests_per_second = {rate}\n\n"
        f"[database]\nconnection = sqlite:///{workdir}/recovery.sqlite\n")
    return path


def default_config(workdir: Path, endpoint: str,
                   threads: int | None = None) -> Path:
    """Recovery at its defaults: only Nova (and its Placement, served
    beside it), the database and, if given, the threads are set."""
    path = workdir / "recovery.conf"
    placement = endpoint.rsplit("/", 1)[0] + "/placement"
    threads_line = ("" if threads is None
                    else f"host_failure_recovery_threads = {threads}\n")
    path.write_text(
        f"[DEFAULT]\n{threads_line}\n"
        f"[nova]\nauth_type = admin_token\nendpoint = {endpoint}\n"
        f"token = admin:admin:admin\n"
        f"placement_endpoint_override = {placement}\n\n"
        f"[database]\nconnection = sqlite:///{workdir}/recovery.sqlite\n")
    return path


def run_cli(config: Path, host: str = FAILED,
            env: dict[str, str] | None = None,
            command: str = "host-failure",
            options: tuple[str, ...] = ()) -> dict[str, Any]:
    """``recovery COMMAND HOST [OPTIONS]`` (default ``host-failure``) as
    a child (in ``env``, default this process's); its wall time, CPU
    time and peak RSS (from the kernel's accounting of that child)."""
    started = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "recovery.cmd.cli", "--config-file",
         str(config), command, host, *options, "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
        env=env)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"recovery exited {proc.returncode}")
    report = json.loads(out)
    return {"started": started, "ended": time.time(), "report": report,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss / 1024}


def cpu_seconds(pid: int) -> float:
    """The user + system time process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kinds(calls: list[dict[str, Any]]) -> dict[str, int]:
    """The requests by method and path, ids left out."""
    kinds: dict[str, int] = {}
    for call in calls:
        parts = [("{id}" if len(p) == 36 else p)
                 for p in call["path"].split("?")[0].split("/")]
        key = f"{call['method']} {'/'.join(parts)}"
        kinds[key] = kinds.get(key, 0) + 1
    return kinds


def last(calls: list[dict[str, Any]], action: str) -> float:
    return max(c["time"] for c in calls if c.get("action") == action)


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(),
            "machine": platform.machine(), "system": platform.system(),
            "processor": _cpu_model()}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def epoch(value: datetime.datetime | str | None) -> float | None:
    """A Nova or store timestamp (naive means UTC) as seconds since
    the epoch."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value.rstrip("Z"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.timestamp()


def median(values: list[float]) -> float:
    return statistics.median(values)


def report(name: str, title: str, rows: list[tuple[str, Any, str]],
           data: dict[str, Any]) -> None:
    """Print ``rows`` (metric, value, target) and write the JSON file."""
    print(f"\n== {title}")
    width = max(len(r[0]) for r in rows)
    for metric, value, target in rows:
        shown = f"{value:.3g}" if isinstance(value, float) else str(value)
        print(f"  {metric:<{width}}  {shown:>10}  {target}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2,
                               default=str) + "\n")
    print(f"  (written to {path.relative_to(ROOT)})")

# The engine benchmarks fail most of their hosts at once, on purpose: the
# safety brakes would (rightly) hold them all.
BRAKES_OFF = ("[safety]\nmax_failed_hosts_percent = 100\n"
              "max_host_recoveries_per_window = 1000\n")


class Poller:
    """Call ``look`` every ``interval`` on a thread until it returns
    True (or ``stop``); an error in ``look`` (a state read while it was
    written) is the next look's to fix."""

    def __init__(self, look: Callable[[], bool | None],
                 interval: float) -> None:
        self._look = look
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._look():
                    return
            except Exception:
                pass  # read while it was written: the next look
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
