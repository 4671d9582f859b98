"""recovery's image, deployed as Kolla-Ansible deploys masakari: the
bootstrap container upgrades a fresh database; the API runs under
Kolla's uWSGI config through ``kolla_start`` and answers Kolla's
healthcheck, HAProxy's ``GET /`` and a masakari-monitors notification;
the engine, started as ``masakari-engine`` from its own config.json,
recovers the failed host of a real Nova 34. Every file in the config
directories is rendered from Kolla-Ansible's own templates
(tests/images/kolla.py)."""

import datetime
import json
import urllib.request

import pytest
import sqlalchemy as sa

from recovery.db import revisions
from tests.bmc import free_port
from tests.databases import MYSQL
from tests.databases import POSTGRESQL
from tests.fakekeystone import FakeKeystone
from tests.fakekeystone import nova_user
from tests.fakenova.server import wait_until
from tests.images import kolla
from tests.rabbit import require_rabbit

pytestmark = pytest.mark.images

FAILED = "compute-1"
# Kolla-Ansible's users: Nova's (os_privileged_user_*), masakari's own
# (keystonemiddleware's) and a monitor's.
NOVA = nova_user("nova", "nova-image-secret", "service", ("admin",))
MASAKARI = nova_user("masakari", "masakari-image-secret", "service",
                     ("service",))
ADMIN = nova_user("admin", "admin-image-secret", "admin", ("admin",))
PASSWORDS = {"nova": NOVA.password, "masakari": MASAKARI.password}
SECRETS = (NOVA.password, MASAKARI.password, ADMIN.password)
# What the operator puts in /etc/kolla/config/, as shipped.
OVERRIDES = kolla.REPO / "deploy" / "kolla-ansible" / "config"
ENGINE_OVERRIDE = (OVERRIDES / "masakari" / "masakari-engine.conf"
                   ).read_text()


def database_override(url: str) -> str:
    """The shipped masakari.conf override, as Kolla-Ansible renders it
    with recovery_database_connection set in globals.yml."""
    return kolla.render_file(OVERRIDES / "masakari.conf",
                             recovery_database_connection=url)


def kolla_database(url: str) -> dict[str, str]:
    """Kolla-Ansible's masakari_database_* for a MariaDB URL."""
    parsed = sa.engine.make_url(url)
    return {"user": parsed.username or "", "password": parsed.password or "",
            "address": f"{parsed.host}:{parsed.port}",
            "name": parsed.database or ""}


def api_files(port: int, keystone: str, database_url: str) -> dict:
    """/etc/kolla/masakari-api/ as Kolla-Ansible writes it: the template
    names Masakari's database on the MariaDB server, and the shipped
    override (/etc/kolla/config/masakari.conf) recovery's own."""
    conf = kolla.masakari_conf(
        "masakari-api", listen_port=port, keystone=keystone,
        database=kolla_database(MYSQL.database_url("masakari")),
        transport_url=require_rabbit(), passwords=PASSWORDS)
    conf = kolla.merge(conf, database_override(database_url))
    return {"config.json": kolla.config_json("masakari-api"),
            "masakari.conf": conf,
            "masakari-api-paste.ini": kolla.render(
                "masakari/templates/masakari-api-paste.ini.j2"),
            "masakari-api-uwsgi.ini": kolla.uwsgi_ini(port)}


def call(url: str, method: str = "GET", body=None,
         token: str | None = ADMIN.token) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 **({"X-Auth-Token": token} if token else {})})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read() or b"{}")


@pytest.mark.parametrize("server", [POSTGRESQL, MYSQL],
                         ids=lambda s: s.name)
