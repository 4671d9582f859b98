"""Rolling upgrades: what each migration declares, where 'recovery db
upgrade' and 'recovery db contract' take a schema, and the rule an engine
starts by (recovery.db.revisions and recovery.db.migrate).

The real chain's contract migrations (0002, 0005, 0006) all come before
the registry that lets engines share a database, so the planning is also
tried on a synthetic chain, and the migrating itself on the real
migrations followed by three synthetic ones (an expand, a contract, an
expand), on every backend.
"""

import argparse
import datetime
import pathlib
import re
import shutil

import pytest
import sqlalchemy as sa
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery.cmd import commands
from recovery.db import connection
from recovery.db import migrate
from recovery.db import revisions
from recovery.db.revisions import CONTRACT
from recovery.db.revisions import EXPAND
from recovery.db.revisions import Migration
from recovery.db.store import open_store
from recovery.db.tables import engines
from recovery.db.tables import schema_floor

MIGRATIONS = pathlib.Path(revisions.__file__).parent / "migrations"

# Two releases after a first one: r1-r2, then r3 (contract) and r4, then
# r5 (contract).
CHAIN = [Migration("r1", EXPAND), Migration("r2", EXPAND),
         Migration("r3", CONTRACT), Migration("r4", EXPAND),
         Migration("r5", CONTRACT)]


def test_every_migration_declares_expand_or_contract():
    scripts = ScriptDirectory(str(MIGRATIONS)).walk_revisions()
    declared = {s.revision: getattr(s.module, "change", None)
                for s in scripts}
    assert len(declared) == int(revisions.HEAD_REVISION)
    assert {r: c for r, c in declared.items()
            if c not in (EXPAND, CONTRACT)} == {}


def test_the_real_chain_in_order():
    chain = revisions.migrations()
    assert [m.revision for m in chain] == [
        f"{n:04}" for n in range(1, int(revisions.HEAD_REVISION) + 1)]
    assert [m.revision for m in chain if m.contracts] == [
        "0002", "0005", "0006"]
    assert revisions.needed(chain) == revisions.HEAD_REVISION


@pytest.mark.parametrize("current,reached,stopped_before", [
    (None, "r5", None),
    ("r1", "r2", "r3"),
    ("r2", "r2", "r3"),
    ("r3", "r4", "r5"),
    ("r4", "r4", "r5"),
    ("r5", "r5", None),
])
def test_upgrade_stops_before_the_first_pending_contract(
        current, reached, stopped_before):
    assert revisions.upgrade_target(CHAIN, current) == reached
    assert revisions.next_contract(CHAIN, reached) == stopped_before


@pytest.mark.parametrize("current", [None, "0001", "0002", "0004", "0005"])
def test_a_database_without_the_registry_is_upgraded_to_the_head(current):
    """No engine runs on a shared database before 0006 (its creation was
    cut short): its contract migrations do not stop 'db upgrade'."""
    assert revisions.upgrade_target(
        revisions.migrations(), current) == revisions.HEAD_REVISION


@pytest.mark.parametrize("current", ["0006", "0010", "0014", "0015",
                                     "0016", "0017", "0018"])
def test_the_real_chain_upgrades_to_the_head_past_the_registry(current):
    assert revisions.upgrade_target(
        revisions.migrations(), current) == revisions.HEAD_REVISION


def test_an_engine_needs_its_head_less_its_trailing_contracts():
    assert revisions.needed(CHAIN) == "r4"
    assert revisions.needed(CHAIN[:4]) == "r4"
    assert revisions.needed(CHAIN[:3]) == "r2"


# -- the engine's start rule -------------------------------------------------
def test_an_engine_runs_on_its_schema_with_or_without_its_contracts():
    for current in ("r4", "r5"):
        assert revisions.start_refusal(CHAIN, current, "r3") is None


def test_an_engine_runs_on_a_schema_newer_by_expand_migrations_only():
    assert revisions.start_refusal(CHAIN, "r6", "r5") is None
    assert revisions.start_refusal(CHAIN, "r9", "r3") is None


