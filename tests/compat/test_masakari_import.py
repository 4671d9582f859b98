"""'recovery db import-masakari' from Masakari 22 itself: a database made
by 'masakari-manage db sync' on MariaDB and on PostgreSQL, filled through
Masakari's API and objects (tests/compat/masakari_side.py), imported by
the command, then every listing through openstacksdk from recovery-engine
against the same listing from Masakari's own API over the same data.

Where recovery's answer differs by design, the rules below name the
field and say why; every other field Masakari shows must be the same, and
no entry may be missing or extra on either side.
"""

import dataclasses
import datetime
import json
import select
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from recovery.api import views
from recovery.db import masakari_source as ms
from recovery.db.store import open_store
from tests.compat import masakari_side
from tests.functional.cli_process import run_cli
from tests.functional.engine_process import EngineProcess

pytest.importorskip("masakari", reason="tox -e masakari-compat installs it")
openstack = pytest.importorskip("openstack")

MANAGE = Path(sys.executable).with_name("masakari-manage")
SIDE = [sys.executable, "-m", "tests.compat.masakari_side"]
IN_FLIGHT = ("new", "running", "error")
T0 = datetime.datetime(2026, 5, 4, 3, 2, 1)


def at(minutes: int) -> str:
    return (T0 + datetime.timedelta(minutes=minutes)).isoformat()


def stopped(**more) -> dict:
    return {"event": "STOPPED", "host_status": "NORMAL",
            "cluster_status": "OFFLINE", **more}


def sdk(endpoint: str):
    """openstacksdk on one endpoint, without Keystone (both APIs here run
    without auth: Masakari's noauth2, recovery's noauth)."""
    return openstack.connection.Connection(
        auth_type="none", auth={"endpoint": endpoint},
        instance_ha_endpoint_override=endpoint, api_timeout=30)


