"""The schema, in SQLAlchemy Core. Changes go through a migration.

Only portable SQL: SQLite by default, PostgreSQL for several engines.
Times are stored as naive UTC and read back as aware UTC.
"""

import datetime

import sqlalchemy as sa

metadata = sa.MetaData()


class UTCDateTime(sa.types.TypeDecorator):
    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(
                tzinfo=None)
        return value

    def process_result_value(self, value, dialect):
        if value is not None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value


notifications = sa.Table(
    "notifications", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("type", sa.String(16), nullable=False),
    sa.Column("hostname", sa.String(255), nullable=False),
    # Masakari's: the segment host's uuid, and its segment's (None for a
    # host in no segment).
    sa.Column("source_host_uuid", sa.String(36)),
    sa.Column("failover_segment_uuid", sa.String(36)),
    sa.Column("generated_time", UTCDateTime, nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("origin", sa.String(8), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("message", sa.Text),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("next_attempt_at", UTCDateTime),
    sa.Column("owner", sa.String(255)),
    sa.Column("lease_until", UTCDateTime),
    sa.Column("version", sa.Integer, nullable=False, default=0),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    # When the first attempt started (the per-window brake counts these).
    sa.Column("started_at", UTCDateTime),
    # The failure domain, down as a whole, that its first attempt started
    # as part of: the per-window cap counts each domain once (0014).
    sa.Column("failure_domain", sa.String(255)),
    # What recovery does about it (recovery.notification.Kind), decided
    # once at intake. Always written; nullable only for migration 0005.
    sa.Column("kind", sa.String(16)),
    # A failure the detector saw: "host@last heartbeat" (migration 0007).
    sa.Column("detection", sa.String(300)),
    sa.Index("ix_notifications_status", "status"),
    sa.Index("ux_notifications_detection", "detection", unique=True),
    sa.Index("ix_notifications_hostname_status", "hostname", "status"),
)

step_events = sa.Table(
    "step_events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("notification_uuid", sa.String(36),
              sa.ForeignKey("notifications.uuid"), nullable=False),
    sa.Column("step", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("progress", sa.Float, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    # How many instances the step says it starts on, when it says
    # (recover-instances); NULL before 0016.
    sa.Column("instances", sa.Integer),
    sa.Index("ix_step_events_notification", "notification_uuid"),
)

# The operator's decision log (recovery.db.events): who decided what,
# about which host or instance, and why. No notification for what comes
# before one (the detector's suspects).
events = sa.Table(
    "events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("notification_uuid", sa.String(36),
              sa.ForeignKey("notifications.uuid")),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("actor", sa.String(255), nullable=False),
    # A host's name, or an instance's "name (uuid)".
    sa.Column("subject", sa.String(300), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Index("ix_events_created_at", "created_at"),
    sa.Index("ix_events_notification", "notification_uuid", "id"),
)

instance_journal = sa.Table(
    "instance_journal", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("notification_uuid", sa.String(36),
              sa.ForeignKey("notifications.uuid"), nullable=False),
    sa.Column("instance_uuid", sa.String(36), nullable=False),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("source_host", sa.String(255), nullable=False),
    sa.Column("dest_host", sa.String(255)),
    sa.Column("original_state", sa.String(16), nullable=False),
    sa.Column("final_state", sa.String(16)),
    sa.Column("phase", sa.String(16), nullable=False),
    sa.Column("outcome", sa.String(16)),
    sa.Column("reason", sa.Text),
    sa.Column("locked_by_us", sa.Boolean, nullable=False),
    sa.Column("migration_floor", sa.Integer),
    # auto (the scheduler chose dest_host) or reserved_host.
    sa.Column("method", sa.String(16)),
    # Restart priority and its 1-based phase; the destination's capacity
    # warning (migration 0010).
    sa.Column("priority", sa.Integer),
    sa.Column("priority_phase", sa.Integer),
    sa.Column("capacity_warning", sa.Text),
    # When the last evacuate was sent, and when a lock had an unknown
    # outcome (migration 0011).
    sa.Column("evacuate_sent_at", UTCDateTime),
    sa.Column("lock_uncertain_at", UTCDateTime),
    sa.Column("started_at", UTCDateTime),
    sa.Column("finished_at", UTCDateTime),
    # When the entry was first written (0008 dates older ones by their
    # last update).
    sa.Column("created_at", UTCDateTime),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    # The instance's owner, as Nova named it (0017; none before): the
    # API shows the owner its vmoves when the policy lets it.
    sa.Column("project_id", sa.String(64)),
    sa.UniqueConstraint("notification_uuid", "instance_uuid",
                        name="uq_journal_notification_instance"),
    sa.Index("ix_instance_journal_project_id", "project_id"),
)

# One row (id 1) once anyone has disarmed: no row means armed.
arming = sa.Table(
    "arming", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("armed", sa.Boolean, nullable=False),
    sa.Column("changed_by", sa.String(255), nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("changed_at", UTCDateTime, nullable=False),
)

# Failover segments (Masakari's): a group of hosts and how their failures
# are recovered.
segments = sa.Table(
    "segments", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("description", sa.Text),
    sa.Column("recovery_method", sa.String(16), nullable=False),
    sa.Column("service_type", sa.String(255), nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# A host is in exactly one segment: its name is unique across segments.
hosts = sa.Table(
    "hosts", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("segment_uuid", sa.String(36),
              sa.ForeignKey("segments.uuid"), nullable=False),
    sa.Column("type", sa.String(255), nullable=False),
    sa.Column("control_attributes", sa.Text, nullable=False),
    sa.Column("reserved", sa.Boolean, nullable=False),
    sa.Column("on_maintenance", sa.Boolean, nullable=False),
    # The notification whose recovery took this reserved host.
    sa.Column("claimed_by", sa.String(36)),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Index("ix_hosts_segment", "segment_uuid"),
)

# Every engine that shares the database, as it last reported itself (by
# the database's clock).
engines = sa.Table(
    "engines", metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("last_seen", UTCDateTime, nullable=False),
    # Its concurrency backend (eventlet, threading); NULL before 0013.
    sa.Column("backend", sa.String(16)),
    # The schema revision it was written for (its HEAD_REVISION); NULL
    # for an engine of a release before 0015, which never writes it.
    sa.Column("schema_revision", sa.String(32)),
)

# One row (id 1): the last contract migration applied, the oldest engine
# schema that can run on this database (recovery.db.revisions).
schema_floor = sa.Table(
    "schema_floor", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("revision", sa.String(32), nullable=False),
)

# Each engine's view of a host that its liveness probes find silent (the
# detector's fast path): since when, and when it last said so, by the
# database's clock. A host fails fast only when most live engines agree.
probe_views = sa.Table(
    "probe_views", metadata,
    sa.Column("host", sa.String(255), primary_key=True),
    sa.Column("engine", sa.String(255), primary_key=True),
    sa.Column("silent_since", UTCDateTime, nullable=False),
    sa.Column("seen_at", UTCDateTime, nullable=False),
)

# Each fencing device's lag, learned from its past fencings
# (recovery.pacing): the longest and the last time from an accepted
# power-off request to the power read Off, over how many fencings. The
# device is its key (driver and target, never a secret); the host is the
# one last fenced through it, for an operator reading the table. Double
# precision (FLOAT(53)): MySQL's plain FLOAT is single.
fence_lags = sa.Table(
    "fence_lags", metadata,
    sa.Column("device", sa.String(255), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("longest", sa.Float(precision=53), nullable=False),
    sa.Column("last", sa.Float(precision=53), nullable=False),
    sa.Column("fencings", sa.Integer, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# Rows locked (SELECT ... FOR UPDATE) to serialize a check and the write
# it allows across engines: "claims" guards "no live run of this host"
# and the claim. SQLite's BEGIN IMMEDIATE serializes them already.
locks = sa.Table(
    "locks", metadata,
    sa.Column("name", sa.String(64), primary_key=True),
)