def test_an_engine_refuses_a_schema_past_a_contract_newer_than_itself():
    refusal = revisions.start_refusal(CHAIN, "r7", "r6")
    assert refusal == (
        "the database schema is at revision r7, newer than this "
        "recovery's r5 and past contract migration r6, which it cannot "
        "run on: upgrade recovery on this controller")
    # A newer schema without a floor cannot say what this one runs on.
    assert revisions.start_refusal(CHAIN, "r7", None).endswith(
        "newer than this recovery's r5 and with no floor to say what can "
        "run on it: upgrade recovery on this controller")


def test_an_engine_refuses_an_older_schema_upgrade_reaches():
    assert revisions.start_refusal(CHAIN, "r3", "r3") == (
        "the database schema is at revision r3, older than the r4 this "
        "recovery needs: run 'recovery db upgrade' once, from one "
        "controller")


def test_an_engine_refuses_an_older_schema_behind_a_contract():
    """From r2, 'db upgrade' stops before r3: only 'db contract' gets
    there, and it needs the older engines stopped."""
    assert revisions.start_refusal(CHAIN, "r2", "r1") == (
        "the database schema is at revision r2, older than the r4 this "
        "recovery needs, and reaching it takes contract migration r3, "
        "which the engines of older releases cannot run on: stop them, "
        "then run 'recovery db contract' once, from one controller "
        "upgraded to this release")


def test_an_engine_refuses_a_database_without_a_schema():
    assert revisions.start_refusal(CHAIN, None, None) == (
        "the database has no recovery schema yet: run 'recovery db "
        "upgrade' once, from one controller")


def test_check_schema_reads_the_floor_of_a_real_database(db_url):
    """The previous release's schema asks for 'db upgrade'; a newer one
    runs while its floor is a revision this recovery knows."""
    open_store(db_url, upgrade=True).close()
    engine = connection.create_engine(connection.Options.defaults(db_url))
    try:
        revisions.check_schema(engine)
        with engine.begin() as conn:
            conn.execute(sa.text(
                "UPDATE alembic_version SET version_num = '0099'"))
        revisions.check_schema(engine)
        with engine.begin() as conn:
            conn.execute(schema_floor.update().values(revision="0098"))
        with pytest.raises(exception.SchemaMismatch) as raised:
            revisions.check_schema(engine)
        assert str(raised.value) == (
            f"the database schema is at revision 0099, newer than this "
            f"recovery's {revisions.HEAD_REVISION} and past contract "
            f"migration 0098, which it cannot run on: upgrade recovery on "
            f"this controller")
        with engine.begin() as conn:
            conn.execute(sa.text(
                "UPDATE alembic_version SET version_num = '0014'"))
        with pytest.raises(exception.SchemaMismatch) as raised:
            revisions.check_schema(engine)
        assert str(raised.value) == (
            f"the database schema is at revision 0014, older than the "
            f"{revisions.HEAD_REVISION} this recovery needs: run "
            f"'recovery db upgrade' once, from one controller")
    finally:
        engine.dispose()


# -- migrating, with three synthetic migrations past the head ---------------
SYNTHETIC = {
    "0019": (EXPAND, 'op.create_table("t19", sa.Column("id", sa.Integer, '
                     'primary_key=True))'),
    "0020": (CONTRACT, 'op.drop_table("t19")'),
    "0021": (EXPAND, 'op.create_table("t21", sa.Column("id", sa.Integer, '
                     'primary_key=True))'),
}
SCRIPT = '''"""Synthetic."""
import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{down}"
branch_labels = None
depends_on = None
change = "{change}"


def upgrade() -> None:
    {body}
'''


@pytest.fixture
def longer_chain(tmp_path, monkeypatch):
    """This version's migrations and the three synthetic ones, as a
    release with head 0021 would have them."""
    write_chain(tmp_path, monkeypatch, SYNTHETIC)


def write_chain(tmp_path, monkeypatch, synthetic):
    root = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, root,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for revision, (change, body) in synthetic.items():
        (root / "versions" / f"{revision}_synthetic.py").write_text(
            SCRIPT.format(revision=revision, down=f"{int(revision) - 1:04}",
                          change=change, body=body))

    def config():
        config = AlembicConfig()
        config.set_main_option("script_location", str(root))
        return config

    monkeypatch.setattr(revisions, "alembic_config", config)
    monkeypatch.setattr(revisions, "HEAD_REVISION", "0021")


