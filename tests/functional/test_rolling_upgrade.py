"""A rolling upgrade on one fresh PostgreSQL database, every part a real
process: an engine of the previous release (PREVIOUS, the last commit
that landed before rolling upgrades, schema 0013), installed from this
repository's history into a venv, runs on the schema its own 'recovery
db upgrade' made; this release's 'recovery db upgrade' expands the schema
under it; the previous release's engine recovers a failed host on the
expanded schema; an engine of this release joins; host failures in the
mixed period are each recovered once, whichever engine claims them;
'recovery db contract' refuses while the old engine is alive, and goes
through once it has stopped.

The previous release checks the schema only when it starts, so it is
started before the upgrade, as the README's procedure says. The venv
takes its dependencies from the package index (some 20 s here); without
the commit or the index the test is skipped, and fails under CI.
"""

import collections
import io
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tarfile
import time

import pytest

from recovery.db import revisions
from recovery.db.store import open_store
from tests.databases import _skip_or_fail
from tests.fakenova import FakeNova
from tests.functional.cli_process import run_cli
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

# The release before rolling upgrades (what main was before them), and
# its schema.
PREVIOUS = "0015e1d"
PREVIOUS_SCHEMA = "0013"
ROOT = pathlib.Path(__file__).resolve().parents[2]
FAILED = ("compute-1", "compute-2")
TARGETS = ("compute-3", "compute-4")
COUNT = 4
LATENCY = 0.3
FINISH_TIMEOUT = 90


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory):
    """The python of a venv with recovery as of PREVIOUS, from ``git
    archive``, and its dependencies."""
    root = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", PREVIOUS],
                             capture_output=True, timeout=60)
    if archive.returncode:
        _skip_or_fail(f"rolling upgrade: no commit {PREVIOUS} in {ROOT} "
                      f"({archive.stderr.decode().strip()}); a clone with "
                      f"its history runs it")
    source = root / "src"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(source, filter="data")
    started = time.monotonic()
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"{source}[postgresql]"],
        capture_output=True, text=True, timeout=300)
    if pip.returncode:
        lines = pip.stderr.strip().splitlines() or ["no output"]
        _skip_or_fail(f"rolling upgrade: pip could not install {PREVIOUS} "
                      f"into a venv: {lines[-1]}")
    print(f"venv of {PREVIOUS}: {time.monotonic() - started:.1f} s")
    return python


class PreviousEngine(EngineProcess):
    """An engine of the previous release, run by the venv's python in its
    own directory: ``python -m`` puts the working directory first on
    sys.path, where this checkout's recovery must not be."""

    def __init__(self, python: pathlib.Path, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.python = python

    def start(self, ready_timeout: float = 30.0) -> None:
        env = {**os.environ, "NOTIFY_SOCKET": self.notify_path,
               "PYTHONWARNINGS": "ignore"}
        self.proc = subprocess.Popen(
            [str(self.python), "-m", "recovery.cmd.engine", "--config-file",
             str(self.config)], cwd=self.workdir, env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.workdir / "stderr.log", "ab"))
        self.wait_ready(ready_timeout)

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """The previous release's ``recovery`` command."""
        return subprocess.run(
            [str(self.python), "-m", "recovery.cmd.cli", "--config-file",
             str(self.config), *args], cwd=self.workdir,
            capture_output=True, text=True, timeout=180,
            env={**os.environ, "PYTHONWARNINGS": "ignore"})


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=LATENCY) as fake:
        for host in (*FAILED, *TARGETS):
            fake.add_compute(host)
        yield fake


def test_an_engine_serves_throughout_a_rolling_upgrade(
        previous_release, nova, postgresql_url, tmp_path):
    (tmp_path / "previous").mkdir()
    (tmp_path / "this").mkdir()
    old = PreviousEngine(previous_release, tmp_path / "previous",
                         nova.endpoint, database=postgresql_url,
                         lease_seconds=5)
    new = EngineProcess(tmp_path / "this", nova.endpoint,
                        database=postgresql_url, lease_seconds=5)
    store = None
    try:
        # The previous release, as it runs before the upgrade.
        made = old.cli("db", "upgrade")
        assert made.returncode == 0, made.stderr
        assert made.stdout.strip() == (
            f"schema at {PREVIOUS_SCHEMA} (was empty)")
        old.start()

        # This release's upgrade, under the running engine: expand only.
        upgraded = run_cli(str(new.config), "db", "upgrade")
        assert upgraded.returncode == 0, upgraded.stderr
        assert upgraded.stdout.strip() == (
            f"schema at {revisions.HEAD_REVISION} (was "
            f"{PREVIOUS_SCHEMA})")

        servers = {host: [nova.add_server(f"{host}-vm{n}", host)
                          for n in range(COUNT)] for host in FAILED}
        for host in FAILED:
            nova.fail_host(host)

        def runners(host):
            """The engines whose requests touched the host's instances."""
            started = [e.owner for e in (old, new) if e.proc is not None]
            return sorted({owner for owner in started for r in nova.requests
                           if owner in r["user_agent"]
                           and any(u in r["path"] for u in servers[host])})

        # The previous release recovers on the expanded schema, alone...
        posted = [old.post_host_down(FAILED[0])]
        wait_until(lambda: runners(FAILED[0]) == [old.owner], timeout=30,
                   what="the previous release's engine at work")
        # ...and this release's engine joins: the mixed period.
        new.start()
        posted.append(new.post_host_down(FAILED[1]))
        for uuid in posted:
            done = new.wait_status(uuid, "finished", "error", "failed",
                                   timeout=FINISH_TIMEOUT)
            assert done["status"] == "finished", done["message"]
        evacuated = collections.Counter(c["uuid"]
                                        for c in nova.evacuate_calls)
        assert evacuated == {uuid: 1 for uuids in servers.values()
                             for uuid in uuids}
        store = open_store(postgresql_url)
        assert [store.get(uuid).attempts for uuid in posted] == [1, 1]
        ran = {host: runners(host) for host in FAILED}
        print(f"rolling upgrade: the previous release's engine "
              f"{old.owner}, this release's {new.owner}; each failed "
              f"host's requests sent by {ran}")
        # One engine ran each host. The second is usually this release's,
        # to which it was posted, but the previous release has no
        # balancing and looks at the store every second: it may take it.
        assert ran[FAILED[0]] == [old.owner], ran
        assert len(ran[FAILED[1]]) == 1, ran

        # Not while the previous release's engine is alive.
        refused = run_cli(str(new.config), "db", "contract")
        assert refused.returncode == 3, refused.stderr
        assert (f"{old.owner} on {socket.gethostname()}, last seen "
                in refused.stderr)
        assert new.owner not in refused.stderr

        # Its clean shutdown takes it out of the registry.
        old.signal(signal.SIGTERM)
        assert old.wait_exit(timeout=30) == 0
        contracted = run_cli(str(new.config), "db", "contract")
        assert contracted.returncode == 0, contracted.stderr
        assert contracted.stdout.strip() == (
            f"schema at {revisions.HEAD_REVISION}, current; no engine of "
            f"an older release is alive")
        assert new.proc.poll() is None
    finally:
        if store is not None:
            store.close()
        old.close()
        new.close()
