"""The API's policy over real HTTP: real keystonemiddleware validating
every token with the fake Keystone (tests/fakekeystone.py), and
oslo.policy reading the rules' defaults or a policy file as Masakari's
deployments write it.

A table of who may do what drives the route test: every route, tried by
an admin, a member and a reader of a project, another project's member,
and a caller without a token.
"""

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import policies
from recovery.api import app
from recovery.api import auth
from recovery.api import policy
from recovery.conf import masakari
from recovery.db.store import Store
from recovery.db.store import open_store
from tests.fakekeystone import FakeKeystone
from tests.fakekeystone import app_credential
from tests.fakekeystone import nova_user
from tests.functional.test_api import MAX_BODY
from tests.functional.test_api import TOKEN
from tests.functional.test_api import WINDOW
from tests.functional.test_api import Hosts
from tests.functional.test_api import Reply
from tests.functional.test_api import Silent
from tests.functional.test_api import StepClock
from tests.functional.test_api import notification
from tests.functional.test_api import request
from tests.functional.test_api import serving

ADMIN = nova_user("admin", "admin-pw", "admin", ("admin", "member",
                                                  "reader"))
MEMBER = nova_user("alice", "alice-pw", "demo", ("member", "reader"))
READER = nova_user("bob", "bob-pw", "demo", ("reader",))
OTHER = nova_user("carol", "carol-pw", "other", ("member", "reader"))
MONITOR = nova_user("watcher", "watcher-pw", "monitoring", ("reader",))
SERVICE = nova_user("recovery", "recovery-pw", "service", ("service",))
# An admin's application credentials: one with the admin's roles, one
# limited to reader, one whose access rules allow listing notifications
# only.
APP_ADMIN = app_credential("admin", "ac-admin", "ac-admin-secret", "admin",
                           ("admin", "member", "reader"))
APP_READER = app_credential("admin", "ac-reader", "ac-reader-secret",
                            "admin", ("reader",))
APP_RULED = app_credential(
    "admin", "ac-ruled", "ac-ruled-secret", "admin", ("admin",),
    ({"service": "instance-ha", "method": "GET",
      "path": "/v1/notifications"},))
CALLERS = {"admin": ADMIN, "member": MEMBER, "reader": READER,
           "other-project": OTHER, "no-token": None}

SEG = "0b7f3c1e-5a2d-4e8f-9c6b-1d3e5f7a9b0c"
NOTE = "7e1c9a3b-2d4f-4a6e-8b0c-3e5f7a9b1d2f"
SEGMENT_BODY = {"segment": {"name": "s1", "recovery_method": "auto",
                            "service_type": "compute"}}
HOST_BODY = {"host": {"name": "compute-1", "type": "COMPUTE",
                      "control_attributes": "ssh"}}

#: Every route of the API: method, path, body, the rule that guards it.
#: By default, every rule is Masakari's ``rule:admin_api``.
ROUTES = [
    ("GET", "/v1/segments", None, "os_masakari_api:segments:index"),
    ("POST", "/v1/segments", SEGMENT_BODY,
     "os_masakari_api:segments:create"),
    ("GET", f"/v1/segments/{SEG}", None, "os_masakari_api:segments:detail"),
    ("PUT", f"/v1/segments/{SEG}", SEGMENT_BODY,
     "os_masakari_api:segments:update"),
    ("DELETE", f"/v1/segments/{SEG}", None,
     "os_masakari_api:segments:delete"),
    ("GET", f"/v1/segments/{SEG}/hosts", None,
     "os_masakari_api:os-hosts:index"),
    ("POST", f"/v1/segments/{SEG}/hosts", HOST_BODY,
     "os_masakari_api:os-hosts:create"),
    ("GET", f"/v1/segments/{SEG}/hosts/h1", None,
     "os_masakari_api:os-hosts:detail"),
    ("PUT", f"/v1/segments/{SEG}/hosts/h1", HOST_BODY,
     "os_masakari_api:os-hosts:update"),
    ("DELETE", f"/v1/segments/{SEG}/hosts/h1", None,
     "os_masakari_api:os-hosts:delete"),
    ("GET", "/v1/notifications", None, "os_masakari_api:notifications:index"),
    ("POST", "/v1/notifications", notification(),
     "os_masakari_api:notifications:create"),
    ("GET", f"/v1/notifications/{NOTE}", None,
     "os_masakari_api:notifications:detail"),
    ("GET", f"/v1/notifications/{NOTE}/vmoves", None,
     "os_masakari_api:vmoves:index"),
    ("GET", f"/v1/notifications/{NOTE}/vmoves/v1", None,
     "os_masakari_api:vmoves:detail"),
    ("GET", f"/v1/notifications/{NOTE}/events", None,
     "recovery_api:events:index"),
    ("POST", "/v1/fencing/compute-9/confirm", {"reason": "dark"},
     "recovery_api:fencing:confirm"),
    ("POST", "/v1/host-actions/compute-9/drain", {"reason": "PSU"},
     "recovery_api:host-actions:drain"),
    ("POST", "/v1/host-actions/compute-9/bring-back", {"reason": "fixed"},
     "recovery_api:host-actions:bring_back"),
]
#: Who may call each route with the rules' defaults: admins only.
DEFAULT_ALLOWED = {"admin"}

