"""``/healthcheck``: oslo.middleware's healthcheck, as Kolla's ``curl
.../healthcheck`` and load balancers expect, with the database as one of
its backends (``recovery_database``).

It is public, like the version documents: a health probe carries no
token. It shows what oslo.middleware's shows to any caller: a status and
one short reason per backend. The driver's words (server, port, what it
said; never a password) are a backend's details, which oslo.middleware
shows only with ``[healthcheck] detailed``, the operator's choice.
"""

from typing import Any

import sqlalchemy as sa
import stevedore
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_middleware import healthcheck
from oslo_middleware.healthcheck import opts
from oslo_middleware.healthcheck import pluginbase

from recovery import exception
from recovery.db import connection

PATH = "/healthcheck"
GROUP = "healthcheck"
# The backend's name: its entry point in oslo.middleware.healthcheck.
BACKEND = "recovery_database"
# The longest a check waits for the database, in seconds (connect, then
# the query): a probe answers well within the timeouts of Kolla's and of
# load balancers' checks, and a database slower than this is not healthy.
TIMEOUT = 3


class DatabaseHealthcheck(pluginbase.HealthcheckBaseExtension):
    """The database answers a query within ``TIMEOUT`` seconds.

    Its own connections, apart from the store's: it answers the same
    whether or not the store is open yet (an engine still waiting for its
    database), and a probe never waits behind recovery's own queries for
    a connection from the store's pool."""

    def __init__(self, oslo_conf: cfg.ConfigOpts, conf: dict[str, Any]):
        super().__init__(oslo_conf, conf)
        group = oslo_conf.database
        self._options = connection.Options.from_conf(
            group, statement_timeout=min(TIMEOUT, group.statement_timeout),
            busy_timeout=min(TIMEOUT, group.busy_timeout),
            max_pool_size=1, max_overflow=1, pool_timeout=TIMEOUT)
        self._engine: sa.engine.Engine | None = None

    def healthcheck(self, server_port: int) -> pluginbase.HealthcheckResult:
        # Made at the first check, not when oslo.middleware loads the
        # backend: a backend that fails to load is only logged there, and
        # the check would then answer 200 without asking the database.
        if self._engine is None:
            try:
                self._engine = connection.create_engine(self._options)
            except exception.ConfigError as exc:
                return pluginbase.HealthcheckResult(
                    available=False, reason="database: cannot be opened",
                    details=str(exc))
        try:
            with self._engine.connect() as conn:
                # On SQLite, without the write lock: a probe neither waits
                # behind recovery's writes nor holds them up.
                conn.execution_options(**{connection.READ_ONLY: True})
                conn.execute(sa.text("SELECT 1"))
        except (sa.exc.SQLAlchemyError, db_exc.DBError) as exc:
            return pluginbase.HealthcheckResult(
                available=False, reason="database: not answering",
                details=connection.driver_message(exc))
        return pluginbase.HealthcheckResult(available=True,
                                            reason="database: OK")


def _check_installed() -> None:
    """Refuse to start without the database's backend: oslo.middleware
    would only log that it cannot load it, then answer 200 without
    asking the database."""
    def missing(names: Any) -> None:
        raise exception.ConfigError(
            f"the healthcheck backend {BACKEND} is not installed: install "
            f"recovery again (its entry points are missing)")

    stevedore.NamedExtensionManager(
        healthcheck.Healthcheck.NAMESPACE, [BACKEND],
        on_missing_entrypoints_callback=missing)


def route(app: Any, conf: cfg.ConfigOpts) -> Any:
    """``app``, with ``PATH`` answered by oslo.middleware's healthcheck
    (``[healthcheck]`` options), whose backends always include the
    database's. A request that its ``allowed_source_ranges`` leaves out
    goes on to ``app``, which has no such resource (404)."""
    conf.register_opts(opts.HEALTHCHECK_OPTS, group=GROUP)
    conf.set_default("backends", [BACKEND], group=GROUP)
    backends = conf[GROUP].backends
    if BACKEND not in backends:
        # An operator who adds disable_by_file keeps the database's.
        conf.set_override("backends", [*backends, BACKEND], group=GROUP)
    _check_installed()
    check = healthcheck.Healthcheck(app, conf)

    def routed(environ: dict, start_response: Any) -> Any:
        target = check if environ.get("PATH_INFO") == PATH else app
        return target(environ, start_response)
    return routed
