"""What the behaviour suite asserts, read from the Nova under test."""

import collections
import re

from tests.behaviour.clouds import OWNER_LOCK_REASON
from tests.behaviour.clouds import Spec
from tests.functional.cli_process import LOCK_REASON

FAILED = "compute-1"
MUTATING = {"POST", "PUT", "DELETE"}
_ACTION = re.compile(r"/servers/([0-9a-f-]{36})/action$")

#: The instance mix on the failed host, and the status each must end in.
#: "not-ha" is not HA-enabled: with ``evacuate_all_instances = false`` it
#: is skipped and left alone.
MIX = [
    Spec("active"),
    Spec("stopped", state="stopped"),
    Spec("error", state="error"),
    Spec("owner-locked", owner_locked=True),
    Spec("not-ha", ha=False),
    Spec("stuck", task_state="rebooting"),
]
EXPECTED_STATUS = {"active": "ACTIVE", "stopped": "SHUTOFF",
                   "error": "ERROR", "owner-locked": "ACTIVE",
                   "stuck": "ACTIVE"}
ONLY_HA = "evacuate_all_instances = false\n"


def actions(cloud):
    """(server id, action) of every server action Nova accepted."""
    return [(m.group(1), call["action"]) for call in cloud.calls()
            if (m := _ACTION.search(call["path"]))
            and call["status"] is not None and call["status"] < 300]


def evacuations(cloud):
    return collections.Counter(uuid for uuid, action in actions(cloud)
                               if action == "evacuate")


def peak_locks(cloud):
    """The most instances held locked at once."""
    held, peak = set(), 0
    for uuid, action in actions(cloud):
        if action == "lock":
            held.add(uuid)
        elif action == "unlock":
            held.discard(uuid)
        peak = max(peak, len(held))
    return peak


def mutations(cloud, uuid=""):
    return [c for c in cloud.calls()
            if c["method"] in MUTATING and uuid in c["path"]]


def assert_mix_recovered(cloud, ids):
    """Every HA instance moved once, in its own state; nothing else."""
    assert evacuations(cloud) == {ids[name]: 1 for name in EXPECTED_STATUS}
    for name, status in EXPECTED_STATUS.items():
        server = cloud.server(ids[name])
        assert server["status"] == status, server
        assert server["host"] not in (FAILED, None), server
        assert server["task_state"] is None, server
        assert server["locked_reason"] != LOCK_REASON, server
    owner = cloud.server(ids["owner-locked"])
    assert owner["locked"] and owner["locked_reason"] == OWNER_LOCK_REASON
    left = cloud.server(ids["not-ha"])
    assert left["host"] == FAILED and not left["locked"], left
    assert mutations(cloud, ids["not-ha"]) == []
    service = cloud.service(FAILED)
    assert service["forced_down"] and service["status"] == "disabled"