#: A policy file as written for Masakari: the monitoring project's readers
#: may read notifications, their vmoves and the segments.
MONITORING_POLICY = f"""
"monitor": "role:reader and project_id:{MONITOR.project_id}"
"os_masakari_api:notifications:index": "rule:admin_api or rule:monitor"
"os_masakari_api:notifications:detail": "rule:admin_api or rule:monitor"
"os_masakari_api:vmoves:index": "rule:admin_api or rule:monitor"
"os_masakari_api:vmoves:detail": "rule:admin_api or rule:monitor"
"""
SEGMENTS_TO_MONITORING = """
"os_masakari_api:segments:index": "rule:admin_api or rule:monitor"
"""


def keystone_conf(directory: Path, keystone: FakeKeystone,
                  extra: str = "") -> cfg.ConfigOpts:
    """recovery's options from a config file in ``directory`` (as
    /etc/masakari/masakari.conf), Keystone's auth configured."""
    path = directory / "masakari.conf"
    path.write_text(
        f"[api]\nauth_strategy = keystone\n\n"
        f"[keystone_authtoken]\nwww_authenticate_uri = {keystone.url}\n"
        f"auth_url = {keystone.url}\nauth_type = password\n"
        f"username = {SERVICE.name}\npassword = {SERVICE.password}\n"
        f"project_name = {SERVICE.project}\nuser_domain_id = default\n"
        f"project_domain_id = default\nhttp_connect_timeout = 5\n{extra}")
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="recovery",
         default_config_files=[], default_config_dirs=[])
    return conf


def served(conf: cfg.ConfigOpts, store: Store) -> Any:
    api = app.build(store, Hosts(), StepClock(), max_body=MAX_BODY,
                    duplicate_window=WINDOW, liveness=Silent(),
                    checker=policy.from_conf(conf))
    return serving(auth.protect(api, conf))


@pytest.fixture(scope="module")
def keystone() -> Iterator[FakeKeystone]:
    with FakeKeystone("http://127.0.0.1:9/compute",
                      users=(ADMIN, MEMBER, READER, OTHER, MONITOR,
                             SERVICE, APP_ADMIN, APP_READER, APP_RULED),
                      endpoints={"instance-ha": "http://127.0.0.1:9/v1"}
                      ) as fake:
        yield fake


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[Store]:
    path = tmp_path_factory.mktemp("policy")
    opened = open_store(f"sqlite:///{path}/api.sqlite")
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def default_port(tmp_path_factory, keystone, store) -> Iterator[int]:
    conf = keystone_conf(tmp_path_factory.mktemp("etc"), keystone)
    with served(conf, store) as port:
        yield port


def call(port: int, method: str, path: str, body: Any,
         user: Any) -> Reply:
    headers = {"X-Auth-Token": user.token} if user else {}
    return request(port, method, path, body, headers=headers)


def test_every_route_has_its_rule():
    served_rules = {rule for _, _, _, rule in ROUTES}
    documented = {r.name for r in policies.list_rules()
                  if getattr(r, "operations", None)}
    assert served_rules == documented - {"recovery_api:metrics:index"}
    for method, path, _, rule in ROUTES:
        assert policy.route_rule(method, path.split("/")[2:]) == rule


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("method, path, body, rule", ROUTES,
                         ids=[f"{m} {p}" for m, p, _, _ in ROUTES])
def test_who_may_call_each_route(default_port, store, caller, method,
                                 path, body, rule):
    before = len(store.list_notifications()), len(store.list_segments({}))
    reply = call(default_port, method, path, body, CALLERS[caller])
    if caller == "no-token":
        assert reply.status == 401, reply.text
    elif caller in DEFAULT_ALLOWED:
        # Past the policy: the handler answers (404 for the ids made up).
        assert reply.status not in (401, 403), reply.text
    else:
        assert reply.status == 403, reply.text
        assert reply.json == {"forbidden": {
            "code": 403,
            "message": f"Policy doesn't allow {rule} to be performed."}}
    if caller != "admin":
        assert (len(store.list_notifications()),
                len(store.list_segments({}))) == before


def test_each_denial_is_logged_once_with_its_rule(default_port, caplog):
    caplog.set_level(logging.INFO)
    reply = call(default_port, "GET", "/v1/segments", None, READER)
    assert reply.status == 403
    refusals = [r.getMessage() for r in caplog.records
                if "os_masakari_api:segments:index" in r.getMessage()]
    assert len(refusals) == 1, refusals
    assert READER.project_id in refusals[0]
    assert READER.token not in caplog.text


