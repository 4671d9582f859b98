"""``recovery-engine --config-file masakari.conf``: Masakari's config, as
Kolla-Ansible renders it (ansible/roles/masakari/templates/
masakari.conf.j2), run unchanged against the fake Keystone and the fake
Nova. The engine listens where Masakari's API did, calls Nova as
Masakari's privileged user, recovers with Masakari's thread count, and
says once why each option it does not read is not used."""

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from recovery.conf import masakari
from tests.fakekeystone import FakeKeystone
from tests.fakekeystone import nova_user
from tests.fakenova import FakeNova
from tests.fakenova.placement import endpoint_for
from tests.fakenova.server import wait_until
from tests.functional.engine_process import EngineProcess

FAILED = "compute-1"
THREADS = 2                 # Masakari's default is 3, as recovery's
# Kolla-Ansible's users: Nova's (os_privileged_user_*), Masakari's own
# (keystonemiddleware's, [keystone_authtoken]), and a monitor's caller.
NOVA = nova_user("nova", "nova-secret", "service", ("admin",))
MASAKARI = nova_user("masakari", "masakari-secret", "service",
                     ("service",))
ADMIN = nova_user("admin", "admin-secret", "admin", ("admin",))
# 127.0.0.2 is loopback and not [api] host's default: the address shows
# that masakari_api_listen was read.
LISTEN = "127.0.0.2"
SECRETS = ("nova-secret", "masakari-secret", "db-secret", "rabbit-secret")


def kolla_masakari_conf(keystone: str, workdir: Path) -> str:
    """masakari.conf.j2 rendered for masakari-engine, without TLS,
    memcached or a policy file; ``keystone`` is keystone_internal_url and
    keystone_public_url, and the database is an SQLite file (recovery's
    store) where Kolla-Ansible writes MariaDB's URL. Operators add
    host_failure_recovery_threads in [DEFAULT], where Masakari reads
    it."""
    rabbit = "rabbit://openstack:rabbit-secret@127.0.0.1:5672//"
    database = "mysql+pymysql://masakari:db-secret@127.0.0.1:3306/masakari"
    return f"""[DEFAULT]
debug = False
log_dir = {workdir / "log"}
masakari_api_listen = {LISTEN}
masakari_api_listen_port = 0
enabled_apis = masakari_api
state_path = /var/lib/masakari
transport_url = {rabbit}
os_region_name = RegionOne
os_user_domain_name = default
os_project_domain_name = default
os_privileged_user_tenant = service
os_privileged_user_auth_url = {keystone}
os_privileged_user_name = nova
os_privileged_user_password = nova-secret
nova_ca_certificates_file =
host_failure_recovery_threads = {THREADS}

[database]
connection = sqlite:///{workdir / "recovery.sqlite"}
connection_recycle_time = 10
max_pool_size = 1
max_retries = -1

[keystone_authtoken]
service_type = instance-ha
www_authenticate_uri = {keystone}
auth_url = {keystone}
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = masakari
password = masakari-secret
service_token_roles_required = true
region_name = RegionOne
cafile =

[oslo_messaging_notifications]
transport_url = {rabbit}
driver = noop

[oslo_messaging_rabbit]
use_queue_manager = true
heartbeat_in_pthread = False
rabbit_quorum_queue = true
rabbit_transient_quorum_queue = true

[oslo_middleware]
enable_proxy_headers_parsing = true

[taskflow]
connection = {database}

[coordination]
backend_url = etcd3+http://127.0.0.1:2379?api_version=v3

[oslo_concurrency]
lock_path = /var/lib/masakari/tmp
"""


# What the file sets that recovery does not read: one line each.
UNUSED = [("DEFAULT", "enabled_apis"), ("DEFAULT", "state_path"),
          ("coordination", "backend_url"),
          ("oslo_concurrency", "lock_path"),
          ("oslo_middleware", "enable_proxy_headers_parsing"),
          ("taskflow", "connection")]


