#!/usr/bin/env python3
"""Run every test environment with tox, installing tox first if needed.

Usage: python3 tools/test.py [tox arguments, e.g. -e py3]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bootstrap  # noqa: E402

if __name__ == "__main__":
    bin_dir = bootstrap.ensure_venv(".venv-tools", "tox>=4")
    bootstrap.run([os.path.join(bin_dir, "tox"), *sys.argv[1:]])