def test_a_masakari_policy_file_works_unchanged(tmp_path, keystone, store):
    """policy.yaml next to masakari.conf, and a policy.d directory, as
    Kolla-Ansible and OpenStack-Helm put them."""
    (tmp_path / "policy.yaml").write_text(MONITORING_POLICY)
    (tmp_path / "policy.d").mkdir()
    (tmp_path / "policy.d" / "segments.yaml").write_text(
        SEGMENTS_TO_MONITORING)
    conf = keystone_conf(tmp_path, keystone)
    with served(conf, store) as port:
        for method, path, body, rule in ROUTES:
            reply = call(port, method, path, body, MONITOR)
            if method == "GET" and rule.split(":")[1] in (
                    "notifications", "vmoves", "segments"):
                if rule != "os_masakari_api:segments:detail":
                    assert reply.status not in (401, 403), (path, reply.text)
                    continue
            assert reply.status == 403, (method, path, reply.text)
        # A reader of another project is no monitor.
        assert call(port, "GET", "/v1/notifications", None,
                    READER).status == 403
        assert call(port, "GET", "/v1/notifications", None,
                    ADMIN).status == 200


def test_the_static_token_is_the_operator_s(tmp_path, store):
    """auth_strategy = token: the token's holder is an admin, and the
    policy file applies to it as to an admin's token."""
    (tmp_path / "token").write_text(TOKEN)
    (tmp_path / "policy.yaml").write_text(
        '"os_masakari_api:segments:delete": "!"\n')
    (tmp_path / "recovery.conf").write_text(
        f"[api]\nauth_strategy = token\ntoken_file = {tmp_path}/token\n")
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(["--config-file", str(tmp_path / "recovery.conf")],
         project="recovery", default_config_files=[],
         default_config_dirs=[])
    headers = {"X-Auth-Token": TOKEN}
    with served(conf, store) as port:
        assert request(port, "GET", "/v1/segments",
                       headers=headers).status == 200
        denied = request(port, "DELETE", f"/v1/segments/{SEG}",
                         headers=headers)
        assert denied.status == 403, denied.text
        # Headers a caller sends claim nothing: the operator is the token.
        assert request(port, "GET", "/v1/segments", headers={
            "X-Roles": "admin"}).status == 401


def _metrics_app(environ: dict, start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"recovery_up 1\n"]


@pytest.mark.parametrize("where", ["with the API", "on its own host"])
def test_metrics_behind_auth_have_their_rule(tmp_path, keystone, where):
    conf = keystone_conf(tmp_path, keystone)
    wrapped = (auth.protect(_metrics_app, conf) if where == "with the API"
               else auth.guard(_metrics_app, conf, "192.0.2.1"))
    with serving(wrapped) as port:
        assert call(port, "GET", "/metrics", None, ADMIN).status == 200
        denied = call(port, "GET", "/metrics", None, MEMBER)
        assert denied.status == 403, denied.text
        assert "recovery_api:metrics:index" in denied.text
        assert call(port, "GET", "/metrics", None, None).status == 401


def test_masakari_conf_s_oslo_policy_is_read_not_reported(tmp_path,
                                                          keystone, caplog):
    caplog.set_level(logging.INFO)
    conf = keystone_conf(tmp_path, keystone, extra=(
        "\n[oslo_policy]\npolicy_file = /etc/masakari/policy.yaml\n"
        "enforce_scope = true\n"))
    masakari.adopt(conf)
    assert conf.oslo_policy.policy_file == "/etc/masakari/policy.yaml"
    assert "oslo_policy" not in caplog.text



def app_credential_token(keystone: FakeKeystone, user: Any) -> str:
    """A token as a client gets one with the credential: keystoneauth's
    v3applicationcredential plugin, from the fake Keystone."""
    credential, secret = user.credential
    auth = v3.ApplicationCredential(
        auth_url=keystone.url, application_credential_id=credential,
        application_credential_secret=secret)
    return ks_session.Session(auth=auth, timeout=5).get_token()


def test_application_credential_tokens_are_judged_by_their_roles(
        tmp_path, keystone, store):
    """keystonemiddleware accepts an application credential's token; the
    policy judges it by the credential's roles (a reader's credential of
    an admin is a reader), and its access rules hold where
    [keystone_authtoken] service_type names the API's service."""
    conf = keystone_conf(tmp_path, keystone,
                         extra="service_type = instance-ha\n")
    with served(conf, store) as port:
        def get(path: str, user: Any) -> Reply:
            return request(port, "GET", path, headers={
                "X-Auth-Token": app_credential_token(keystone, user)})
        assert get("/v1/segments", APP_ADMIN).status == 200
        denied = get("/v1/segments", APP_READER)
        assert denied.status == 403, denied.text
        assert denied.message == ("Policy doesn't allow "
                                  "os_masakari_api:segments:index to be "
                                  "performed.")
        assert get("/v1/notifications", APP_RULED).status == 200
        assert get("/v1/segments", APP_RULED).status == 401
    assert [r["body"]["auth"]["identity"]["methods"]
            for r in keystone.requests if r["method"] == "POST"
            and "application_credential" in str(r["body"])][-1] == [
        "application_credential"]
