"""The entry points: importing them changes nothing (no monkey-patch, no
lock or socket made before the patch); their ``main()`` patches first."""

import json
import os
import subprocess
import sys

import pytest

from recovery import concurrency
from tests.bmc import ROOT

ENTRY_POINTS = ["recovery.cmd.cli", "recovery.cmd.engine"]

# Notes every lock and socket made while the entry points are imported
# (importlib's own locks aside): made before the patch, they would stay
# real in a green process.
IMPORT = """
import json
import sys

from recovery import concurrency

made = []


def watch(frame, event, arg):
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    if (event == "c_call"
            and getattr(arg, "__name__", "") in ("allocate_lock", "RLock")
            and not where.startswith("<frozen")):
        made.append(f"lock at {where}")
    elif (event == "call" and frame.f_code.co_name == "__init__"
            and frame.f_code.co_filename.endswith("/socket.py")):
        made.append(f"socket at {where}")


sys.setprofile(watch)
for module in sys.argv[1:]:
    __import__(module)
sys.setprofile(None)
print(json.dumps({"made": made, "green": concurrency.is_green()}))
"""

# ``--help`` parses the arguments and exits: far enough into main().
HELP = """
import contextlib
import importlib
import io
import sys

from recovery import concurrency

entry_point = importlib.import_module(sys.argv[1])
with contextlib.redirect_stdout(io.StringIO()), \\
        contextlib.suppress(SystemExit):
    entry_point.main(["--help"])
print(concurrency.is_green())
"""


def python(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    result = subprocess.run([sys.executable, *args], capture_output=True,
                            text=True, timeout=60, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr
    return result


def test_importing_the_entry_points_patches_nothing_and_makes_nothing():
    imported = json.loads(python("-c", IMPORT, *ENTRY_POINTS).stdout)
    assert imported == {"made": [], "green": False}


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_main_makes_the_process_green(entry_point):
    """On the default backend; the one the environment names otherwise."""
    green = os.environ.get(concurrency.BACKEND_VARIABLE,
                           "eventlet") == "eventlet"
    assert python("-c", HELP, entry_point).stdout == f"{green}\n"


def test_no_eventlet_notice_and_no_process_wide_filter():
    result = python("-m", "recovery.cmd.cli", "--help")
    assert "Eventlet is deprecated" not in result.stderr
    filters = python("-c", "import warnings\n"
                           "from recovery import concurrency\n"
                           "print(warnings.filters)").stdout
    assert "Eventlet" not in filters


# A real command on threads: it opens the store and reads it.
ON_THREADS = """
import sys

from recovery.cmd import cli

status = cli.main(sys.argv[1:])
print(status, "eventlet" in sys.modules, file=sys.stderr)
"""


def _status(tmp_path, environ=(), backend_line=""):
    config = tmp_path / "recovery.conf"
    config.write_text(f"[DEFAULT]\n{backend_line}\n[database]\n"
                      f"connection = sqlite:///{tmp_path}/r.sqlite\n")
    env = {k: v for k, v in os.environ.items()
           if k != concurrency.BACKEND_VARIABLE}
    env.update(environ)
    result = subprocess.run(
        [sys.executable, "-c", ON_THREADS, "--config-file", str(config),
         "status"], capture_output=True, text=True, timeout=60, cwd=ROOT,
        env=env)
    return result.stderr.splitlines()[-1]


@pytest.mark.parametrize("environ, backend_line, imported", [
    ({}, "", "True"),
    ({}, "concurrency_backend = threading", "False"),
    ({concurrency.BACKEND_VARIABLE: "threading"}, "", "False"),
    # The variable wins over the file.
    ({concurrency.BACKEND_VARIABLE: "eventlet"},
     "concurrency_backend = threading", "True"),
])
def test_the_backend_is_chosen_before_anything_is_imported(
        tmp_path, environ, backend_line, imported):
    """On threads eventlet is never imported, not even by a command that
    opens the store; the environment variable wins over the config."""
    assert _status(tmp_path, environ, backend_line) == f"0 {imported}"
