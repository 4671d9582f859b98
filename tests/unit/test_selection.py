import pytest

from recovery.flows.selection import order_for_recovery
from recovery.flows.selection import skip_reason
from tests.unit.fakes import FakeServer
from tests.unit.fakes import settings


def server(vm_state="active", ha=None, **fields):
    metadata = {"HA_Enabled": ha} if ha is not None else {}
    return FakeServer(id="a", name="a", host="h", vm_state=vm_state,
                      metadata=metadata, **fields).snapshot()


@pytest.mark.parametrize("srv,opts,skipped", [
    (server("active"), {}, False),
    (server("stopped"), {}, False),
    (server("error"), {}, False),
    (server("error"), {"ignore_error_instances": True}, True),
    (server("active", task_state="rebooting"), {}, False),
    (server("active", locked=True, locked_reason="x"), {}, False),
    (server("paused"), {}, True),
    (server("active"), {"evacuate_all_instances": False}, True),
    (server("active", ha="true"), {"evacuate_all_instances": False}, False),
    (server("active", ha="False"), {"evacuate_all_instances": False}, True),
])
def test_skip_reason(srv, opts, skipped):
    reason = skip_reason(srv, settings(**opts))
    assert (reason is not None) is skipped


def test_reason_names_the_option():
    reason = skip_reason(server("active"),
                         settings(evacuate_all_instances=False))
    assert "evacuate_all_instances" in reason
    assert "HA_Enabled" in reason


def test_ha_enabled_first():
    plain = server("active")
    ha = FakeServer(id="b", name="b", host="h",
                    metadata={"HA_Enabled": "True"}).snapshot()
    assert order_for_recovery([plain, ha], settings()) == [ha, plain]
