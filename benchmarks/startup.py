"""Benchmark: how soon ``recovery host-failure HOST`` acts.

    python -m benchmarks.startup

From the moment the command's process is started to the first request
the fake Nova receives: the interpreter, the imports, the config, the
store and the claim of the host all come before it. Measured with a
fresh SQLite store (the first use creates the schema) and with one
already at this version's schema (the common case: every later run).
``recovery --help`` is timed too (to its exit).

For scale, the floor: a process that only imports the libraries that
request cannot be sent without (eventlet and its patch, oslo.config,
oslo.log, SQLAlchemy with SQLite, keystoneauth1 and novaclient), timed
from its start to the end of those imports.

Every process gets a scratch bytecode cache, filled by a first run
that is not counted (as an installed package is compiled at install):
what is measured is the imports, not the compiler; the tree is not
written to.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.fakenova import FakeNova

RUNS = 7
INSTANCES = 5
TARGET_S = 0.4

LIBRARIES = """
import os
import time

os.environ.setdefault("EVENTLET_NO_GREENDNS", "yes")
import eventlet

eventlet.monkey_patch()
import keystoneauth1.loading
import keystoneauth1.session
import novaclient.v2.client
import oslo_config.cfg
import oslo_log.log
import sqlalchemy.dialects.sqlite

print(time.time())
"""


def first_request(env: dict[str, str], migrated: bool) -> float:
    """Seconds from the start of one ``recovery host-failure`` process to
    the first request the fake Nova receives."""
    with FakeNova() as fake, tempfile.TemporaryDirectory() as workdir:
        common.failed_host(fake, INSTANCES)
        config = common.recovery_config(Path(workdir), fake.endpoint,
                                        threads=INSTANCES,
                                        poll_interval=0.1, rate=0)
        if migrated:
            _python(env, "-m", "recovery.cmd.cli", "--config-file",
                    str(config), "db", "upgrade")
        run = common.run_cli(config, env=env)
        first = min(request["time"] for request in fake.requests)
    return first - run["started"]


def scratch_cache_env(cache: str,
                      base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) writing its
    bytecode to ``cache`` and not to the tree."""
    env = {**(os.environ if base is None else base),
           "PYTHONPYCACHEPREFIX": cache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def help_seconds(env: dict[str, str]) -> float:
    started = time.time()
    _python(env, "-m", "recovery.cmd.cli", "--help")
    return time.time() - started


def floor_seconds(env: dict[str, str]) -> float:
    started = time.time()
    return float(_python(env, "-c", LIBRARIES)) - started


def _python(env: dict[str, str], *args: str) -> str:
    return subprocess.run([sys.executable, *args], check=True,
                          capture_output=True, text=True, cwd=common.ROOT,
                          env=env).stdout


def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as cache:
        env = scratch_cache_env(cache)
        first_request(env, migrated=False)
        fresh = [first_request(env, migrated=False) for _ in range(RUNS)]
        migrated = [first_request(env, migrated=True) for _ in range(RUNS)]
        helps = [help_seconds(env) for _ in range(RUNS)]
        floors = [floor_seconds(env) for _ in range(RUNS)]
    measured = {"migrated_store": migrated, "fresh_store": fresh,
                "help": helps, "libraries_floor": floors}
    data: dict[str, Any] = {"runs": RUNS, "instances": INSTANCES,
                            "target_s": TARGET_S}
    for name, values in measured.items():
        # The minimum too: the median moves with whatever else runs on
        # the machine.
        data[name] = {"seconds": values, "median_s": common.median(values),
                      "min_s": min(values)}
    common.report("startup", "Process start -> first Nova request "
                  f"(recovery host-failure, fake Nova, median of {RUNS})", [
                      ("store already migrated, s",
                       data["migrated_store"]["median_s"],
                       f"target <= {TARGET_S:g}"),
                      ("fresh store (schema created), s",
                       data["fresh_store"]["median_s"], ""),
                      ("recovery --help, to its exit, s",
                       data["help"]["median_s"], ""),
                      ("floor: the libraries alone, s",
                       data["libraries_floor"]["median_s"], ""),
                  ], data)
    return data


if __name__ == "__main__":
    main()
