"""Make a virtualenv with what a quickstart command needs.

Only the standard library is used here: a fresh machine has just Python
and pip.
"""

import os
import subprocess
import sys
import venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ensure_venv(name: str, *requirements: str) -> str:
    """Create ``ROOT/name`` if needed, install ``requirements``, and return
    the path of its ``bin`` directory."""
    path = os.path.join(ROOT, name)
    bin_dir = os.path.join(path, "bin")
    if not os.path.exists(os.path.join(bin_dir, "python")):
        print(f"Creating {path} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(path)
    print(f"Installing {' '.join(requirements)} into {name} ...", flush=True)
    subprocess.run([os.path.join(bin_dir, "python"), "-m", "pip", "install",
                    "--quiet", "--disable-pip-version-check", *requirements],
                   check=True, cwd=ROOT)
    return bin_dir


def run(argv: list[str]) -> None:
    """Run a command in ROOT and exit with its status."""
    sys.exit(subprocess.run(argv, cwd=ROOT).returncode)
