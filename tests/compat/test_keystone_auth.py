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
    own, other = (f"/v1/{user.project_id}/segments" for user in (ADMIN, DEMO))
    assert status(cloud, own, ADMIN.token) == 200
    assert status(cloud, "/v1/segments", ADMIN.token) == 200
    # The admin's token, another project's URL: malformed, as in Masakari.
    assert status(cloud, other, ADMIN.token) == 400
    # A member of the project, not an admin.
    assert status(cloud, other, DEMO.token) == 403
    assert status(cloud, own, "forged") == 401
    assert status(cloud, own) == 401
    # A project's name is no project id: an unknown path.
    assert status(cloud, "/v1/admin/segments", ADMIN.token) == 404
    checked = {r["path"] for r in cloud.keystone.requests
               if r["method"] == "GET"}
    assert "/v3/auth/tokens" in checked
