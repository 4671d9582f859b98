import pytest

from recovery.flows.selection import CONFIRM_RESIZE
from recovery.flows.selection import RESET
from recovery.flows.selection import VM_STATE_DECISIONS
from recovery.flows.selection import decision_for
from recovery.flows.selection import final_state_for
from recovery.flows.selection import order_for_recovery
from recovery.flows.selection import plan_steps
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
    (server("paused"), {}, False),
    (server("suspended"), {}, False),
    (server("rescued"), {}, False),
    (server("resized"), {}, False),
    (server("shelved"), {}, True),
    (server("shelved_offloaded"), {}, True),
    (server("soft-delete"), {}, True),
    (server("building"), {}, True),
    (server("weird"), {}, True),
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


# Every vm_state of nova.compute.vm_states has a decision.
NOVA_VM_STATES = ("active", "building", "paused", "suspended", "stopped",
                  "rescued", "resized", "soft-delete", "deleted", "error",
                  "shelved", "shelved_offloaded")


def test_every_nova_vm_state_has_a_decision():
    assert set(VM_STATE_DECISIONS) == set(NOVA_VM_STATES)


@pytest.mark.parametrize("vm_state, prepare, final", [
    ("active", None, "active"), ("stopped", None, "stopped"),
    ("error", None, "error"), ("paused", RESET, "paused"),
    ("suspended", RESET, "suspended"), ("rescued", RESET, "active"),
    # Confirmed: active or stopped, as the guest was.
    ("resized", CONFIRM_RESIZE, None)])
def test_evacuated_states(vm_state, prepare, final):
    decision = decision_for(vm_state)
    assert (decision.evacuate, decision.prepare) == (True, prepare)
    assert final_state_for(vm_state) == final


@pytest.mark.parametrize("vm_state, words", [
    ("shelved", "shelved"),
    ("shelved_offloaded", "not on the failed host"),
    ("soft-delete", "does not bring it back"), ("building", "building"),
    ("deleted", "deleted"), ("weird", "not known")])
def test_skipped_states_say_why_and_what_to_do(vm_state, words):
    reason = skip_reason(server(vm_state), settings())
    assert words in reason
    assert "; to recover it: " in reason
    assert reason.split("; to recover it: ")[1]


@pytest.mark.parametrize("vm_state, before, after", [
    ("active", [], []), ("stopped", [], []), ("error", [], []),
    ("paused", ["reset-state to active"], ["then pause"]),
    ("suspended", ["reset-state to active"], ["then suspend"]),
    ("rescued", ["reset-state to active"], []),
    ("resized", ["confirm the resize"], [])])
def test_plan_steps(vm_state, before, after):
    assert plan_steps(vm_state) == (before, after)
