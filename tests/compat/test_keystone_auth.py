"""The engine of these tests checks every token with Keystone (the fake)
over HTTP, through keystonemiddleware: who may call it, and the project
id in the URL must be the token's."""

import urllib.error
import urllib.request

import pytest

from tests.compat.deployment import ADMIN
from tests.compat.deployment import DEMO


def status(cloud, path: str, token: str | None = None) -> int:
    req = urllib.request.Request(
        f"http://127.0.0.1:{cloud.engine.port}{path}",
        headers={"X-Auth-Token": token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("cloud", [True], ids=["project-url"],
                         indirect=True)
def test_tokens_are_checked_with_keystone(cloud):
    assert status(cloud, "/v1/admin/segments", ADMIN.token) == 200
    assert status(cloud, "/v1/segments", ADMIN.token) == 200
    # The admin's token, another project's URL.
    assert status(cloud, "/v1/demo/segments", ADMIN.token) == 403
    # A member of the project, not an admin.
    assert status(cloud, "/v1/demo/segments", DEMO.token) == 403
    assert status(cloud, "/v1/admin/segments", "forged") == 401
    assert status(cloud, "/v1/admin/segments") == 401
    checked = {r["path"] for r in cloud.keystone.requests
               if r["method"] == "GET"}
    assert "/v3/auth/tokens" in checked
