"""``recovery.wsgi.api:application``: the notification API alone, for a
WSGI server (uWSGI, mod_wsgi, gunicorn), as masakari-api runs, while the
engines run without an API of their own (or with one on loopback).

It is the app ``recovery-engine`` embeds (recovery.api.app), over the
same ``[database]``, with ``/healthcheck`` and the same auth. A
notification is stored before its 202; the engines, which poll the
shared database, claim it from there.

The config file: ``$RECOVERY_CONFIG_FILE``, else
/etc/recovery/recovery.conf, the file the engine's unit names. A WSGI
server passes no command line, so the file is named here rather than
left to oslo.config's search (which would depend on the server's user
and home). Masakari's entry point reads a directory
(``$OS_MASAKARI_CONFIG_DIR``) because it reads two files there, its
paste pipeline and masakari.conf; recovery has no paste pipeline, and
one file is what a Kolla container mounts.

It does not monkey-patch: the WSGI server owns the process and its
threads (patching under uWSGI's or Apache's threads is unsafe), and the
API needs no green threads. It runs on the threading backend whatever
``[DEFAULT] concurrency_backend`` says.

The store is opened at the first request, and again at each request
until it opens: a database that does not answer yet is answered with
503 (``/healthcheck`` too), never a failed import that the WSGI server
would keep retrying.
"""

import os
from collections.abc import Mapping
from typing import Any

from oslo_config import cfg
from oslo_log import log

from recovery import concurrency
from recovery import conf as recovery_conf
from recovery import exception
from recovery.api import app
from recovery.api import auth
from recovery.api import health
from recovery.api import starting
from recovery.confirming import Liveness
from recovery.db.store import open_conf_store
from recovery.nova import load_nova

CONFIG_VARIABLE = "RECOVERY_CONFIG_FILE"
DEFAULT_CONFIG_FILE = "/etc/recovery/recovery.conf"


def load_conf(environ: Mapping[str, str]) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    log.register_options(conf)
    path = environ.get(CONFIG_VARIABLE, "").strip() or DEFAULT_CONFIG_FILE
    # A file that is not there is an error: oslo.config skips a missing
    # default file without a word.
    if not os.path.isfile(path):
        raise exception.ConfigError(
            f"the config file {path} does not exist (set {CONFIG_VARIABLE}"
            f" to name another)")
    conf(args=[], project="recovery", prog="recovery-api",
         default_config_files=[path], default_config_dirs=[])
    log.setup(conf, "recovery")
    return conf


def init_application(environ: Mapping[str, str] = os.environ) -> Any:
    """The API app. Raises ConfigError, or oslo.config's error, for a
    config it cannot serve: the WSGI server then reports that it cannot
    load the app."""
    conf = load_conf(environ)
    if conf.api.auth_strategy == "noauth":
        # The WSGI server chooses the address: nothing here knows it is
        # loopback.
        raise exception.ConfigError(
            "[api] auth_strategy = noauth is refused under a WSGI server, "
            "whose listening address this app cannot check: use keystone "
            "or token")
    clock = concurrency.Clock()
    checker = load_nova(conf, clock, timeout=conf.api.nova_check_timeout,
                        retries=0, rate=0)

    def opened() -> Any:
        return app.from_conf(conf, open_conf_store(conf),
                             checker.match_compute_host, clock,
                             liveness=Liveness.from_conf(conf, checker))

    api = starting.Deferred(conf.database.retry_interval, opener=opened)
    return auth.protect(health.route(api, conf), conf)


application = init_application()
