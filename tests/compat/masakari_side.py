"""Masakari 22 itself over a database a test gives, in a process of its
own: masakari's configuration is oslo.config's global CONF and its DB API
is configured once per process, and masakari.cmd monkey-patches with
eventlet on import (nothing here imports it).

``serve CONF``: Masakari's API (the paste app ``masakari_api`` of its
api-paste.ini, ``auth_strategy = noauth2``) under cheroot on loopback; it
prints ``PORT <n>`` once it listens.

``columns``: each table of Masakari's models, its columns and their
Python types, as JSON on stdout.

``fill CONF SPEC``: through Masakari's objects, the hosts of the JSON
SPEC, and what Masakari's engine writes as its recoveries go on: each
notification gets its vmoves, then its status and message; ``"delete":
true`` soft-deletes it as Masakari's DB API does.
"""

import json
import sys
from pathlib import Path

# Masakari's own, as its package installs it.
PASTE = Path(sys.prefix) / "etc" / "masakari" / "api-paste.ini"


def write_config(path: Path, database: str, workdir: Path) -> Path:
    path.write_text(
        f"[DEFAULT]\nauth_strategy = noauth2\ntransport_url = fake:/\n"
        f"notification_delay_max = 0\n\n"
        f"[database]\nconnection = {database}\n\n"
        # masakari-manage db sync loads the taskflow driver, which wants
        # its own database.
        f"[taskflow]\nconnection = sqlite:///{workdir}/taskflow.sqlite\n\n"
        f"[oslo_concurrency]\nlock_path = {workdir}\n")
    return path


def _configure(conf_file: str) -> None:
    from masakari import config
    from masakari import objects

    config.parse_args(["masakari"], default_config_files=[conf_file])
    objects.register_all()


def serve(conf_file: str) -> None:
    from cheroot import wsgi
    from paste import deploy

    _configure(conf_file)
    app = deploy.loadapp(f"config:{PASTE}", name="masakari_api")
    server = wsgi.Server(("127.0.0.1", 0), app, numthreads=4)
    server.prepare()
    print(f"PORT {server.bind_addr[1]}", flush=True)
    server.serve()


def fill(conf_file: str, spec: str) -> None:
    """SPEC: {"hosts": [...], "notifications": [...]}, each as Masakari's
    objects take it."""
    import datetime

    from masakari import context
    from masakari import objects

    _configure(conf_file)
    admin = context.get_admin_context()
    wanted = json.loads(spec)
    # Through the objects, not the API: the API asks Nova (through
    # Keystone) whether the host is a compute host.
    for host in wanted.get("hosts", []):
        segment = objects.FailoverSegment.get_by_uuid(
            admin, host.pop("segment"))
        objects.Host(context=admin, failover_segment=segment,
                     **host).create()
    for item in wanted.get("notifications", []):
        notification = objects.Notification.get_by_uuid(admin, item["uuid"])
        for vmove in item.get("vmoves", []):
            times = {key: datetime.datetime.fromisoformat(vmove[key])
                     for key in ("start_time", "end_time") if vmove.get(key)}
            objects.VMove(context=admin, notification_uuid=item["uuid"],
                          **{**vmove, **times}).create()
        if "status" in item:
            notification.status = item["status"]
            notification.message = item.get("message")
            notification.save()
        if item.get("delete"):
            notification.destroy()


def columns() -> None:
    from masakari.db.sqlalchemy import models

    def python(kind):
        # Through oslo.db's SoftDeleteInteger (a TypeDecorator).
        return getattr(kind, "impl_instance", kind).python_type.__name__

    json.dump({name: {column.name: python(column.type)
                      for column in table.columns}
               for name, table in models.BASE.metadata.tables.items()},
              sys.stdout)


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    {"serve": serve, "fill": fill, "columns": columns}[command](*rest)