class MasakariConfEngine(EngineProcess):
    """recovery-engine, its console script, with Kolla-Ansible's
    masakari.conf as its one config file."""

    def __init__(self, workdir: Path, keystone: str):
        self.keystone = keystone
        (workdir / "log").mkdir()
        super().__init__(workdir, "unused: Nova is in Keystone's catalog")

    def write_config(self, endpoint: str, threads: int, extra: str) -> None:
        self.config = self.workdir / "masakari.conf"
        self.config.write_text(kolla_masakari_conf(self.keystone,
                                                   self.workdir))

    def start(self, watchdog_usec: int | None = None,
              ready_timeout: float | None = 30.0) -> None:
        command = [str(Path(sys.executable).with_name("recovery-engine")),
                   "--config-file", str(self.config)]
        env = {**os.environ, "NOTIFY_SOCKET": self.notify_path,
               "PYTHONWARNINGS": "ignore"}
        self.proc = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL,
            stderr=open(self.workdir / "stderr.log", "ab"))
        self.wait_ready(ready_timeout)

    def call(self, method: str, path: str, body=None) -> tuple[int, dict]:
        """The API where masakari_api_listen(_port) put it, as a monitor
        calls it: with a Keystone token of an admin."""
        request = urllib.request.Request(
            f"http://{LISTEN}:{self.port}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"X-Auth-Token": ADMIN.token,
                     "Content-Type": "application/json",
                     "OpenStack-API-Version": "instance-ha latest"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())

    def engine_log(self) -> str:
        return (self.workdir / "log" / "recovery-engine.log").read_text()


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=0.4) as fake:
        for host in (FAILED, "compute-2", "compute-3"):
            fake.add_compute(host)
        yield fake


def most_locked_at_once(nova: FakeNova) -> int:
    """The most instances locked by recovery at one time: each is locked
    and unlocked by its own task of the host's pool."""
    depth, most = 0, 0
    for event in sorted(nova.lock_events, key=lambda e: e["time"]):
        depth += 1 if event["event"] == "lock" else -1
        most = max(most, depth)
    return most


def test_kolla_ansibles_masakari_conf_runs_unchanged(nova, tmp_path):
    uuids = [nova.add_server(f"vm-{n}", FAILED) for n in range(6)]
    catalog = {"placement": endpoint_for(nova.endpoint)}
    with FakeKeystone(nova.endpoint, users=(NOVA, MASAKARI, ADMIN),
                      endpoints=catalog) as keystone:
        engine = MasakariConfEngine(tmp_path, keystone.url)
        try:
            engine.start()
            nova.fail_host(FAILED)
            status, body = engine.call("POST", "/v1/notifications", {
                "notification": {
                    "type": "COMPUTE_HOST", "hostname": FAILED,
                    "generated_time": "2026-11-22T10:00:00",
                    "payload": {"event": "STOPPED", "host_status": "NORMAL",
                                "cluster_status": "OFFLINE"}}})
            assert status == 202, body
            uuid = body["notification"]["notification_uuid"]
            done = wait_until(
                lambda: (n := engine.call(
                    "GET", f"/v1/notifications/{uuid}")[1]["notification"])
                ["status"] in ("finished", "failed", "error") and n,
                60, interval=0.2, what="the notification to end")
            engine.signal(signal.SIGTERM)
            assert engine.wait_exit() == 0, engine.stderr()
        finally:
            engine.close()
    assert done["status"] == "finished", done
    assert all(nova.server(u)["host"] != FAILED for u in uuids)
    # host_failure_recovery_threads, under Masakari's name.
    assert most_locked_at_once(nova) == THREADS
    # Nova was called as os_privileged_user_*: the one user Keystone gave
    # a token to, with Masakari's project and domains; keystonemiddleware
    # as [keystone_authtoken]'s user.
    logins = [r["body"]["auth"] for r in keystone.requests
              if r["method"] == "POST"]
    assert {"identity": {"methods": ["password"], "password": {"user": {
        "name": "nova", "password": "nova-secret",
        "domain": {"name": "default"}}}},
        "scope": {"project": {"name": "service",
                              "domain": {"name": "default"}}}} in logins
    users = sorted({auth["identity"]["password"]["user"]["name"]
                    for auth in logins})
    assert users == ["masakari", "nova"]
    assert {e["by"] for e in nova.lock_events} == {"admin"}

    log = engine.engine_log()
    assert f"Listening on {LISTEN}:{engine.port} (auth: keystone)" in log
    for group, name in UNUSED:
        line = (f"Masakari option [{group}] {name} is not used: "
                f"{masakari.unused(group, name).reason}")
        assert log.count(line) == 1, line
    assert log.count("Masakari option [") == len(UNUSED)
    # oslo.config's one warning for each Masakari name used.
    for name in ("masakari_api_listen", "masakari_api_listen_port",
                 "os_region_name", "nova_ca_certificates_file",
                 "os_privileged_user_name", "os_privileged_user_password"):
        assert log.count(f'Option "{name}" from group "DEFAULT" is '
                         f'deprecated') == 1, name
    for secret in SECRETS:
        assert secret not in log
        assert secret not in engine.stderr()