@pytest.fixture
def at_0018(db_url):
    """A database of this version (0018), and an engine on it."""
    open_store(db_url, upgrade=True).close()
    engine = connection.create_engine(connection.Options.defaults(db_url))
    yield engine
    engine.dispose()


def registered(engine, name, schema_revision, silent_for=1.0):
    """An engine in the registry, last seen ``silent_for`` seconds ago."""
    with engine.begin() as conn:
        now = connection.database_now(conn)
        seen = now - datetime.timedelta(seconds=silent_for)
        conn.execute(engines.insert().values(
            name=name, host=name.split(":")[0], pid=1, started_at=seen,
            last_seen=seen, schema_revision=schema_revision))


def floor(engine):
    with engine.connect() as conn:
        return conn.execute(sa.select(schema_floor.c.revision)).scalar()


def test_upgrade_stops_before_a_contract_and_contract_applies_the_rest(
        at_0018, longer_chain):
    done = migrate.upgrade(at_0018, expand_only=True)
    assert done == migrate.Migrated("0018", "0019", "0020")
    assert revisions.current_revision(at_0018) == "0019"
    assert sa.inspect(at_0018).has_table("t19")
    # Run again, it stays there.
    assert migrate.upgrade(at_0018, expand_only=True) == (
        migrate.Migrated("0019", "0019", "0020"))
    assert floor(at_0018) == "0006"
    done = migrate.contract(at_0018, live_within=60)
    assert done == migrate.Migrated("0019", "0021", None)
    assert revisions.current_revision(at_0018) == "0021"
    assert not sa.inspect(at_0018).has_table("t19")
    # The contract migration moved the floor: an engine of 0018 no
    # longer runs here.
    assert floor(at_0018) == "0020"


def test_the_full_upgrade_applies_contracts_and_moves_the_floor(
        at_0018, longer_chain):
    """SQLite's upgrade on first use, and open_store(upgrade=True): every
    migration."""
    assert migrate.upgrade(at_0018) == migrate.Migrated(
        "0018", "0021", None)
    assert floor(at_0018) == "0020"


def test_a_contract_cut_short_leaves_the_floor_past_what_it_did(
        at_0018, tmp_path, monkeypatch):
    """On MySQL and MariaDB each DDL statement commits on its own: a
    contract migration that dies after dropping its table must leave the
    floor past it, so that the older engines refuse the schema. Where DDL
    is transactional, nothing of it stays, the floor included."""
    write_chain(tmp_path, monkeypatch, {
        **SYNTHETIC, "0020": (CONTRACT, 'op.drop_table("t19"); '
                                        'raise RuntimeError("cut short")')})
    migrate.upgrade(at_0018, expand_only=True)
    with pytest.raises(RuntimeError, match="cut short"):
        migrate.contract(at_0018, live_within=60)
    dropped = not sa.inspect(at_0018).has_table("t19")
    assert floor(at_0018) == ("0020" if dropped else "0006")
    if at_0018.dialect.name != "mysql":
        assert not dropped


def test_contract_refuses_while_an_engine_of_an_older_release_is_alive(
        at_0018, longer_chain):
    migrate.upgrade(at_0018, expand_only=True)
    # Before 0018 (NULL), of 0018, of this release, and one of 0018
    # silent past the lease: only the first two count.
    registered(at_0018, "old-host:11", None)
    registered(at_0018, "mid-host:12", "0018", silent_for=5)
    registered(at_0018, "new-host:13", "0021")
    registered(at_0018, "gone-host:14", "0018", silent_for=120)
    with pytest.raises(migrate.OlderEngines) as raised:
        migrate.contract(at_0018, live_within=60)
    seen = r"last seen \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s ago\)"
    assert re.fullmatch(
        rf"2 engine\(s\) of an older release alive, which could not run "
        rf"on the contracted schema: old-host:11 on old-host, {seen}; "
        rf"mid-host:12 on mid-host, {seen}\. Upgrade each to this release "
        rf"\(one at a time\) or stop it, then run 'recovery db contract' "
        rf"again\. An engine that stopped without a clean shutdown counts "
        rf"as alive for 60 s \(\[engine\] lease_seconds\) after it was "
        rf"last seen", str(raised.value))
    # Nothing was applied.
    assert revisions.current_revision(at_0018) == "0019"
    assert floor(at_0018) == "0006"
    with at_0018.begin() as conn:
        conn.execute(engines.delete().where(engines.c.name.in_(
            ["old-host:11", "mid-host:12"])))
    assert migrate.contract(at_0018, live_within=60).after == "0021"


