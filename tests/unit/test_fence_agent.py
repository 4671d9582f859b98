"""The fence_agent driver's reading of an agent's answers, with a
scripted agent: a small executable that speaks the agents' convention
(``key=value`` lines on standard input, the exit status as the answer)
and answers from a script of exit statuses. The real agents are in
tests/functional/test_fence_agents.py."""

import json
import stat
import sys

import pytest

from recovery import exception
from recovery.fencing import BmcRefused
from recovery.fencing import BmcSettings
from recovery.fencing import DeviceKind
from recovery.fencing import Secret
from recovery.fencing import Timing
from recovery.fencing import Unreachable
from recovery.fencing.agent import AgentFencer
from recovery.fencing.agent import metadata
from tests.unit.fakes import FakeClock

PASSWORD = "agent-Pa55"

AGENT = '''#!{python}
import json, sys
SCRIPT = {script!r}
given = dict(line.split("=", 1) for line in sys.stdin.read().splitlines())
if given["action"] == "metadata":
    print('<?xml version="1.0" ?><resource-agent name="fence_scripted">'
          '<parameters><parameter name="ip"/><parameter name="password"/>'
          '</parameters><actions><action name="off"/>'
          '<action name="status"/><action name="monitor"/></actions>'
          '</resource-agent>')
    sys.exit(0)
with open(SCRIPT) as handle:
    state = json.load(handle)
state["calls"].append(given)
answers = state["answers"][given["action"]]
code, text = answers.pop(0) if len(answers) > 1 else answers[0]
with open(SCRIPT, "w") as handle:
    json.dump(state, handle)
print(text, file=sys.stderr)
sys.exit(code)
'''


@pytest.fixture
def scripted(tmp_path):
    """Make an agent that answers each action from a list of (exit
    status, text), the last one repeated; returns it and its calls."""
    script = tmp_path / "script.json"
    path = tmp_path / "fence_scripted"

    def make(**answers):
        script.write_text(json.dumps({"answers": answers, "calls": []}))
        path.write_text(AGENT.format(python=sys.executable,
                                     script=str(script)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        metadata.cache_clear()
        fencer = AgentFencer(
            BmcSettings(host="compute-1", driver="fence_scripted",
                        address="bmc", username="",
                        password=Secret(PASSWORD)),
            Timing(timeout=30.0, poll_interval=1.0, attempts=3),
            path=str(path), parameters={"ip": "bmc"})
        return fencer, lambda: json.loads(script.read_text())["calls"]

    return make


def test_status_2_is_off_and_the_password_goes_on_stdin(scripted):
    fencer, calls = scripted(off=[[0, "Success"]],
                             status=[[0, "Status: ON"], [2, "Status: OFF"]])
    assert "verified Off" in fencer.power_off(FakeClock())
    assert [c["action"] for c in calls()] == ["off", "status", "status"]
    assert all(c["password"] == PASSWORD for c in calls())


def test_the_same_failure_three_times_from_the_start_is_a_refusal(
        scripted):
    fencer, calls = scripted(
        off=[[1, "ERROR: Unable to connect/login to fencing device"]],
        status=[[1, "ERROR: Unable to connect/login to fencing device"]])
    with pytest.raises(BmcRefused, match="taken as a refusal") as caught:
        fencer.power_off(FakeClock())
    assert len(calls()) == 3            # off, status, status: no more
    assert PASSWORD not in str(caught.value)
    # It never answered: a BMC that lost its power fails so.
    assert isinstance(caught.value, Unreachable)
    assert fencer.kind is DeviceKind.POWER


def test_failures_after_an_answer_that_worked_are_waited_through(scripted):
    failure = [1, "ERROR: Unable to connect/login to fencing device"]
    fencer, calls = scripted(off=[[0, "Success"]],
                             status=[[0, "Status: ON"], failure])
    with pytest.raises(exception.FencingError) as caught:
        fencer.power_off(FakeClock())
    assert not isinstance(caught.value, BmcRefused | Unreachable)
    assert "power not verified Off within 30 s" in str(caught.value)
    assert len(calls()) > 10


def test_different_failures_are_not_a_refusal(scripted):
    fencer, calls = scripted(
        off=[[1, "ERROR: timed out"]],
        status=[[1, "ERROR: no route"], [1, "ERROR: timed out"],
                [1, "ERROR: no route"], [2, "Status: OFF"]])
    assert "verified Off" in fencer.power_off(FakeClock())
