"""masakari-monitors 22 against recovery: each monitor builds its own
event and sends it with its own ``SendNotification``, configured with
its own ``[api]`` options, to the catalog's URL with a project id.

- host monitor: a pacemaker remote node goes offline
  (``HandleHost._check_if_status_changed``, fed the nodes that
  ``crm_mon`` would list, as its own ``CibSchemaCompliantTag``);
- process monitor: ``nova-compute`` cannot be restarted
  (``HandleProcess.restart_processes``, the restart command ``false``);
- instance monitor: the libvirt callback (``Callback``) with the values
  its event filter passes for a domain STOPPED_FAILED.

Every VM event pair Masakari acts on (its engine's instance events) is then
raised by the monitor that sends it, from libvirt's event down, and the
engine restarts the instance:

- instance monitor: its ``EventFilter`` with libvirt's event as its
  libvirt callbacks pass it (LIFECYCLE/STOPPED_FAILED,
  IO_ERROR/IO_ERROR_REPORT), mapped by its own table;
- introspective instance monitor: its ``QemuGuestAgent`` pings a guest
  whose QEMU guest agent does not answer until its failure threshold is
  crossed (QEMU_GUEST_AGENT_ERROR/STOPPED_FAILED).

Both import libvirt for its constants (and the introspective one
libvirtmod_qemu for the ping), which a compute has and this machine does
not: a stand-in gives the constants and answers the ping as a dead guest
agent does (None).

The process and instance monitors run on a compute: they name the host
``socket.gethostname()``, so the fake Nova has a compute of that name.
"""

import datetime
import itertools
import socket
import sys
import types

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


def _stand_in(name: str, **functions) -> types.ModuleType:
    """A module that has each ``VIR_*`` constant asked for, each a
    distinct number (the monitors' tables only tell them apart), and
    ``functions``."""
    module = types.ModuleType(name)
    numbers: dict[str, int] = {}
    counter = itertools.count(1)

    def constant(attribute: str) -> int:
        if not attribute.startswith("VIR_"):
            raise AttributeError(attribute)
        return numbers.setdefault(attribute, next(counter))

    module.__getattr__ = constant
    vars(module).update(functions)
    return module


MODULES = ("instancemonitor.libvirt_handler.eventfilter_table",
           "instancemonitor.libvirt_handler.eventfilter",
           "introspectiveinstancemonitor.qemu_utils")


@pytest.fixture
def libvirt(monkeypatch):
    """libvirt's stand-in, and the monitors' modules that import it,
    imported afresh on it (and forgotten after the test)."""
    monkeypatch.setitem(sys.modules, "libvirt", _stand_in("libvirt"))
    # The guest agent of a guest that hangs never answers the ping.
    monkeypatch.setitem(sys.modules, "libvirtmod_qemu", _stand_in(
        "libvirtmod_qemu", virDomainQemuAgentCommand=lambda *args: None))
    names = [f"masakarimonitors.{name}" for name in MODULES]
    saved = {name: sys.modules.pop(name, None) for name in names}
    try:
        yield types.SimpleNamespace(module=sys.modules["libvirt"], **{
            name.rsplit(".", 1)[1]: _monitors(name) for name in MODULES})
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


class _Domain:
    """What the introspective monitor reads of a libvirt domain."""

    def __init__(self, uuid: str):
        self.uuid, self._o = uuid, object()

    def UUIDString(self) -> str:
        return self.uuid


def _lifecycle_stopped_failed(libvirt, server: str) -> None:
    # As InstancemonitorManager._my_domain_event_callback passes it.
    virt = libvirt.module
    libvirt.eventfilter.EventFilter().vir_event_filter(
        virt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, virt.VIR_DOMAIN_EVENT_STOPPED,
        virt.VIR_DOMAIN_EVENT_STOPPED_FAILED, server)


def _io_error_report(libvirt, server: str) -> None:
    # As InstancemonitorManager._my_domain_event_io_error_callback does.
    virt = libvirt.module
    libvirt.eventfilter.EventFilter().vir_event_filter(
        virt.VIR_DOMAIN_EVENT_ID_IO_ERROR,
        virt.VIR_DOMAIN_EVENT_IO_ERROR_REPORT, -1, server)


def _guest_agent_error(libvirt, server: str) -> None:
    """QemuGuestAgent.checkGuests' ping, every audit cycle, of a guest
    whose agent answered once (it has one) and then never again."""
    agent = libvirt.qemu_utils.QemuGuestAgent()
    domain = _Domain(server)
    agent.getVmFsm(server).processEvent("guest_pingable")
    threshold = CONF.introspectiveinstancemonitor.\
        guest_monitoring_failure_threshold
    for _ in range(threshold + 2):
        agent._qemuAgentGuestPing(domain, timeout=1)
    assert agent._getJournalObject(server).getSentNotification()


@pytest.mark.parametrize("raise_event,event,vir_domain_event", [
    (_lifecycle_stopped_failed, "LIFECYCLE", "STOPPED_FAILED"),
    (_io_error_report, "IO_ERROR", "IO_ERROR_REPORT"),
    (_guest_agent_error, "QEMU_GUEST_AGENT_ERROR", "STOPPED_FAILED"),
], ids=["instance-lifecycle", "instance-io-error", "introspective"])
@pytest.mark.parametrize("cloud", [True], ids=["project-url"],
                         indirect=True)
def test_every_instance_event_masakari_acts_on_restarts_it(
        cloud, nova, monitors_conf, libvirt, raise_event, event,
        vir_domain_event):
    here = socket.gethostname()
    nova.add_compute(here)
    server = nova.add_server("vm-1", here, metadata={"HA_Enabled": "True"})

    raise_event(libvirt, server)

    done = cloud.engine.wait_only("finished")
    assert (done.type, done.hostname, done.payload) == ("VM", here, {
        "event": event, "instance_uuid": server,
        "vir_domain_event": vir_domain_event})
    # Nova still showed it active: stopped, then started.
    actions = [r["action"] for r in nova.requests
               if r["path"].endswith(f"/servers/{server}/action")
               and r["status"] is not None and r["status"] < 300]
    assert actions == ["lock", "os-stop", "os-start", "unlock"]
    assert nova.server(server)["status"] == "ACTIVE"
