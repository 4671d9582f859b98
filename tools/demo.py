#!/usr/bin/env python3
"""Quickstart: recover a failed compute host of a real, embedded Nova.

Installs the project and a real Nova 34 (API, conductor, scheduler,
placement and three nova-compute services on Nova's fake virt driver, all
in one local process) into .venv-demo. Boots 12 instances in a mix of
states, fails compute-1, and runs 'recovery host-failure compute-1'
against it: refused while the host still heartbeats, then as a dry run,
then for real. Then it shows where each instance went, restarts compute-1's
nova-compute and brings the host back with 'recovery host-return', and
shuts Nova down.
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bootstrap  # noqa: E402

FAILED_HOST = "compute-1"
HOSTS = 3
INSTANCES = [
    # name, host, state, HA_Enabled, locked by its owner, stuck task_state
    ("web-1", "compute-1", "active", True, False, None),
    ("web-2", "compute-1", "active", True, False, None),
    ("db-1", "compute-1", "active", True, True, None),
    ("batch-1", "compute-1", "stopped", False, False, None),
    ("broken-1", "compute-1", "error", False, False, None),
    ("stuck-1", "compute-1", "active", True, False, "rebooting"),
    ("paused-1", "compute-1", "paused", False, False, None),
    ("cache-1", "compute-1", "active", False, False, None),
    ("web-3", "compute-2", "active", True, False, None),
    ("db-2", "compute-2", "active", False, False, None),
    ("web-4", "compute-3", "active", True, False, None),
    ("batch-2", "compute-3", "stopped", False, False, None),
]


def start_nova():
    from tests.integration.realnova.harness import RealNova

    print(f"Starting a real Nova with {HOSTS} compute hosts ...", flush=True)
    nova = RealNova(hosts=HOSTS).start()
    ids = {name: nova.create(name, host, {"HA_Enabled": "True"} if ha
                             else {})
           for name, host, _, ha, _, _ in INSTANCES}
    for name, _, state, _, owner_locked, task_state in INSTANCES:
        nova.settle(ids[name], state, owner_locked, task_state)
    return nova, ids


def write_config(endpoint: str, workdir: str) -> str:
    path = os.path.join(workdir, "recovery.conf")
    with open(path, "w") as conf:
        conf.write(f"[DEFAULT]\nhost_failure_recovery_threads = 3\n\n"
                   f"[host_failure]\npoll_interval = 0.2\n\n"
                   # The embedded Nova's service_down_time.
                   f"[safety]\nservice_down_time = 3\n\n"
                   f"[nova]\nauth_type = admin_token\n"
                   f"endpoint = {endpoint}\ntoken = admin:admin:admin\n"
                   # The embedded Nova serves Placement beside it.
                   f"placement_endpoint_override = "
                   f"{endpoint.rsplit('/v2.1', 1)[0]}/placement\n\n"
                   f"[database]\n"
                   f"connection = sqlite:///{workdir}/recovery.sqlite\n")
    return path


def show(nova, ids, title: str) -> None:
    print(f"\n== {title}")
    print(f"  {'name':<10} {'host':<10} {'status':<8} {'task':<10} lock")
    for name in sorted(ids):
        server = nova.server(ids[name])
        task = server["OS-EXT-STS:task_state"] or "-"
        lock = (server["locked_reason"] or "") if server["locked"] else ""
        print(f"  {name:<10} {server['OS-EXT-SRV-ATTR:host']:<10} "
              f"{server['status']:<8} {task:<10} {lock}")


def recovery(bin_dir: str, config: str, *args: str) -> int:
    argv = [os.path.join(bin_dir, "recovery"), "--config-file", config,
            *args]
    print(f"\n$ recovery --config-file {config} {' '.join(args)}",
          flush=True)
    return subprocess.run(argv).returncode


def demo(bin_dir: str) -> int:
    nova, ids = start_nova()
    workdir = tempfile.mkdtemp(prefix="recovery-demo-")
    config = write_config(nova.endpoint, workdir)
    host = ("host-failure", FAILED_HOST)
    try:
        show(nova, ids, f"Before: {FAILED_HOST} is up")
        refused = recovery(bin_dir, config, *host, "--dry-run")
        print(f"(exit code {refused}: refused, the host still heartbeats)")
        nova.fail_host(FAILED_HOST)
        print(f"\n== {FAILED_HOST} fails: its nova-compute stops. Waiting "
              f"for Nova to report it down ...", flush=True)
        nova.wait_service(FAILED_HOST, state="down")
        recovery(bin_dir, config, *host, "--dry-run")
        code = recovery(bin_dir, config, *host)
        show(nova, ids, "After: where each instance went")
        recovery(bin_dir, config, "notifications", "list")
        service = nova.service(FAILED_HOST)
        print(f"\n{FAILED_HOST}: state={service['state']} "
              f"forced_down={service['forced_down']} "
              f"status={service['status']} "
              f"reason={service['disabled_reason']!r}")
        print(f"recovery exit code: {code}")
        print(f"\n== {FAILED_HOST} is repaired: its nova-compute restarts",
              flush=True)
        nova.restore_host(FAILED_HOST)
        returned = recovery(bin_dir, config, "host-return", FAILED_HOST)
        service = nova.service(FAILED_HOST)
        print(f"{FAILED_HOST}: state={service['state']} "
              f"forced_down={service['forced_down']} "
              f"status={service['status']}")
        return code or returned
    finally:
        print("Shutting Nova down.")
        nova.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    if "--inside" in sys.argv:
        sys.path.insert(0, bootstrap.ROOT)
        sys.exit(demo(os.path.dirname(sys.executable)))
    venv_bin = bootstrap.ensure_venv(".venv-demo", "-e", ".[integration]")
    bootstrap.run([os.path.join(venv_bin, "python"), __file__, "--inside"])
