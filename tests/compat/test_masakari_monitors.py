"""masakari-monitors 22 against recovery: each monitor builds its own
event and sends it with its own ``SendNotification``, configured with
its own ``[api]`` options, to the catalog's URL with a project id.

- host monitor: a pacemaker remote node goes offline
  (``HandleHost._check_if_status_changed``, fed the nodes that
  ``crm_mon`` would list, as its own ``CibSchemaCompliantTag``);
- process monitor: ``nova-compute`` cannot be restarted
  (``HandleProcess.restart_processes``, the restart command ``false``);
- instance monitor: the libvirt callback (``Callback``) with the values
  its event filter passes for a domain STOPPED_FAILED (the filter itself
  imports libvirt; its table maps the event to these names).

The process and instance monitors run on a compute: they name the host
``socket.gethostname()``, so the fake Nova has a compute of that name.
"""

import datetime
import socket

import pytest
from oslo_utils import timeutils

from tests.compat.deployment import ADMIN


def _monitors(module: str):
    return pytest.importorskip(f"masakarimonitors.{module}",
                               reason="tox -e masakari-compat installs it")


CONF = _monitors("conf").CONF
handle_host = _monitors("hostmonitor.host_handler.handle_host")
handle_process = _monitors("processmonitor.process_handler.handle_process")
callback = _monitors("instancemonitor.libvirt_handler.callback")


@pytest.fixture
def monitors_conf(cloud, tmp_path):
    """masakarimonitors.conf as a monitor host has it. No retries: a
    notification the API refuses is lost at once, as it would be after
    the retries."""
    path = tmp_path / "masakarimonitors.conf"
    path.write_text(
        f"[api]\nregion = RegionOne\napi_interface = public\n"
        f"auth_type = password\nauth_url = {cloud.keystone.url}\n"
        f"username = {ADMIN.name}\npassword = {ADMIN.password}\n"
        f"project_name = {ADMIN.project}\nuser_domain_id = default\n"
        f"project_domain_id = default\ntimeout = 10\n\n"
        f"[host]\ndisable_ipmi_check = true\napi_retry_max = 0\n\n"
        f"[process]\nrestart_retries = 0\nrestart_interval = 0\n"
        f"api_retry_max = 0\n\n[callback]\nretry_max = 0\n")
    CONF(["--config-file", str(path)], project="masakarimonitors")
    yield CONF
    CONF.clear()


@pytest.mark.parametrize("cloud", [True], ids=["project-url"],
                         indirect=True)
def test_every_monitor_notification_is_stored(cloud, nova, monitors_conf):
    here = socket.gethostname()
    nova.add_compute(here)
    server = nova.add_server("vm-1", here, metadata={"HA_Enabled": "True"})
    nova.fail_host("compute-1")
    since = timeutils.utcnow().replace(microsecond=0)

    host_monitor = handle_host.HandleHost()
    for online in ("true", "false"):    # a member, then gone
        host_monitor._check_if_status_changed([
            handle_host.CibSchemaCompliantTag(
                {"name": "compute-1", "online": online, "type": "remote"})])
    handle_process.HandleProcess().restart_processes([{
        "process_name": "/usr/bin/nova-compute", "restart_command": "false",
        "pre_restart_command": "", "post_restart_command": "",
        "run_as_root": False}])
    callback.Callback().libvirt_event_callback(
        "LIFECYCLE", "STOPPED_FAILED", server, "VM", here,
        timeutils.utcnow())

    expected = [
        ("COMPUTE_HOST", "compute-1", {"event": "STOPPED",
                                       "cluster_status": "OFFLINE",
                                       "host_status": "NORMAL"}),
        ("PROCESS", here, {"event": "STOPPED",
                           "process_name": "nova-compute"}),
        ("VM", here, {"event": "LIFECYCLE", "instance_uuid": server,
                      "vir_domain_event": "STOPPED_FAILED"}),
    ]
    # Read back through the monitors' own client.
    client = callback.Callback().notifier.masakari_client
    stored = sorted(client.notifications(), key=lambda n: n.id)
    assert [(n.type, n.hostname, n.payload) for n in stored] == expected
    for notification in stored:
        generated = datetime.datetime.fromisoformat(
            notification.generated_time)
        assert since <= generated <= timeutils.utcnow(), notification
