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


def kolla_database(url: str) -> dict[str, str]:
    """Kolla-Ansible's masakari_database_* for a MariaDB URL."""
    parsed = sa.engine.make_url(url)
    return {"user": parsed.username or "", "password": parsed.password or "",
            "address": f"{parsed.host}:{parsed.port}",
            "name": parsed.database or ""}


def api_files(port: int, keystone: str, database_url: str) -> dict:
    """/etc/kolla/masakari-api/ as Kolla-Ansible writes it: the template
    names Masakari's database on the MariaDB server, and the operator's
    override (/etc/kolla/config/masakari.conf) recovery's own, as the
    switching guide says."""
    conf = kolla.masakari_conf(
        "masakari-api", listen_port=port, keystone=keystone,
        database=kolla_database(MYSQL.database_url("masakari")),
        transport_url=require_rabbit(), passwords=PASSWORDS)
    conf = kolla.merge(conf, f"[database]\nconnection = {database_url}\n")
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
                            api_files(kolla.free_port(), "http://unused/v3",
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
