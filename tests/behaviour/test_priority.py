"""Restart priority against both Novas: the instances of a failed host
come back one priority phase after another, as Nova's own request log
shows."""

import json

from tests.behaviour.checks import FAILED
from tests.behaviour.checks import actions
from tests.behaviour.checks import evacuations
from tests.behaviour.clouds import Spec
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config

POLL = 0.2
PHASES = [["gold-1", "gold-2"], ["silver-1", "silver-2"], ["bronze"]]
PRIORITY = {"gold": "100", "silver": "50"}


def spec(name):
    priority = PRIORITY.get(name.split("-")[0])
    # bronze has no priority: the default, 0.
    return Spec(name, metadata={"HA_Priority": priority} if priority
                else {})


def test_phases_evacuate_in_priority_order(cloud, tmp_path):
    ids = cloud.boot(FAILED, [spec(n) for n in
                              ("bronze", "silver-1", "gold-1", "silver-2",
                               "gold-2")])
    cloud.fail_host(FAILED)
    # Threads for every instance: only the phases keep them apart.
    config = write_config(tmp_path, cloud, threads=5, poll_interval=POLL)
    proc = run_cli(config, "host-failure", FAILED, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert {r["name"]: (r["priority"], r["priority_phase"], r["outcome"])
            for r in report["instances"]} == {
        "gold-1": (100, 1, "recovered"), "gold-2": (100, 1, "recovered"),
        "silver-1": (50, 2, "recovered"), "silver-2": (50, 2, "recovered"),
        "bronze": (0, 3, "recovered")}
    assert evacuations(cloud) == {uuid: 1 for uuid in ids.values()}
    # Nova's log: every instance of a phase evacuated and unlocked (its
    # recovery ended) before any evacuate of the next phase.
    log = actions(cloud)
    for at, phase in enumerate(PHASES[:-1]):
        ended = max(log.index((ids[n], "unlock")) for n in phase)
        evacuated = max(log.index((ids[n], "evacuate")) for n in phase)
        for later in PHASES[at + 1:]:
            first = min(log.index((ids[n], "evacuate")) for n in later)
            assert evacuated < ended < first, log
    for name, uuid in ids.items():
        assert cloud.server(uuid)["host"] != FAILED, name
