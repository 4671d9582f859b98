"""Rewinding an SQLite store's schema to an older revision, so that a
test can upgrade it again with what it held."""

import sqlalchemy

# What each migration added, to undo; in the order to undo it.
ADDED = {
    "0003": ("ALTER TABLE notifications DROP COLUMN started_at",
             "DROP TABLE arming"),
    "0004": ("DROP TABLE hosts", "DROP TABLE segments",
             "ALTER TABLE instance_journal DROP COLUMN method"),
    "0005": ("ALTER TABLE notifications DROP COLUMN kind",),
    "0006": ("DROP TABLE engines", "DROP TABLE locks"),
    "0007": ("DROP INDEX ux_notifications_detection",
             "ALTER TABLE notifications DROP COLUMN detection"),
    "0008": ("ALTER TABLE instance_journal DROP COLUMN created_at",
             "ALTER TABLE notifications DROP COLUMN failover_segment_uuid"),
    "0009": ("DROP TABLE events",),
    "0010": ("ALTER TABLE instance_journal DROP COLUMN priority",
             "ALTER TABLE instance_journal DROP COLUMN priority_phase",
             "ALTER TABLE instance_journal DROP COLUMN capacity_warning"),
    "0011": ("ALTER TABLE instance_journal DROP COLUMN evacuate_sent_at",
             "ALTER TABLE instance_journal DROP COLUMN lock_uncertain_at"),
    "0012": ("DROP TABLE probe_views",),
    "0013": ("ALTER TABLE engines DROP COLUMN backend",),
    "0014": ("ALTER TABLE notifications DROP COLUMN failure_domain",),
    "0015": ("ALTER TABLE engines DROP COLUMN schema_revision",
             "DROP TABLE schema_floor"),
    "0016": ("ALTER TABLE step_events DROP COLUMN instances",),
    "0017": ("DROP INDEX ix_instance_journal_project_id",
             "ALTER TABLE instance_journal DROP COLUMN project_id"),
    "0018": ("DROP TABLE fence_lags",),
}


def back_to(url: str, revision: str, *statements: str) -> None:
    """The schema as ``revision`` left it: what every later migration
    added is undone, after ``statements`` (to set up data)."""
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(sqlalchemy.text(statement))
        for later in sorted(ADDED, reverse=True):
            if later > revision:
                for statement in ADDED[later]:
                    conn.execute(sqlalchemy.text(statement))
        conn.execute(sqlalchemy.text(
            f"UPDATE alembic_version SET version_num = '{revision}'"))
    engine.dispose()
