#!/usr/bin/env python3
"""Build recovery's container image with podman (containers/Containerfile).

Usage: python3 tools/image.py [--tag TAG] [--or-skip]

There is no image registry on the machines this project is built and
tested on, so the base image is Debian bookworm made by ``debootstrap
--variant=minbase`` and imported as ``localhost/debian-bookworm-minbase``.
It is made once and kept in podman's storage: later builds reuse it, and
podman's layer cache reuses the package layers while their inputs are
unchanged. Elsewhere, ``podman build -f containers/Containerfile .`` (or
docker) builds the same image on Docker Hub's debian:bookworm-slim.

Every podman command runs with containers/containers.conf
(``CONTAINERS_CONF``): runc, the ulimits and no default network, the
settings a sandboxed machine needs. Steps that fetch packages use the
host's network; pip inside the build trusts the host's CA bundle
(the build secret ``pipca``: mounted for a step, never in a layer).

Only the standard library is used here.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTAINERS_CONF = os.path.join(ROOT, "containers", "containers.conf")
BASE = "localhost/debian-bookworm-minbase"
TAG = "localhost/recovery:latest"
SUITE = "bookworm"
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": CONTAINERS_CONF}


def podman(*args: str, capture: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], env=podman_env(), check=True,
                          text=True, capture_output=capture)


def image_exists(name: str) -> bool:
    return subprocess.run(["podman", "image", "exists", name],
                          env=podman_env()).returncode == 0


def mirror() -> str:
    """The Debian mirror apt uses here (debootstrap's default otherwise)."""
    for path in ("/etc/apt/sources.list.d/debian.sources",
                 "/etc/apt/sources.list"):
        try:
            with open(path) as f:
                for line in f:
                    words = line.split()
                    if words[:1] not in (["URIs:"], ["deb"]) or (
                            "security" in line):
                        continue
                    for word in words[1:]:  # past a deb line's [options]
                        if word.startswith(("http://", "https://")):
                            return word
        except FileNotFoundError:
            continue
    return "http://deb.debian.org/debian"


def slim(rootfs: str) -> None:
    """What debootstrap leaves that an image does not need, as Docker
    Hub's bookworm-slim leaves it out: apt's downloaded packages and
    lists (a build's apt-get update fetches them again), and the
    documentation, manual pages and translations (copyright files
    kept). The dpkg rule keeps them out of later packages too."""
    for pattern in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin",
                    "var/lib/apt/lists/*_*"):
        for path in glob.glob(os.path.join(rootfs, pattern)):
            os.remove(path)
    for directory in ("usr/share/man", "usr/share/locale", "usr/share/info"):
        shutil.rmtree(os.path.join(rootfs, directory), ignore_errors=True)
    for package in glob.glob(os.path.join(rootfs, "usr/share/doc/*")):
        if os.path.islink(package):
            continue  # another package's directory, slimmed as that one
        for path in glob.glob(os.path.join(package, "*")):
            if os.path.basename(path) == "copyright":
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
    with open(os.path.join(rootfs, "etc/dpkg/dpkg.cfg.d/slim"), "w") as f:
        f.write("path-exclude=/usr/share/doc/*\n"
                "path-include=/usr/share/doc/*/copyright\n"
                "path-exclude=/usr/share/man/*\n"
                "path-exclude=/usr/share/info/*\n"
                "path-exclude=/usr/share/locale/*\n")


def ensure_base() -> None:
    if image_exists(BASE):
        return
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="debootstrap-") as rootfs:
        subprocess.run(["debootstrap", "--variant=minbase", SUITE, rootfs,
                        mirror()], check=True, stdout=subprocess.DEVNULL)
        slim(rootfs)
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."],
                               stdout=subprocess.PIPE)
        subprocess.run(["podman", "import", "-", BASE], stdin=tar.stdout,
                       env=podman_env(), check=True,
                       stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            sys.exit("tar of the debootstrapped base failed")
    print(f"base image {BASE}: {time.monotonic() - started:.0f} s",
          flush=True)


def build(tag: str) -> None:
    started = time.monotonic()
    args = ["build", "--network", "host", "--build-arg", f"BASE={BASE}",
            "--file", os.path.join(ROOT, "containers", "Containerfile"),
            "--tag", tag]
    if os.path.exists(HOST_CA):
        args += ["--secret", f"id=pipca,src={HOST_CA}"]
    podman(*args, ROOT)
    size = podman("image", "inspect", "--format", "{{.Size}}", tag,
                  capture=True).stdout.strip()
    print(f"image {tag}: {time.monotonic() - started:.0f} s,"
          f" {int(size) / 1e6:.0f} MB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tag", default=TAG)
    parser.add_argument(
        "--or-skip", action="store_true",
        help="without podman or debootstrap, say so and exit 0 (the image"
             " tier's tests then skip), unless CI=true")
    args = parser.parse_args()
    for tool in ("podman", "debootstrap"):
        if shutil.which(tool) is None:
            message = (f"{tool} is not installed: apt-get install podman"
                       f" buildah debootstrap runc")
            if args.or_skip and os.environ.get("CI") != "true":
                print(f"image not built ({message}); the image tier's tests"
                      f" skip")
                return
            sys.exit(message)
    ensure_base()
    build(args.tag)


if __name__ == "__main__":
    main()
