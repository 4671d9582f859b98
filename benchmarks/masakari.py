"""Masakari 22's host-failure recovery on the benchmarks' real Nova 34:
its time to recover (TTR) and the Nova requests each instance costs, to
compare with ``recovery host-failure`` (benchmarks/ttr.py) in one run.

benchmarks/ttr.py runs it, alternating with recovery, in ``tox -e
bench``: that env adds masakari 22.0.0 and its engine's dependencies
that Nova's do not bring (taskflow, tooz, ...), pinned.

What runs is Masakari's own code, unmodified: its engine's taskflow
driver, ``TaskFlowDriver.execute_host_failure(host, "auto")``, called as
its engine manager calls it on a host's STOPPED notification, in a child
process monkey patched as masakari-engine is (benchmarks/
masakari_engine.py). Its API, RPC and notification handling are left
out: the clock starts when the driver is called, so Masakari's process
start-up is not counted (the engine is a running service), while
recovery's TTR in benchmarks/ttr.py counts its CLI's. The flow disables
the host's nova-compute, lists its instances, then for each, 3 at a
time: GETs it twice (the second to see whether it is locked), locks
it, evacuates it, GETs it at once and then every ``verify_interval``
until it is on another host in its former vm_state, GETs it once more,
unlocks it.

Masakari at its best setting:

- ``wait_period_after_service_update = 0``: its one fixed sleep, 180 s
  by default, after disabling the host's nova-compute;
- ``verify_interval = 1`` (its default): the evacuation poll interval,
  an integer, so 1 s is the shortest that is not a busy loop;
- ``wait_period_after_evacuation`` stays 90 (its default): it is not a
  sleep but how long an evacuation may take before it counts as failed;
- ``host_failure_recovery_threads = 3`` (its default),
  ``evacuate_all_instances = true`` (its default: no HA_Enabled
  metadata needed).

Masakari reads Nova through Keystone: for every Nova request it builds a
new client and a new password session, so it first GETs Keystone's
version document and asks it for a token. The fake Keystone of the
tests (tests/fakekeystone.py) issues it a token that the real Nova
takes as an admin of project ``admin``, and a catalog whose ``compute``
is that Nova. Its requests are counted apart from Nova's.

Each run has a fresh Nova as ttr.py's have (30 ACTIVE instances of
project ``demo`` on compute-1, which has just been reported down) and
the same monitor, reading Nova's database.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks import ttr  # not its names: ttr.py may import this
from tests.fakekeystone import FakeKeystone
from tests.fakekeystone import nova_user

THREADS = 3
# Its token, "masakari:admin:admin", is what the real Nova reads as an
# admin of project "admin" (tests/integration/realnova/stack.py).
USER = nova_user("masakari", "masakari-secret", "admin", ("admin",))
# More than 30 instances take 3 at a time even if every evacuation ran
# into the flow's own 90 s timeout.
FLOW_TIMEOUT = 1200


def masakari_config(workdir: Path, keystone: FakeKeystone) -> Path:
    """Masakari's engine config: Nova through this Keystone, its best
    setting (the module docstring), one sqlite database for its tables
    and the flow's progress (as devstack shares one for both)."""
    database = f"sqlite:///{workdir}/masakari.sqlite"
    path = workdir / "masakari.conf"
    path.write_text(
        f"[DEFAULT]\n"
        f"host_failure_recovery_threads = {THREADS}\n"
        f"wait_period_after_service_update = 0\n"
        f"wait_period_after_evacuation = 90\n"
        f"verify_interval = 1\n"
        f"os_privileged_user_name = {USER.name}\n"
        f"os_privileged_user_password = {USER.password}\n"
        f"os_privileged_user_tenant = {USER.project}\n"
        f"os_privileged_user_auth_url = {keystone.url}\n"
        f"os_region_name = {keystone.region}\n"
        # <type>:<name>:<interface>; the fake catalog names each service
        # after its type (a deployment's is usually compute:nova).
        f"nova_catalog_admin_info = compute:compute:publicURL\n"
        f"log_file = {workdir}/masakari.log\n\n"
        f"[keystone_authtoken]\nauth_type = password\n\n"
        f"[host_failure]\nevacuate_all_instances = true\n\n"
        f"[database]\nconnection = {database}\n\n"
        f"[taskflow]\nconnection = {database}\n")
    return path


def run(instances: int = 30) -> dict[str, Any]:
    """One Masakari recovery of compute-1 on a fresh Nova."""
    with ttr.prepared_nova(instances) as nova, \
            FakeKeystone(nova.endpoint, users=(USER,)) as keystone, \
            tempfile.TemporaryDirectory() as workdir:
        config = masakari_config(Path(workdir), keystone)
        log = Path(workdir) / "masakari.log"
        engine = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.masakari_engine",
             str(config), common.FAILED],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=common.ROOT)
        assert engine.stdout is not None
        if engine.stdout.readline() != b"ready\n":
            engine.kill()
            _, err = engine.communicate()
            raise RuntimeError(f"Masakari did not start: {err.decode()}")
        nova_mark = len(nova.calls())
        keystone_mark = len(keystone.requests)
        monitor = ttr.Monitor(nova, instances)
        # CPU of children that have ended and been waited for: the
        # difference across this one's wait is the engine's alone (Nova,
        # the only other child, is still running).
        cpu_before = _children_cpu()
        started = time.time()
        try:
            out, err = engine.communicate(b"go\n", timeout=FLOW_TIMEOUT)
        except subprocess.TimeoutExpired:
            engine.kill()
            engine.communicate()
            raise
        cpu_s = _children_cpu() - cpu_before
        if engine.returncode != 0:
            raise RuntimeError(f"Masakari exited {engine.returncode}: "
                               f"{err.decode()}")
        flow = json.loads(out)
        try:
            recovered = monitor.wait(60)
        except RuntimeError:
            raise RuntimeError(f"Masakari: {flow['outcome']}; its log:\n"
                               f"{log.read_text()}") from None
        calls = nova.calls()[nova_mark:]
        identity = keystone.requests[keystone_mark:]
    if flow["outcome"] != "finished":
        raise RuntimeError(f"Masakari's flow: {flow['outcome']}")
    return {"seconds": recovered - started,
            "flow_seconds": flow["ended"] - flow["started"],
            "requests": len(calls), "kinds": common.kinds(calls),
            "keystone_requests": len(identity),
            "keystone_tokens": sum(r["method"] == "POST"
                                   and r["path"] == "/v3/auth/tokens"
                                   for r in identity),
            "cpu_s": cpu_s,
            "vmoves": sorted(set(flow["vmoves"].values()))}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
