"""Masakari 22's engine driver running one host-failure flow: the child
process of benchmarks/masakari.py (read its docstring).

    python -m benchmarks.masakari_engine CONFIG_FILE HOST

Sets up what the driver needs (Masakari's config, its database at its
own schema, holding the flow's progress and its vmoves), prints
``ready``, waits for a line on stdin, then calls
``TaskFlowDriver.execute_host_failure(HOST, "auto")`` as Masakari's
engine manager does on a host's STOPPED notification, and prints one
line of JSON: when the flow started and ended, how it ended, and what
Masakari recorded for each instance.
"""

# masakari-engine runs monkey patched (masakari.cmd does it on import):
# the flow's threads are green threads, which only overlap their Nova
# requests when the sockets are green. It must precede every import.
import masakari.cmd  # noqa: F401  # isort: skip

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import masakari.conf  # noqa: E402
from masakari import config  # noqa: E402
from masakari import context  # noqa: E402
from masakari import exception  # noqa: E402
from masakari import objects  # noqa: E402
from masakari.db import migration  # noqa: E402
from masakari.engine import manager  # noqa: E402
from masakari.engine.drivers.taskflow import driver  # noqa: E402
from masakari.objects import fields  # noqa: E402
from oslo_log import log as logging  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402

CONF = masakari.conf.CONF


def main(argv: list[str]) -> int:
    config_file, host = argv
    # No RPC: the notification is handed to the driver directly.
    config.parse_args(["masakari-engine", "--config-file", config_file],
                      init_rpc=False)
    logging.setup(CONF, "masakari")
    objects.register_all()
    migration.db_sync()
    engine = driver.TaskFlowDriver()
    ctxt = context.get_admin_context()
    notification_uuid = uuidutils.generate_uuid()
    print("ready", flush=True)
    sys.stdin.readline()

    started = time.time()
    try:
        # As EngineManager._handle_notification_type_host calls it for a
        # segment whose recovery_method is auto.
        engine.execute_host_failure(
            ctxt, host, fields.FailoverSegmentRecoveryMethod.AUTO,
            notification_uuid,
            update_host_method=manager.update_host_method,
            reserved_host_list=None)
        outcome = "finished"
    except (exception.SkipHostRecoveryException,
            exception.HostRecoveryFailureException,
            exception.MasakariException) as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    ended = time.time()

    vmoves = objects.VMoveList.get_all_vmoves(ctxt, notification_uuid)
    print(json.dumps({
        "started": started, "ended": ended, "outcome": outcome,
        "vmoves": {v.instance_uuid: v.status for v in vmoves}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
