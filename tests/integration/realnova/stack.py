"""A real Nova control plane built from Nova's own functional-test base.

Nova's ``_IntegratedTestBase`` assembles the whole stack in one process:
API app, conductor, scheduler, placement, fake glance/neutron/cinder,
sqlite cell databases and ``fake:/`` messaging. Here it runs outside a
test runner: ``setUp()`` is called once and the stack is kept running.

Import this module only after ``nova.monkey_patch.patch()`` has run.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any
from unittest import mock

from nova import context as nova_context
from nova import objects
from nova.servicegroup import api as servicegroup_api
from nova.tests.functional import integrated_helpers

#: Heartbeat every second; a silent host is reported down after this long.
#: The defaults of every start (``NovaStack``, ``RealNova``); Nova's own
#: are 10 s and 60 s.
REPORT_INTERVAL = 1
SERVICE_DOWN_TIME = 3

#: Enough for scale tests; Nova's default is 10 instances per project.
QUOTAS = {"instances": 1000, "cores": 4000, "ram": 4096000}

#: The fake driver's hosts have 2 vCPUs and 8 GB; overcommit so that one
#: host holds 128 m1.tiny instances (1 vCPU, 512 MB, 1 GB).
ALLOCATION_RATIOS = {"cpu_allocation_ratio": 64.0,
                     "ram_allocation_ratio": 16.0,
                     "disk_allocation_ratio": 16.0}

#: Roles given when a token names none: the engine's admin.
DEFAULT_ROLES = ("admin", "member", "reader")


def context_from_token(env: dict[str, Any], **kwargs: Any) -> Any:
    """Build a request context from ``X-Auth-Token: user:project[:roles]``.

    ``roles`` is comma separated (default: admin,member,reader). A request
    without a token gets a context with no user, which Nova answers 401.
    """
    token = env.get("HTTP_X_AUTH_TOKEN") or ""
    parts = token.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        return nova_context.RequestContext(None, None, **kwargs)
    roles = parts[2].split(",") if len(parts) == 3 else list(DEFAULT_ROLES)
    return nova_context.RequestContext(
        parts[0], parts[1], roles=roles, is_admin="admin" in roles,
        **kwargs)


class NovaStack(integrated_helpers._IntegratedTestBase):
    """The Nova stack with computes ``compute-1`` .. ``compute-N``, each
    heartbeating every ``report_interval`` seconds and reported down
    after ``service_down_time`` without one."""

    # Real casts: an evacuate returns 202 before the rebuild runs, as in
    # a deployment (the base class would turn casts into blocking calls).
    CAST_AS_CALL = False

    def __init__(self, hosts: int, report_interval: int = REPORT_INTERVAL,
                 service_down_time: int = SERVICE_DOWN_TIME) -> None:
        super().__init__("runTest")
        self.host_names = [f"compute-{i}" for i in range(1, hosts + 1)]
        self.report_interval = report_interval
        self.service_down_time = service_down_time

    def runTest(self) -> None:  # noqa: N802 - unittest's name
        """Never run: the stack is driven from outside."""

    # -- start-up -------------------------------------------------------
    def setUp(self) -> None:
        servicegroup_api.INITIAL_REPORTING_DELAY = 0
        super().setUp()
        # Nova's WarningsFixture turns warnings into errors; SQLAlchemy's
        # deprecation warnings would then break service stop and start.
        warnings.resetwarnings()
        warnings.simplefilter("ignore")
        self.stub_out("nova.api.auth.NovaKeystoneContext._create_context",
                      context_from_token)

    def _setup_services(self) -> None:
        # The wheel installs api-paste.ini under the venv, not the package.
        self.flags(api_paste_config=os.path.join(
            sys.prefix, "etc", "nova", "api-paste.ini"), group="wsgi")
        self.flags(report_interval=self.report_interval,
                   service_down_time=self.service_down_time)
        self.flags(**ALLOCATION_RATIOS)
        # A delete is a soft delete (vm_state soft-delete) that is never
        # reclaimed: periodic tasks are off.
        self.flags(reclaim_instance_interval=3600)
        for name, value in QUOTAS.items():
            self.flags(**{name: value}, group="quota")
        super()._setup_services()

    def _setup_compute_service(self) -> Any:
        for host in self.host_names:
            self._start_compute(host)
        return self.computes[self.host_names[0]]

    @property
    def app(self) -> Any:
        """The compute API WSGI app (paste urlmap: ``/v2.1``, ``/v2``)."""
        return self.api_fixture.app()

    @property
    def placement_app(self) -> Any:
        """Placement's WSGI app, on the database Nova's computes report
        to (the fixture's own is reachable only inside this process)."""
        from placement import deploy

        return deploy.loadapp(self.placement_fixture.conf_fixture.conf)

    # -- control --------------------------------------------------------
    def _known(self, host: str) -> None:
        if host not in self.computes:
            raise KeyError(f"unknown host {host!r}; hosts: "
                           f"{', '.join(sorted(self.computes))}")

    def fail_host(self, host: str) -> None:
        """Stop the host's nova-compute: no more heartbeats or RPC."""
        self._known(host)
        self.computes[host].stop()

    def restore_host(self, host: str) -> None:
        """Start a new nova-compute for the host, as after a reboot.

        The new service reuses the old fake driver, so it still sees the
        guests that were evacuated away and cleans them up at start, as
        a real compute does.
        """
        self._known(host)
        old = self.computes[host]
        cell = self.host_mappings[host].cell_mapping.name
        with mock.patch("nova.virt.driver.load_compute_driver",
                        return_value=old.manager.driver):
            self.computes[host] = self.start_service(
                "compute", host=host, cell_name=cell)

    def servers(self) -> list[dict[str, Any]]:
        """Every instance as Nova's database holds it, read behind the
        API's back: an independent monitor that costs Nova no request."""
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(
                ctxt, self.cell_mappings["cell1"]) as cctxt:
            return [{"id": i.uuid, "host": i.host, "vm_state": i.vm_state,
                     "task_state": i.task_state}
                    for i in objects.InstanceList.get_all(cctxt)]

    def set_task_state(self, server_id: str, task_state: str | None) -> None:
        """Write a task_state behind the API's back (a stuck operation)."""
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(
                ctxt, self.cell_mappings["cell1"]) as cctxt:
            instance = objects.Instance.get_by_uuid(cctxt, server_id)
            instance.task_state = task_state
            instance.save()