def test_an_engine_finds_out_at_its_next_report_of_a_newer_contract(
        db_url, at_0018):
    """One that started while a newer 'db contract' ran, or was frozen
    past its lease: its next report refuses, and registers nothing."""
    store = open_store(db_url)
    try:
        store.engine_seen("a-host:1", "a-host", 1)
        with at_0018.begin() as conn:
            conn.execute(schema_floor.update().values(revision="0099"))
        with pytest.raises(exception.SchemaMismatch, match=(
                r"contracted past this release: its last contract "
                r"migration is 0099.*upgrade recovery on this controller")):
            store.engine_seen("b-host:2", "b-host", 2)
        assert [e.name for e in store.engines()] == ["a-host:1"]
    finally:
        store.close()


def test_contract_refuses_with_nothing_pending_too(at_0018):
    """It is the upgrade's last step: an engine of the previous release
    still alive means the upgrade is not finished."""
    registered(at_0018, "old-host:11", None)
    with pytest.raises(migrate.OlderEngines):
        migrate.contract(at_0018, live_within=60)
    with at_0018.begin() as conn:
        conn.execute(engines.delete())
    assert migrate.contract(at_0018, live_within=60) == (
        migrate.Migrated("0018", "0018", None))


def test_an_engine_registers_its_schema_revision(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/s.sqlite")
    try:
        store.engine_seen("host-a:1", "host-a", 1, backend="threading")
        store.engine_seen("host-a:1", "host-a", 1, backend="threading")
        with store._engine.connect() as conn:
            rows = conn.execute(sa.select(
                engines.c.name, engines.c.schema_revision)).all()
    finally:
        store.close()
    assert rows == [("host-a:1", revisions.HEAD_REVISION)]


def test_an_older_recovery_refuses_to_migrate_a_newer_schema(at_0018):
    with at_0018.begin() as conn:
        conn.execute(sa.text(
            "UPDATE alembic_version SET version_num = '0099'"))
    for attempt in (lambda: migrate.upgrade(at_0018, expand_only=True),
                    lambda: migrate.contract(at_0018, 60)):
        with pytest.raises(exception.SchemaMismatch) as raised:
            attempt()
        assert str(raised.value).endswith(
            "newer than this recovery's 0018: upgrade recovery on this "
            "controller")


def test_the_commands_say_where_they_stopped_and_what_refused(
        at_0018, longer_chain, db_url, capsys):
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override("connection", db_url, "database")
    upgrade, contract = (argparse.Namespace(action="upgrade"),
                         argparse.Namespace(action="contract"))
    assert commands.db(conf, upgrade) == commands.EXIT_OK
    assert capsys.readouterr().out == (
        "schema at 0019 (was 0018); stopped before contract migration "
        "0020, which engines of the previous release cannot run on: run "
        "'recovery db contract' once every engine runs this release\n")
    registered(at_0018, "old-host:11", None)
    assert commands.db(conf, contract) == commands.EXIT_REFUSED
    assert capsys.readouterr().err.startswith(
        "recovery: error: 1 engine(s) of an older release alive, which "
        "could not run on the contracted schema: old-host:11 on old-host, "
        "last seen ")
    with at_0018.begin() as conn:
        conn.execute(engines.delete())
    assert commands.db(conf, contract) == commands.EXIT_OK
    assert capsys.readouterr().out == (
        "schema at 0021 (was 0019); no engine of an older release is "
        "alive\n")
