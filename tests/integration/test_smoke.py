"""Smoke: the ``recovery`` CLI recovers a failed host of a REAL Nova.

Needs, in the running venv (skipped otherwise)::

    pip install nova==34.0.0 openstack-placement==16.0.0 fixtures \
        testtools oslotest wsgi-intercept
    pip install -e '.[test]'

Run: ``pytest -s tests/integration/test_smoke.py`` (about 30 s).
"""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("nova") is None:  # never import it here
    pytest.skip("nova is not installed", allow_module_level=True)

from tests.integration.realnova.harness import ENGINE_TOKEN  # noqa: E402
from tests.integration.realnova.harness import RealNova  # noqa: E402

FAILED = "compute-1"
LOCK_REASON = "Locked by recovery: host-failure evacuation"


def write_config(tmp_path: Path, endpoint: str) -> str:
    path = tmp_path / "recovery.conf"
    path.write_text(
        f"[host_failure]\npoll_interval = 0.2\nevacuation_timeout = 60\n\n"
        f"[nova]\nauth_type = admin_token\nendpoint = {endpoint}\n"
        f"token = {ENGINE_TOKEN}\n\n"
        f"[database]\nconnection = sqlite:///{tmp_path}/r.sqlite\n")
    return str(path)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_recovery(nova: RealNova, tmp_path: Path) -> tuple[Any, float]:
    started = time.monotonic()
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "recovery"),
         "--config-file", write_config(tmp_path, nova.endpoint),
         "host-failure", FAILED, "--format", "json"],
        capture_output=True, text=True, timeout=180)
    return proc, time.monotonic() - started


def test_recover_failed_host(tmp_path: Path) -> None:
    started = time.monotonic()
    with RealNova(hosts=4) as nova:
        startup = time.monotonic() - started
        servers = {
            "vm-1": nova.boot("vm-1", FAILED),
            "vm-2": nova.boot("vm-2", FAILED, metadata={"HA_Enabled": "True"}),
            "vm-off": nova.boot("vm-off", FAILED, state="stopped"),
        }
        nova.fail_host(FAILED)
        nova.wait_service(FAILED, state="down")
        proc, recovery = run_recovery(nova, tmp_path)
        print(f"\nNova start-up {startup:.1f} s; recovery of "
              f"{len(servers)} instances {recovery:.1f} s; Nova RSS "
              f"{rss_mib(nova.pid):.0f} MiB")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        results = {r["name"]: r for r in report["instances"]}
        assert sorted(results) == sorted(servers)
        for name, before in servers.items():
            after = nova.server(before["id"])
            result = results[name]
            assert result["outcome"] == "recovered", result
            assert after["OS-EXT-SRV-ATTR:host"] not in (FAILED, None)
            assert result["dest_host"] == after["OS-EXT-SRV-ATTR:host"]
            assert after["OS-EXT-STS:vm_state"] == (
                before["OS-EXT-STS:vm_state"])
            assert after["status"] == before["status"]
            assert not after["locked"], after
        service = nova.service(FAILED)
        assert service["forced_down"] and service["status"] == "disabled"


def test_recover_every_evacuable_state(tmp_path: Path) -> None:
    """Error stays error, the owner's lock stays, stuck tasks recover."""
    with RealNova(hosts=4) as nova:
        servers = {
            "error": nova.boot("error", FAILED, state="error"),
            "owner-locked": nova.boot("owner-locked", FAILED,
                                      locked_by_owner=True),
            "stuck": nova.boot("stuck", FAILED, task_state="rebooting"),
            "stuck-off": nova.boot("stuck-off", FAILED, state="stopped",
                                   task_state="powering-on"),
        }
        nova.fail_host(FAILED)
        nova.wait_service(FAILED, state="down")
        proc, _ = run_recovery(nova, tmp_path)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["summary"]["recovered"] == len(servers), report
        after = {name: nova.server(s["id"]) for name, s in servers.items()}
        assert {n: s["status"] for n, s in after.items()} == {
            "error": "ERROR", "owner-locked": "ACTIVE", "stuck": "ACTIVE",
            "stuck-off": "SHUTOFF"}
        for server in after.values():
            assert server["OS-EXT-SRV-ATTR:host"] != FAILED
            assert server["OS-EXT-STS:task_state"] is None
            assert server["locked_reason"] != LOCK_REASON
        owner = after["owner-locked"]
        assert owner["locked"] and owner["locked_reason"] == "owner's lock"
