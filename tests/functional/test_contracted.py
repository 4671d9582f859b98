"""An engine whose database a newer release contracts under it (one that
started while 'recovery db contract' ran, or was frozen past its lease):
at its next report it takes no new work, and exits with the error, as it
would have refused to start on that schema."""

import sqlalchemy as sa

from recovery.db.tables import schema_floor
from tests.fakenova import FakeNova
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

# The shortest lease: the engine reports itself every third of it.
LEASE = 5


def test_an_engine_on_a_schema_contracted_past_it_exits(tmp_path):
    with FakeNova() as nova:
        nova.add_compute("compute-1")
        engine = EngineProcess(tmp_path, nova.endpoint, lease_seconds=LEASE)
        try:
            engine.start()
            database = sa.create_engine(engine.database)
            try:
                with database.begin() as conn:
                    conn.execute(schema_floor.update().values(
                        revision="0099"))
            finally:
                database.dispose()
            assert engine.wait_exit(timeout=4 * LEASE) == 2
            assert ("contracted past this release: its last contract "
                    "migration is 0099") in engine.stderr()
            log = wait_until(lambda: (text := engine.log.read_text())
                             and "Taking no new work" in text and text,
                             5, "the engine's error line")
            assert "upgrade recovery on this controller" in log
        finally:
            engine.close()
