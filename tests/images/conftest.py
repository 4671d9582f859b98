"""The image tier (tox -e images): recovery's container image, built by
tools/image.py, run the way Kolla runs it. Without podman or the image,
its tests skip (fail under CI=true)."""

import shutil

import pytest

from tests.databases import _skip_or_fail
from tests.images.kolla import IMAGE
from tests.images.kolla import podman


@pytest.fixture(scope="session")
def image() -> str:
    if shutil.which("podman") is None:
        _skip_or_fail("image tier: podman is not installed (apt-get install"
                      " podman buildah debootstrap runc)")
    if podman("image", "exists", IMAGE, check=False).returncode != 0:
        _skip_or_fail(f"image tier: no image {IMAGE}; build it with"
                      f" python3 tools/image.py")
    return IMAGE