@dataclasses.dataclass
class Masakari:
    url: str
    conf: Path
    api: object     # an openstack.connection.Connection

    def fill(self, **spec) -> None:
        done = subprocess.run([*SIDE, "fill", str(self.conf),
                               json.dumps(spec)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    def dump(self) -> dict:
        """Every row of every table of Masakari's database."""
        engine = sa.create_engine(self.url, poolclass=sa.pool.NullPool)
        try:
            meta = sa.MetaData()
            meta.reflect(engine)
            with engine.connect() as conn:
                return {name: conn.execute(sa.select(table).order_by(
                    *table.primary_key.columns)).all()
                    for name, table in meta.tables.items()}
        finally:
            engine.dispose()


@pytest.fixture(params=["mysql", "postgresql"])
def masakari(request, tmp_path):
    """Masakari 22's database, its schema made by masakari-manage, and
    its API serving it."""
    url = request.getfixturevalue(f"{request.param}_url")
    workdir = tmp_path / "masakari"
    workdir.mkdir()
    conf = masakari_side.write_config(workdir / "masakari.conf", url,
                                      workdir)
    done = subprocess.run([str(MANAGE), "--config-file", str(conf), "db",
                           "sync"], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    server = subprocess.Popen([*SIDE, "serve", str(conf)],
                              stdout=subprocess.PIPE, text=True,
                              stderr=open(workdir / "api.log", "w"))
    try:
        ready, _, _ = select.select([server.stdout], [], [], 60)
        line = server.stdout.readline() if ready else ""
        assert line.startswith("PORT "), (
            f"Masakari's API did not start: "
            f"{(workdir / 'api.log').read_text()[-2000:]}")
        endpoint = f"http://127.0.0.1:{int(line.split()[1])}/v1"
        yield Masakari(url, conf, sdk(endpoint))
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def recovery(tmp_path, nova):
    engine = EngineProcess(tmp_path, nova.endpoint)
    yield engine
    engine.close()


def as_oslo_db_writes_it(url: str) -> str:
    """The URL in Masakari's masakari.conf: no driver named."""
    return url.replace("+pymysql", "").replace("+psycopg", "")


def import_masakari(recovery, masakari, *more):
    done = run_cli(str(recovery.config), "db", "import-masakari", "--from",
                   as_oslo_db_writes_it(masakari.url), *more)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def fill_a_cloud(masakari) -> dict:
    """Two segments (and one deleted), reserved, normal and maintenance
    hosts (and one deleted), finished and failed host failures with
    vmoves, an instance and a process notification, notifications still
    new, running and error, and one deleted. The hosts' uuids by name."""
    api = masakari.api.instance_ha
    rack_a = api.create_segment(name="rack-a", recovery_method="auto",
                                service_type="COMPUTE",
                                description="first rack").uuid
    rack_b = api.create_segment(name="rack-b",
                                recovery_method="reserved_host",
                                service_type="COMPUTE").uuid
    old = api.create_segment(name="old-rack", recovery_method="auto",
                             service_type="COMPUTE").uuid
    masakari.fill(hosts=[
        dict(segment=segment, name=name, type="COMPUTE",
             control_attributes=control, reserved=reserved,
             on_maintenance=False)
        for segment, name, control, reserved in (
            (rack_a, "compute-a1", "SSH", False),
            (rack_a, "compute-a2", "TCP", False),
            (rack_a, "compute-a3", "SSH", False),
            (rack_b, "compute-b1", "SSH", False),
            (rack_b, "compute-b2", "SSH", True),
            (rack_b, "compute-b3", "SSH", False),
            (old, "compute-o1", "SSH", False))])
    # Before any notification: Masakari refuses these edits while a
    # segment has one it may still act on.
    api.delete_segment(old)
    hosts = {h.name: h.uuid for segment in (rack_a, rack_b)
             for h in api.hosts(segment)}
    api.delete_host(hosts.pop("compute-a3"), rack_a)
    api.update_segment(rack_b, description="spares")
    api.update_host(hosts["compute-b3"], rack_b, on_maintenance=True)

    def notify(type, host, payload, minutes):
        return api.create_notification(
            type=type, hostname=host, generated_time=at(minutes),
            payload=payload).notification_uuid

    finished = notify("COMPUTE_HOST", "compute-a1", stopped(), 0)
    failed = notify("COMPUTE_HOST", "compute-b1", stopped(), 1)
    vm = notify("VM", "compute-a2", {
        "event": "LIFECYCLE", "vir_domain_event": "STOPPED_FAILED",
        "instance_uuid": "5a4f0c1e-0000-4000-8000-000000000007"}, 2)
    process = notify("PROCESS", "compute-a2", {
        "event": "STOPPED", "process_name": "nova-compute"}, 3)
    running = notify("COMPUTE_HOST", "compute-a2", stopped(), 4)
    new = notify("COMPUTE_HOST", "compute-b1",
                 stopped(host_status="UNKNOWN"), 5)
    gone = notify("COMPUTE_HOST", "compute-b2", stopped(), 6)

    def vmove(n, source, dest, status, message=None, end=True):
        return dict(uuid=f"0f1e2d3c-0000-4000-8000-00000000000{n}",
                    instance_uuid=f"5a4f0c1e-0000-4000-8000-00000000000{n}",
                    instance_name=f"vm-{n}", source_host=source,
                    dest_host=dest, start_time=at(10 + n),
                    end_time=at(11 + n) if end else None,
                    type="evacuation", status=status, message=message)

    masakari.fill(notifications=[
        dict(uuid=finished, status="finished", vmoves=[
            vmove(1, "compute-a1", "compute-a2", "succeeded"),
            vmove(2, "compute-a1", "compute-a2", "succeeded")]),
        dict(uuid=failed, status="failed",
             message="Failed to evacuate instances '5a4f0c1e' from host "
                     "'compute-b1'",
             vmoves=[vmove(3, "compute-b1", "compute-b2", "succeeded"),
                     vmove(4, "compute-b1", None, "failed",
                           message="No valid host was found.",
                           end=False)]),
        dict(uuid=vm, status="finished"),
        dict(uuid=process, status="error",
             message="Failed to disable nova-compute"),
        dict(uuid=running, status="running", vmoves=[
            vmove(5, "compute-a2", None, "ongoing", end=False)]),
        dict(uuid=new),
        dict(uuid=gone, status="finished", delete=True)])
    return hosts


# -- what differs by design ---------------------------------------------------
def _own_id(m, r, context):
    """Recovery numbers its own rows."""
    return isinstance(r["id"], int)


def _updated_at(m, r, context):
    """Masakari leaves updated_at null until the first update; recovery's
    schema always has one: the import takes created_at."""
    return r["updated_at"] == (m["updated_at"] or m["created_at"])


def _hostname(m, r, context):
    """Masakari's listing names no host (only its create answer does);
    recovery names the host the notification is for."""
    return m["hostname"] is None and r["hostname"] == context["hostnames"][
        m["source_host_uuid"]]


def _status(m, r, context):
    """A notification Masakari may still be working on (new, running,
    error) is brought as ignored: recovery does not act on it."""
    if m["status"] in IN_FLIGHT:
        return r["status"] == "ignored"
    return r["status"] == m["status"]


def _message(m, r, context):
    """The ignored ones say what Masakari had."""
    if m["status"] in IN_FLIGHT:
        said = f" ({m['message']})" if m["message"] else ""
        return r["message"].startswith(
            f"Imported from Masakari, where it was {m['status']}{said}: ")
    return r["message"] == m["message"]


def _vmove_uuid(m, r, context):
    """Recovery names a vmove after its notification and instance
    (recovery.api.views.vmove_uuid): Masakari's uuid is not kept."""
    instance = m.get("instance_uuid") or m.get("server_id")
    return r["uuid"] == views.vmove_uuid(context["notification"], instance)


def _failover_segment(m, r, context):
    return not differences(m["failover_segment"], r["failover_segment"],
                           SEGMENT, context)


SEGMENT = {"id": _own_id, "updated_at": _updated_at}
HOST = {**SEGMENT, "failover_segment": _failover_segment}
NOTIFICATION = {**SEGMENT, "hostname": _hostname, "status": _status,
                "message": _message}
VMOVE = {**SEGMENT, "uuid": _vmove_uuid}


def differences(m: dict, r: dict, rules: dict, context: dict) -> list:
    """The fields of Masakari's ``m`` that recovery's ``r`` lacks or
    shows otherwise than the rules allow."""
    wrong = []
    for key, value in m.items():
        if key not in r:
            wrong.append(f"{key}: missing")
        elif key in rules:
            if not rules[key](m, r, context):
                wrong.append(f"{key}: {value!r} -> {r[key]!r} "
                             f"({rules[key].__doc__})")
        elif r[key] != value:
            wrong.append(f"{key}: {value!r} -> {r[key]!r}")
    return wrong


def compare(masakari_items, recovery_items, key, rules, context, what):
    """Same entries on both sides (none missing, none extra), each with
    Masakari's fields as the rules allow."""
    mine = {i[key]: i for i in recovery_items}
    theirs = {i[key]: i for i in masakari_items}
    assert sorted(mine) == sorted(theirs), what
    assert len(mine) == len(recovery_items), what
    wrong = {k: d for k in theirs
             if (d := differences(theirs[k], mine[k], rules, context))}
    assert not wrong, f"{what}: {wrong}"
    return len(theirs)


def listings(conn, segments):
    """Each listing both ways: as openstacksdk's resources, and the JSON
    the API answers (through the same connection)."""
    api = conn.instance_ha
    found = {
        "segments": [s.to_dict(computed=False) for s in api.segments()],
        "raw segments": api.get("/segments").json()["segments"],
        "notifications": [n.to_dict(computed=False)
                          for n in api.notifications()],
        "raw notifications": api.get(
            "/notifications").json()["notifications"]}
    for segment in segments:
        found[f"hosts of {segment}"] = [
            h.to_dict(computed=False) for h in api.hosts(segment)]
        found[f"raw hosts of {segment}"] = api.get(
            f"/segments/{segment}/hosts").json()["hosts"]
    for item in found["raw notifications"]:
        uuid = item["notification_uuid"]
        found[f"notification {uuid}"] = [
            api.get_notification(uuid).to_dict(computed=False)]
        if item["type"] == "COMPUTE_HOST":
            found[f"vmoves of {uuid}"] = [
                v.to_dict(computed=False) for v in api.vmoves(uuid)]
            found[f"raw vmoves of {uuid}"] = api.get(
                f"/notifications/{uuid}/vmoves").json()["vmoves"]
    return found


def test_recovery_serves_what_masakari_served(masakari, recovery):
    hosts = fill_a_cloud(masakari)
    before = masakari.dump()

    dry = import_masakari(recovery, masakari, "--dry-run")
    store = open_store(recovery.database)
    assert store.list_segments() == [] and store.list_notifications() == []
    store.close()
    first = import_masakari(recovery, masakari)
    assert dry.splitlines()[0].endswith(" (dry run: nothing written)")
    assert dry.splitlines()[-1] == first.splitlines()[-1].replace(
        "imported: 2", "would import: 2")
    assert first.splitlines()[-1] == (
        "imported: 2 segments, 5 hosts, 6 notifications, 5 vmoves; already "
        "imported: nothing; skipped: 1 segment, 2 hosts, 1 notification")
    second = import_masakari(recovery, masakari)
    assert second.splitlines()[-1] == (
        "imported: nothing; already imported: 2 segments, 5 hosts, "
        "6 notifications; skipped: 1 segment, 2 hosts, 1 notification")
    assert masakari.dump() == before

    recovery.start()
    theirs_conn = masakari.api
    mine_conn = sdk(f"http://127.0.0.1:{recovery.port}/v1")
    segments = [s.uuid for s in theirs_conn.instance_ha.segments()]
    theirs = listings(theirs_conn, segments)
    mine = listings(mine_conn, segments)
    assert sorted(mine) == sorted(theirs)
    hostnames = {uuid: name for name, uuid in hosts.items()}
    compared = {}
    for what, items in theirs.items():
        context = {"hostnames": hostnames,
                   "notification": what.rsplit(" ", 1)[-1]}
        if "segments" in what:
            key, rules = "uuid", SEGMENT
        elif "hosts" in what:
            key, rules = "uuid", HOST
        elif "vmoves" in what:
            key = "instance_uuid" if what.startswith("raw") else "server_id"
            rules = VMOVE
        else:
            key, rules = "notification_uuid", NOTIFICATION
        compared[what] = compare(items, mine[what], key, rules, context,
                                 what)
    assert compared["segments"] == 2 and compared["notifications"] == 6
    assert sum(n for what, n in compared.items()
               if what.startswith("hosts of")) == 5
    assert sum(n for what, n in compared.items()
               if what.startswith("vmoves of")) == 5


def test_the_source_connection_is_read_only(masakari):
    before = masakari.dump()
    engine = ms.open_source(as_oslo_db_writes_it(masakari.url))
    try:
        with pytest.raises(sa.exc.DBAPIError, match="(?i)read.only"):
            with engine.begin() as conn:
                conn.execute(ms.M_VERSION.delete())
    finally:
        engine.dispose()
    assert masakari.dump() == before


def test_the_transcribed_tables_are_masakari_s():
    """recovery.db.masakari_source reads columns Masakari 22's models
    have, as the Python types they are there (read in Masakari's own
    process: its functional tests, in this one, registered its options
    under another config already)."""
    done = subprocess.run([*SIDE, "columns"], capture_output=True,
                          text=True, timeout=60, check=True)
    theirs = json.loads(done.stdout)
    for table in (ms.M_SEGMENTS, ms.M_HOSTS, ms.M_NOTIFICATIONS,
                  ms.M_VMOVES):
        model = theirs[table.name]
        for column in table.columns:
            assert column.name in model, (table.name, column.name)
            kind = column.type
            if isinstance(kind, sa.types.TypeDecorator):
                kind = kind.impl_instance
            assert kind.python_type.__name__ == model[column.name], (
                table.name, column.name)
