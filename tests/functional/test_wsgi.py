"""``recovery.wsgi.api:application`` under a real WSGI server (cheroot's,
in its own process, as uWSGI or mod_wsgi would run it), on PostgreSQL and
on MariaDB, with an engine on the same database that serves no API of
its own (``[api] enabled = false``).

The API starts while its database does not answer (a TCP proxy, cut):
/healthcheck and a notification get 503, and nothing is stored. Once the
database answers, a notification posted there is stored (202) and the
engine, which shares the database, recovers the host.
"""

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import sqlalchemy as sa

from recovery.db.store import open_store
from tests.fakenova import FakeNova
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until
from tests.tcpproxy import TcpProxy

HOST = "compute-1"
TOKEN = "a-static-token-of-32-characters!"
HOST_DOWN = {"notification": {
    "type": "COMPUTE_HOST", "hostname": HOST,
    "generated_time": "2026-11-22T10:00:00",
    "payload": {"event": "STOPPED", "host_status": "NORMAL",
                "cluster_status": "OFFLINE"}}}


@pytest.fixture(params=["postgresql", "mysql"])
def database(request):
    url = request.getfixturevalue(f"{request.param}_url")
    open_store(url, upgrade=True).close()
    return url


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=0.05) as fake:
        for host in (HOST, "compute-2"):
            fake.add_compute(host)
        yield fake


@pytest.fixture
def engine(database, nova, tmp_path):
    workdir = tmp_path / "engine"
    workdir.mkdir()
    # Behind the WSGI API, as masakari-engine runs behind masakari-api.
    process = EngineProcess(workdir, nova.endpoint, database=database,
                            api=False)
    yield process
    process.close()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WSGIProcess:
    """The API alone: cheroot serving recovery.wsgi.api:application, its
    config named by RECOVERY_CONFIG_FILE."""

    def __init__(self, workdir, config, env=None):
        self.workdir = workdir
        self.port = free_port()
        self.stderr_path = workdir / "api.stderr"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cheroot", "--bind",
             f"127.0.0.1:{self.port}", "recovery.wsgi.api:application"],
            env={**env, "RECOVERY_CONFIG_FILE": str(config)},
            stdout=subprocess.DEVNULL, stderr=open(self.stderr_path, "wb"))

    def request(self, method, path, body=None, token=TOKEN):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if token:
            headers["X-Auth-Token"] = token
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data,
            method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode()

    def wait_listening(self):
        def answered():
            assert self.proc.poll() is None, self.stderr_path.read_text()
            try:
                return self.request("GET", "/healthcheck", token=None)
            except OSError:
                return None
        return wait_until(answered, 15, "the WSGI server listening")

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def api_config(workdir, engine, database, auth="token"):
    """The engine's config, for the API: its own log, ``database``, and
    ``auth``."""
    token_file = workdir / "token"
    token_file.write_text(TOKEN)
    text = engine.config.read_text().replace(
        f"log_file = {engine.log}", f"log_file = {workdir / 'api.log'}"
    ).replace(
        f"connection = {engine.database}", f"connection = {database}"
    ).replace(
        "auth_strategy = noauth",
        f"auth_strategy = {auth}\ntoken_file = {token_file}"
    ).replace("enabled = False\n", "")
    config = workdir / "api.conf"
    config.write_text(text)
    return config


def test_a_notification_posted_to_the_wsgi_api_is_recovered_by_an_engine(
        database, engine, nova, tmp_path):
    url = sa.engine.make_url(database)
    with TcpProxy(url.host, url.port) as proxy:
        proxy.cut()
        behind = url.set(port=proxy.port).render_as_string(
            hide_password=False)
        api = WSGIProcess(tmp_path, api_config(tmp_path, engine, behind),
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
        try:
            # The database does not answer: 503, and nothing stored.
            assert api.wait_listening() == (503, "database: not answering")
            status, body = api.request("POST", "/v1/notifications",
                                       HOST_DOWN)
            assert status == 503, body
            assert "nothing was stored" in body["serviceUnavailable"][
                "message"]
            assert engine.stored() == []
            # Authenticated, as the engine's API is.
            assert api.request("POST", "/v1/notifications", HOST_DOWN,
                               token=None)[0] == 401

            proxy.restore()
            assert api.request("GET", "/healthcheck", token=None) == (
                200, "database: OK")
            engine.start()
            # It serves no API of its own: the notification reaches it
            # through the database alone.
            assert engine.port is None
            log = engine.log.read_text()
            assert "no API here" in log and "No /metrics" in log
            uuids = [nova.add_server(f"vm{n}", HOST) for n in range(2)]
            nova.fail_host(HOST)
            # As a monitor does, again after 503: the API opens the store
            # at most once per [database] retry_interval (10 s).
            status, body = wait_until(
                lambda: (answer := api.request(
                    "POST", "/v1/notifications", HOST_DOWN))[0] != 503
                and answer, 15, "the API serving")
            assert status == 202, body
            uuid = body["notification"]["notification_uuid"]
            done = wait_until(
                lambda: (n := api.request(
                    "GET", f"/v1/notifications/{uuid}")[1]["notification"]
                )["status"] in ("finished", "failed") and n,
                30, "the notification recovered")
            assert done["status"] == "finished", done
            assert sorted(c["uuid"] for c in nova.evacuate_calls) == sorted(
                uuids)

            # The database goes away again: /healthcheck says so.
            proxy.cut()
            assert api.request("GET", "/healthcheck", token=None)[0] == 503
        finally:
            api.close()
    stderr = api.stderr_path.read_text()
    assert "Traceback" not in stderr, stderr


def test_the_wsgi_api_refuses_noauth(database, engine, tmp_path):
    """The WSGI server chooses the address: noauth is never allowed."""
    config = api_config(tmp_path, engine, database, auth="noauth")
    done = subprocess.run(
        [sys.executable, "-c", "import recovery.wsgi.api"],
        env={**os.environ, "RECOVERY_CONFIG_FILE": str(config)},
        capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    # oslo.log's excepthook logs it, where the operator looks.
    assert "auth_strategy = noauth is refused under a WSGI server" in (
        (tmp_path / "api.log").read_text())
