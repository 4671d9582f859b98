"""The notification domain: what kind of notification the intake
records, decided once from Masakari's type and payload."""

import pytest

from recovery.notification import HOST_EVENT
from recovery.notification import Kind
from recovery.notification import classify

VM_PAYLOAD = {"instance_uuid": "6f1d7a3e-9a9c-4a55-8f0e-0a1c2b3d4e5f",
              "vir_domain_event": "STOPPED_FAILED", "event": "LIFECYCLE"}


@pytest.mark.parametrize("type,payload,kind", [
    ("COMPUTE_HOST", {"event": "STOPPED", "host_status": "NORMAL"},
     Kind.HOST_FAILURE),
    # Masakari's default event: the host failed.
    ("COMPUTE_HOST", {}, Kind.HOST_FAILURE),
    ("COMPUTE_HOST", {"event": "STARTED"}, Kind.HOST_RETURN),
    ("VM", VM_PAYLOAD, Kind.INSTANCE),
    # An instance event no flow acts on is still an instance notification
    # (the intake records it as ignored).
    ("VM", {**VM_PAYLOAD, "vir_domain_event": "STOPPED_SHUTDOWN"},
     Kind.INSTANCE),
    ("PROCESS", {"process_name": "nova-compute", "event": "STOPPED"},
     Kind.PROCESS),
    ("PROCESS", {"process_name": "nova-compute", "event": "STARTED"},
     Kind.PROCESS),
    ("PROCESS", {"process_name": "libvirtd", "event": "STOPPED"},
     Kind.PROCESS),
])
def test_each_kind(type, payload, kind):
    assert classify(type, payload) is kind


def test_every_kind_but_a_drain_is_reachable():
    """A drain is recovery's own run: no monitor's notification asks for
    one, so the intake takes none."""
    seen = {classify("COMPUTE_HOST", {"event": event})
            for event in ("STOPPED", "STARTED")}
    seen |= {classify(type, {}) for type in ("VM", "PROCESS")}
    assert seen == set(Kind) - {Kind.HOST_DRAIN}
    with pytest.raises(ValueError):
        classify("COMPUTE_HOST", {"event": HOST_EVENT[Kind.HOST_DRAIN]})


@pytest.mark.parametrize("type,payload", [
    ("COMPUTE_HOST", {"event": "PAUSED"}),
    ("COMPUTE_HOST", {"event": "stopped"}),
    ("HOST", {"event": "STOPPED"}),
    ("vm", VM_PAYLOAD),
    ("", {}),
])
def test_what_no_flow_acts_on_is_not_classified(type, payload):
    with pytest.raises(ValueError, match="is not one recovery knows"):
        classify(type, payload)
