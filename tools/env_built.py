#!/usr/bin/env python3
"""Exit with a clear message unless tox env ENV is built under WORK_DIR.

Usage: env_built.py WORK_DIR ENV (tox.ini: the threading envs run on
another env's install).
"""

import os
import sys

if __name__ == "__main__":
    work_dir, env = sys.argv[1:3]
    if not os.path.exists(os.path.join(work_dir, env, "bin", "pytest")):
        sys.exit(f"this env runs on the {env} env's install, which is not "
                 f"built: run 'tox -e {env} --notest' first")
