"""What ``recovery host-failure`` imports: what its run needs, and none
of the heavy modules that only other commands, the API, a fencing
driver, a terminal or a migration need (each would delay the first
request to Nova).

The command runs as in production, against the fake Nova, in a child
that writes the modules it holds when the command has returned."""

import os
import subprocess
import sys

from recovery import concurrency
from tests.functional.cli_process import write_config

FAILED = "compute-1"

RUN = """
import pathlib
import sys

from recovery.cmd import cli

code = cli.main(sys.argv[2:])
pathlib.Path(sys.argv[1]).write_text("\\n".join(sorted(sys.modules)))
sys.exit(code)
"""

NOT_NEEDED = {
    "alembic": "the store's schema is current: nothing to migrate",
    "mako": "alembic's templates",
    "dns": "eventlet's green DNS (dnspython)",
    "webob": "the API",
    "keystonemiddleware": "the API",
    "microversion_parse": "the API",
    "jsonschema": "the API's and the segment commands' validation",
    "rich": "the live view: stderr is not a terminal",
    "sushy": "a Redfish fencing driver",
    "pyghmi": "an IPMI fencing driver",
}


def modules_of_host_failure(tmp_path, config):
    """The top-level packages the command held when it returned."""
    held = tmp_path / "modules"
    # Green DNS or not is the process's own choice, not the test's.
    env = {k: v for k, v in os.environ.items()
           if k != "EVENTLET_NO_GREENDNS"}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(held), "--config-file", config,
         "host-failure", FAILED], capture_output=True, text=True,
        timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    return {name.split(".")[0] for name in held.read_text().split()}


def test_host_failure_imports_nothing_it_does_not_need(fake_nova, tmp_path):
    for host in (FAILED, "compute-2"):
        fake_nova.add_compute(host)
    for n in range(3):
        fake_nova.add_server(f"vm-{n}", FAILED)
    fake_nova.fail_host(FAILED)
    config = write_config(tmp_path, fake_nova)
    # Operators' common case: the store already has this version's schema.
    upgrade = subprocess.run(
        [sys.executable, "-m", "recovery.cmd.cli", "--config-file", config,
         "db", "upgrade"], capture_output=True, text=True, timeout=60)
    assert upgrade.returncode == 0, upgrade.stderr

    held = modules_of_host_failure(tmp_path, config)

    # The child really ran the command: what it needs is there, and
    # eventlet only on its own backend.
    assert {"sqlalchemy", "novaclient", "oslo_config"} <= held
    on_eventlet = os.environ.get(concurrency.BACKEND_VARIABLE,
                                 "eventlet") == "eventlet"
    assert ("eventlet" in held) is on_eventlet
    assert {name: why for name, why in NOT_NEEDED.items()
            if name in held} == {}
