#!/usr/bin/env python3
"""Make the distribution's Ceph bindings importable in this virtualenv.

    python tools/ceph_bindings.py      (tox runs it before each env)

Ceph's Python bindings, ``rados`` and ``rbd``, are not on PyPI: they are
extension modules of Debian's python3-rados and python3-rbd, in
/usr/lib/python3/dist-packages, built for CPython 3.11. A virtualenv
does not see them (nor would ``--system-site-packages`` when it is
another build of Python). When they exist, and were built for this
Python (the same ``cpython-3XX`` tag), this links them into a directory
of this virtualenv's own, named in a ``.pth`` file in its
site-packages. When they do not, it says so and changes nothing:
recovery installs and runs without Ceph, and the tests that need it
skip (or fail under CI=true).
"""

import glob
import os
import sys
import sysconfig

DIST_PACKAGES = "/usr/lib/python3/dist-packages"
MODULES = ("rados", "rbd")
LINKS = "_ceph_bindings"
PTH = "ceph_bindings.pth"


def main() -> int:
    if sys.prefix == sys.base_prefix:
        print("ceph_bindings: not in a virtualenv; nothing done")
        return 1
    tag = sys.implementation.cache_tag        # cpython-311
    found = {}
    for module in MODULES:
        paths = glob.glob(os.path.join(DIST_PACKAGES, f"{module}.{tag}-*.so"))
        if paths:
            found[module] = paths[0]
    if len(found) < len(MODULES):
        print(f"ceph_bindings: no {tag} build of {', '.join(MODULES)} in "
              f"{DIST_PACKAGES} (Debian: python3-rados python3-rbd); the "
              f"Ceph tests will skip")
        return 0
    site = sysconfig.get_paths()["purelib"]
    links = os.path.join(site, LINKS)
    os.makedirs(links, exist_ok=True)
    for path in found.values():
        link = os.path.join(links, os.path.basename(path))
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(path, link)
    with open(os.path.join(site, PTH), "w", encoding="utf-8") as handle:
        handle.write(links + "\n")
    print(f"ceph_bindings: {', '.join(found)} from {DIST_PACKAGES} "
          f"importable through {os.path.join(site, PTH)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
