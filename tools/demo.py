#!/usr/bin/env python3
"""Quickstart: recover a failed compute host on an embedded (fake) Nova.

Installs the project into .venv-demo, starts the project's fake Nova on
127.0.0.1 with 3 hosts and 12 instances in a mix of states, fails
compute-1, and runs 'recovery host-failure compute-1' against it: first
as a dry run, then for real. Then it shows where each instance went.
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
INSTANCES = [
    # name, host, vm_state, task_state, HA_Enabled, locked_by
    ("web-1", "compute-1", "active", None, "True", None),
    ("web-2", "compute-1", "active", None, "True", None),
    ("db-1", "compute-1", "active", None, "True", "owner"),
    ("batch-1", "compute-1", "stopped", None, None, None),
    ("broken-1", "compute-1", "error", None, None, None),
    ("stuck-1", "compute-1", "active", "rebooting", "True", None),
    ("paused-1", "compute-1", "paused", None, None, None),
    ("cache-1", "compute-1", "active", None, None, None),
    ("web-3", "compute-2", "active", None, "True", None),
    ("db-2", "compute-2", "active", None, None, None),
    ("web-4", "compute-3", "active", None, "True", None),
    ("batch-2", "compute-3", "stopped", None, None, None),
]


def start_nova():
    from tests.fakenova import FakeNova

    nova = FakeNova(evacuation_latency=0.5).start()
    for host in ("compute-1", "compute-2", "compute-3"):
        nova.add_compute(host)
    for name, host, vm_state, task_state, ha, locked_by in INSTANCES:
        nova.add_server(name, host, vm_state=vm_state, task_state=task_state,
                        metadata={"HA_Enabled": ha} if ha else {},
                        locked_by=locked_by,
                        locked_reason="owner maintenance" if locked_by
                        else None)
    return nova


def write_config(endpoint: str, workdir: str) -> str:
    path = os.path.join(workdir, "recovery.conf")
    with open(path, "w") as conf:
        conf.write(f"[DEFAULT]\nhost_failure_recovery_threads = 3\n\n"
                   f"[host_failure]\npoll_interval = 0.2\n\n"
                   f"[nova]\nauth_type = admin_token\n"
                   f"endpoint = {endpoint}\ntoken = admin:admin:admin\n\n"
                   f"[database]\n"
                   f"connection = sqlite:///{workdir}/recovery.sqlite\n")
    return path


def show(nova, title: str) -> None:
    print(f"\n== {title}")
    for server in sorted(nova.servers(), key=lambda s: s["name"]):
        lock = f" locked({server['locked_by']})" if server["locked"] else ""
        print(f"  {server['name']:<10} {server['host']:<10} "
              f"{server['vm_state']:<8}{lock}")


def recovery(bin_dir: str, config: str, *args: str) -> int:
    argv = [os.path.join(bin_dir, "recovery"), "--config-file", config,
            *args]
    print(f"\n$ recovery --config-file {config} {' '.join(args)}",
          flush=True)
    return subprocess.run(argv).returncode


def demo(bin_dir: str) -> int:
    nova = start_nova()
    workdir = tempfile.mkdtemp(prefix="recovery-demo-")
    config = write_config(nova.endpoint, workdir)
    host = ("host-failure", FAILED_HOST)
    try:
        show(nova, f"Before: {FAILED_HOST} is up")
        refused = recovery(bin_dir, config, *host, "--dry-run")
        print(f"(exit code {refused}: refused, the host still heartbeats)")
        nova.fail_host(FAILED_HOST)
        print(f"\n== {FAILED_HOST} fails: Nova stops hearing from it")
        recovery(bin_dir, config, *host, "--dry-run")
        code = recovery(bin_dir, config, *host)
        show(nova, "After: where each instance went")
        recovery(bin_dir, config, "notifications", "list")
        service = nova.service(FAILED_HOST)
        print(f"\n{FAILED_HOST}: forced_down={service['forced_down']} "
              f"status={service['status']} "
              f"reason={service['disabled_reason']!r}")
        print(f"recovery exit code: {code}")
        return code
    finally:
        nova.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    if "--inside" in sys.argv:
        sys.path.insert(0, bootstrap.ROOT)
        sys.exit(demo(os.path.dirname(sys.executable)))
    venv_bin = bootstrap.ensure_venv(".venv-demo", "-e", ".")
    bootstrap.run([os.path.join(venv_bin, "python"), __file__, "--inside"])