def test_the_bootstrap_container_upgrades_a_fresh_database(
        image, server, tmp_path, request):
    admin = request.getfixturevalue(f"{server.name}_server")
    name = server.create(admin)
    try:
        url = server.database_url(name)
        api = kolla.Service(tmp_path, "masakari-api",
                            api_files(free_port(), "http://unused/v3",
                                      url))
        try:
            done = api.bootstrap()
            assert done.returncode == 0, (done.stdout + done.stderr
                                          + api.log_files())
        finally:
            api.remove()
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        try:
            assert revisions.is_current(engine)
        finally:
            engine.dispose()
        # kolla_start's own words: it ran the bootstrap, not uWSGI.
        assert "Running command" not in done.stdout + done.stderr
    finally:
        server.drop(admin, name)


def test_masakari_manage_db_sync_is_recoverys_upgrade(
        image, postgresql_url, tmp_path):
    """OpenStack-Helm's db-sync job runs 'masakari-manage db sync' with
    the config at /etc/masakari/masakari.conf."""
    (tmp_path / "masakari.conf").write_text(
        f"[database]\nconnection = {postgresql_url}\n")
    tmp_path.chmod(0o755)  # the masakari user reads it
    done = kolla.podman(
        "run", "--rm", "--network", "host", "--volume",
        f"{tmp_path}:/etc/masakari:ro", image, "masakari-manage", "db",
        "sync", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    engine = sa.create_engine(postgresql_url, poolclass=sa.pool.NullPool)
    try:
        assert revisions.is_current(engine)
    finally:
        engine.dispose()
    other = kolla.podman("run", "--rm", image, "masakari-manage", "db",
                         "version", check=False)
    assert other.returncode == 2
    assert "only 'db sync' (recovery db upgrade) is" in other.stderr


def monitor_sends(keystone: str, tmp_path, hostname: str) -> None:
    """masakari-monitors' host monitor's notification, sent by its own
    SendNotification with its own [api] options: the catalog's
    instance-ha endpoint, as an admin."""
    masakarimonitors_conf = pytest.importorskip(
        "masakarimonitors.conf", reason="tox -e images installs it")
    ha = pytest.importorskip("masakarimonitors.ha.masakari")
    path = tmp_path / "masakarimonitors.conf"
    path.write_text(
        f"[api]\nregion = RegionOne\napi_interface = public\n"
        f"auth_type = password\nauth_url = {keystone}\n"
        f"username = {ADMIN.name}\npassword = {ADMIN.password}\n"
        f"project_name = {ADMIN.project}\nuser_domain_id = default\n"
        f"project_domain_id = default\ntimeout = 10\n")
    conf = masakarimonitors_conf.CONF
    conf(["--config-file", str(path)], project="masakarimonitors")
    try:
        ha.SendNotification().send_notification(0, 0, {"notification": {
            "type": "COMPUTE_HOST", "hostname": hostname,
            "generated_time": datetime.datetime.now(
                datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
            "payload": {"event": "STOPPED", "cluster_status": "OFFLINE",
                        "host_status": "NORMAL"}}})
    finally:
        conf.clear()


@pytest.fixture(scope="module")
def realnova():
    harness = pytest.importorskip("tests.integration.realnova.harness",
                                  reason="tox -e images installs Nova")
    with harness.RealNova(hosts=3) as nova:
        yield nova


@pytest.fixture(scope="module")
def kolla_cloud(image, realnova, mysql_server, tmp_path_factory):
    """Keystone (fake) with the real Nova in its catalog, recovery's
    database made by the bootstrap container, and the API and engine
    containers from Kolla-Ansible's files."""
    workdir = tmp_path_factory.mktemp("kolla")
    name = MYSQL.create(mysql_server)
    url = MYSQL.database_url(name)
    port = free_port()
    services = []
    with FakeKeystone(realnova.endpoint,
                      users=(NOVA, MASAKARI, ADMIN)) as keystone:
        keystone.endpoints["instance-ha"] = (
            f"http://127.0.0.1:{port}/v1/$(project_id)s")
        try:
            api = kolla.Service(workdir, "masakari-api",
                                api_files(port, keystone.url, url))
            services.append(api)
            done = api.bootstrap()
            assert done.returncode == 0, done.stdout + done.stderr
            api.start()
            # The engine: its own rendered masakari.conf, with the
            # database's override and the engine's shipped one
            # (deploy/kolla-ansible: no API of its own, as uWSGI serves
            # Kolla's address).
            conf = kolla.merge(kolla.merge(kolla.masakari_conf(
                "masakari-engine", listen_port=port, keystone=keystone.url,
                database=kolla_database(MYSQL.database_url("masakari")),
                transport_url=require_rabbit(), passwords=PASSWORDS),
                database_override(url)), ENGINE_OVERRIDE)
            engine = kolla.Service(workdir, "masakari-engine", {
                "config.json": kolla.config_json("masakari-engine"),
                "masakari.conf": conf})
            services.append(engine)
            engine.start()
            wait_until(lambda: _answers(f"http://127.0.0.1:{port}/"), 60,
                       interval=0.2, what="the API container to answer"
                       + "".join(s.output() + s.log_files()
                                 for s in services if not s.running()))
            yield keystone, api, engine, f"http://127.0.0.1:{port}"
        finally:
            for service in services:
                service.remove()
            MYSQL.drop(mysql_server, name)


def _answers(url: str) -> bool:
    try:
        return call(url, token=None)[0] == 200
    except OSError:
        return False


def test_the_api_answers_kollas_healthcheck_and_haproxys_check(kolla_cloud):
    _, api, _, url = kolla_cloud
    # The container's healthcheck, as Kolla-Ansible writes it.
    check = api.exec("healthcheck_curl", f"{url}/healthcheck")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith("\n200 "), check.stdout
    # HAProxy's option httpchk GET /, no token.
    status, versions = call(f"{url}/", token=None)
    assert status == 200 and versions["versions"], versions
    # uWSGI serves masakari.wsgi.api:application, Kolla-Ansible's module.
    logs = api.log_files()
    assert "masakari-api-uwsgi.log" in logs
    assert "WSGI app 0 (mountpoint='') ready" in logs, logs


def test_a_monitors_notification_is_recovered_on_the_real_nova(
        kolla_cloud, realnova, tmp_path):
    keystone, api, engine, url = kolla_cloud
    servers = [realnova.create(f"vm-{n}", host=FAILED) for n in range(2)]
    for server in servers:
        realnova.settle(server)
    realnova.fail_host(FAILED)
    realnova.wait_service(FAILED, "down")

    monitor_sends(keystone.url, tmp_path, FAILED)
    listed = call(f"{url}/v1/notifications")[1]["notifications"]
    assert [(n["type"], n["hostname"]) for n in listed] == [
        ("COMPUTE_HOST", FAILED)], listed
    uuid = listed[0]["notification_uuid"]

    def ended():
        found = call(f"{url}/v1/notifications/{uuid}")[1]["notification"]
        return found["status"] in ("finished", "failed", "error") and found

    done = wait_until(ended, 180, interval=0.5,
                      what="the engine container to recover the host"
                      + engine.output() + engine.log_files())
    assert done["status"] == "finished", (done, engine.log_files())
    for server in servers:
        moved = realnova.server(server)
        assert moved["OS-EXT-SRV-ATTR:host"] != FAILED, moved
        assert moved["status"] == "ACTIVE" and not moved["locked"], moved
    # The engine ran the command of Kolla-Ansible's config.json.
    assert "Running command: 'masakari-engine --config-file " \
        "/etc/masakari/masakari.conf'" in engine.output()


def test_no_secret_in_the_environment_or_the_logs(kolla_cloud):
    _, api, engine, _ = kolla_cloud
    for service in (api, engine):
        env = "\n".join(service.env())
        seen = service.output() + service.log_files()
        for secret in SECRETS:
            assert secret not in env, service.name
            assert secret not in seen, service.name
        assert service.exec("id", "-u").stdout.strip() == "42485"
