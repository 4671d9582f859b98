"""The Enable step the host return and the process failure share: each
lifts only the disables of recovery it owns, and says why it leaves any
other."""

import dataclasses

import pytest

from recovery.flows import enabling
from recovery.flows import host_return
from recovery.flows import process_failure
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import make_env

HOST = "compute-1"
PROCESS = "Process failure: nova-compute stopped; disabled by recovery"
HOST_FAILURE = "host down"      # tests.unit.fakes.settings


def enable(flow, reason, status="disabled"):
    """Run ``flow``'s Enable on a service disabled with ``reason``."""
    nova = MemoryNova()
    nova.add_service(HOST, state="up", status=status)
    nova.services[HOST] = dataclasses.replace(nova.services[HOST],
                                              disabled_reason=reason)
    env = make_env(nova, process_disable_reason=PROCESS)
    context = {host_return: host_return.ReturnContext,
               process_failure: process_failure.ProcessContext}[flow]
    message = flow.Enable().execute(context(env=env, host=HOST))
    return message, nova.services[HOST]


@pytest.mark.parametrize("flow", [host_return, process_failure])
def test_both_flows_run_the_one_step(flow):
    assert issubclass(flow.Enable, enabling.Enable)
    assert flow.Enable.name == "enable"
    assert flow.Enable.execute is enabling.Enable.execute


@pytest.mark.parametrize("flow, reason, enabled", [
    (host_return, HOST_FAILURE, True),
    (host_return, PROCESS, True),
    (host_return, "maintenance", False),
    (process_failure, PROCESS, True),
    (process_failure, HOST_FAILURE, False),
    (process_failure, "maintenance", False),
])
def test_each_flow_lifts_only_its_own_disables(flow, reason, enabled):
    message, service = enable(flow, reason)
    assert service.is_enabled is enabled
    if enabled:
        assert message == "enabled"
    else:
        assert message == (
            f"left disabled: it was disabled for another reason "
            f"({reason!r}); enable it yourself when that is resolved")


@pytest.mark.parametrize("flow", [host_return, process_failure])
def test_an_enabled_service_is_left_alone(flow):
    message, service = enable(flow, None, status="enabled")
    assert (message, service.is_enabled) == ("already enabled", True)
