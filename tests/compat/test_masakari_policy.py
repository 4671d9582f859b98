"""Masakari 22's policy tests (masakari/tests/unit/test_policy.py), where
they apply, against recovery's rules and enforcer; and Masakari's rules
themselves (masakari.policies), which recovery's must match by name and
default check string for every route both serve."""

import ast
import importlib.util
import json
import pathlib

import pytest
import webob

from recovery import policies
from recovery.api import http
from recovery.api import policy

masakari_policies = pytest.importorskip(
    "masakari.policies", reason="tox -e masakari-compat installs it")

# Masakari's rules for what recovery does not serve: the extensions API
# (GET /extensions), the version document's rule (Masakari never checks
# it: '/' is public in both), and the 'discoverable' flags of Masakari's
# extension loader.
NOT_SERVED = ("os_masakari_api:extensions:", "os_masakari_api:versions:")

# RealRolePolicyTestCase.admin_only_rules, less the extensions API.
ADMIN_ONLY = [
    f"os_masakari_api:{rule}" for rule in (
        "os-hosts:index", "os-hosts:detail", "os-hosts:create",
        "os-hosts:update", "os-hosts:delete", "segments:index",
        "segments:detail", "segments:create", "segments:update",
        "segments:delete", "notifications:index", "notifications:detail",
        "notifications:create")]


def fake_policy_data() -> str:
    """``policy_data`` of masakari/tests/unit/fake_policy.py, read from
    the file: importing masakari.tests.unit monkey-patches the process
    with eventlet, under the other compat tests."""
    (root,) = importlib.util.find_spec("masakari").submodule_search_locations
    path = pathlib.Path(root) / "tests" / "unit" / "fake_policy.py"
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == (
                "policy_data"):
            return ast.literal_eval(node.value)
    raise AssertionError(f"no policy_data in {path}")


def _served(name: str) -> bool:
    return not (name.startswith(NOT_SERVED) or name.endswith(
        ":discoverable"))


def ours() -> dict[str, str]:
    return {rule.name: rule.check_str for rule in policies.list_rules()}


def test_masakari_s_rules_and_defaults_are_recovery_s():
    theirs = {rule.name: rule.check_str
              for rule in masakari_policies.list_rules()
              if _served(rule.name)}
    assert theirs == {name: check for name, check in ours().items()
                      if name in theirs}
    # Recovery's own rules only, beyond Masakari's.
    assert {name for name in ours() if name not in theirs} == {
        "recovery_api:events:index", "recovery_api:metrics:index",
        "recovery_api:owner:read", "recovery_api:fencing:confirm",
        "recovery_api:host-actions:drain",
        "recovery_api:host-actions:bring_back"}


def test_all_rules_in_sample_file():
    """Masakari's: each rule of its sample policy is a rule here (those
    of the routes recovery serves)."""
    special = {"context_is_admin", "admin_or_owner", "default"}
    for name in json.loads(fake_policy_data()):
        if name not in special and _served(name):
            assert name in ours()


def _authorized(rule: str, **creds) -> bool:
    req = webob.Request.blank("/")
    req.environ[policy.CREDENTIALS] = {"user_id": "fake",
                                       "project_id": "fake", **creds}
    try:
        policy.defaults().authorize(req, rule)
    except http.Refused:
        return False
    return True


@pytest.mark.parametrize("rule", ADMIN_ONLY)
def test_admin_only_rules(rule):
    """Masakari's RealRolePolicyTestCase: a member is refused, an admin
    allowed."""
    assert not _authorized(rule, roles=["member"])
    assert _authorized(rule, roles=["admin"])
