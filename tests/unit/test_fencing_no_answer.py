"""A device that has answered nothing within its ``no_answer_timeout``
is out of reach: when its level has a later level to try, it is given
up then (``Unreachable``) and the next level is tried; alone, or once it
has answered anything, it keeps its whole ``timeout``.

The BMC here hangs on every call it does not answer: each such call
lasts all the seconds it is given (on the FakeClock), as a connection to
a BMC gone with its host's power does.
"""

import pytest
from sushy import exceptions as sushy_exc

from recovery import exception
from recovery.fencing import Fencer
from recovery.fencing import Timing
from recovery.fencing import Unreachable
from recovery.fencing import load_fencing
from recovery.fencing import redfish as redfish_driver
from recovery.fencing.fencer import AnsweredError
from tests import fencing_doubles as doubles
from tests.fencing_doubles import StorageDouble
from tests.unit.fakes import FakeClock
from tests.unit.test_fencing import bmc_settings
from tests.unit.test_fencing import make_conf

TIMING = Timing(timeout=30.0, poll_interval=1.0, attempts=3,
                no_answer_timeout=5.0)


class HangingBmc(Fencer):
    """A BMC that answers the calls ``answers`` scripts, in order: a
    power state, or an exception raised at once; None (and every call
    after the script) hangs for all its seconds, then fails as
    ``call_bounded`` does. ``calls``: (when, seconds given) of each."""

    driver = "hanging"

    def __init__(self, clock: FakeClock, answers=(), timing=TIMING) -> None:
        super().__init__(bmc_settings(), timing)
        self.clock = clock
        self.answers = list(answers)
        self.calls: list[tuple[float, float]] = []

    def describe(self) -> str:
        return "hanging power-off of bmc"

    def _target(self) -> str:
        return "bmc"

    def _call(self, seconds: float) -> str | None:
        self.calls.append((self.clock.t, seconds))
        answer = self.answers.pop(0) if self.answers else None
        if answer is None:
            self.clock.t += seconds
            raise self._error("calling", f"no answer from the BMC within "
                                         f"{seconds:.1f} s")
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _send_off(self, seconds: float) -> None:
        self._call(seconds)

    def _read_power(self, seconds: float) -> str:
        return self._call(seconds)


def attempts_of(clock, *levels):
    told = []
    fence = doubles.fence("compute-1", *levels)
    try:
        fence.power_off(clock, told.append, gate=lambda tried, level: "ok")
    except exception.FenceHeld:
        pass
    return told


def test_silent_bmc_is_given_up_at_no_answer_timeout_when_a_level_follows():
    clock = FakeClock()
    silent, spare = HangingBmc(clock), HangingBmc(clock)
    first, second = attempts_of(clock, [silent], [spare])
    assert (first.seconds, first.reached, first.proved) == (5.0, False,
                                                            False)
    assert first.answer == (
        "hanging power-off of bmc: answered nothing within 5 s "
        "(no_answer_timeout), out of reach: the next level is tried after "
        "1 power-off request(s); last BMC error: calling: no answer from "
        "the BMC within 5.0 s")
    assert spare.calls[0][0] == 5.0          # the next level, at once
    # The last level tried has no later one: its whole timeout.
    assert second.seconds == 30.0 and not second.reached


def test_each_call_in_the_window_is_bounded_by_what_is_left_of_it():
    # Answers that fail at once (no route) let it call again in the
    # window: each call gets what is left, never more.
    clock = FakeClock()
    unrouted = [exception.FencingError("no route")] * 3
    bmc = HangingBmc(clock, answers=unrouted)
    with pytest.raises(Unreachable, match="answered nothing within 5 s"):
        bmc.power_off(clock)
    assert bmc.calls == [(0.0, 5.0), (0.0, 5.0), (1.0, 4.0), (2.0, 3.0)]
    assert clock.t == 5.0


def test_silent_bmc_alone_waits_its_whole_timeout():
    clock = FakeClock()
    alone = HangingBmc(clock)
    with pytest.raises(exception.FenceHeld) as caught:
        doubles.fence("compute-1", [alone]).power_off(clock)
    assert clock.t == 30.0
    assert caught.value.bmcs_unreachable
    assert str(caught.value).startswith(
        "hanging power-off of bmc: power not verified Off within 30 s")
    assert alone.timing.no_answer_timeout is None


@pytest.mark.parametrize("answer", [
    "On",
    AnsweredError("hanging power-off of bmc: reading: HTTP 500"),
], ids=["power On", "an error answered"])
def test_one_answer_keeps_the_whole_timeout(answer):
    """No route for 3 s, one answer, then nothing: past
    no_answer_timeout it is still waited for, to its timeout, and its
    power-off requests keep their pace (one every 10 s)."""
    clock = FakeClock()
    unrouted = [exception.FencingError("no route")] * 4
    bmc = HangingBmc(clock, answers=[*unrouted, answer])
    first, _ = attempts_of(clock, [bmc], [HangingBmc(clock)])
    assert (first.seconds, first.reached) == (30.0, True)
    assert "not verified Off within 30 s after 3" in first.answer
    # The answer at 3 s (in the window: 2 s left), then each call hangs
    # to the end of its share, past the window: requests at 10 and 20 s.
    assert bmc.calls[4:] == [(3.0, 2.0), (4.0, 6.0), (10.0, 10.0),
                             (20.0, 10.0)]


def test_an_accepted_request_keeps_the_whole_timeout():
    clock = FakeClock()
    bmc = HangingBmc(clock, answers=["accepted"])
    first, _ = attempts_of(clock, [bmc], [HangingBmc(clock)])
    assert (first.seconds, first.reached) == (30.0, True)


def test_the_storage_level_is_reached_at_no_answer_timeout():
    clock = FakeClock()
    storage = StorageDouble("compute-1")
    asked = []

    def gate(attempts, level):
        asked.append((clock.t, [a.reached for a in attempts]))
        return "the evidence"

    proof = doubles.fence("compute-1", [HangingBmc(clock)],
                          [storage]).power_off(clock, gate=gate)
    assert asked == [(5.0, [False])]
    assert proof.storage_only and storage.fenced == 1


def test_redfish_http_errors_are_answers_a_lost_connection_is_not():
    fencer = redfish_driver.RedfishFencer(bmc_settings("redfish"), TIMING)
    server_error = sushy_exc.ServerSideError(
        method="GET", url="https://bmc", response=_Response(500))
    assert isinstance(fencer._translate(server_error, "reading"),
                      AnsweredError)
    lost = sushy_exc.ConnectionError(url="https://bmc", error="timed out")
    assert not isinstance(fencer._translate(lost, "reading"), AnsweredError)


class _Response:
    def __init__(self, status_code):
        self.status_code = status_code

    def json(self):
        return {}


# -- [fencing] no_answer_timeout and a device's own ---------------------------

LEVELS = """
[DEFAULT]
username = admin
password = p

[device:bmc]
driver = ipmi
address = {host}-ipmi

[device:quick]
driver = ipmi
address = {host}-other
no_answer_timeout = 2

[compute-*]
level1 = bmc, quick
level2 = quick
"""


def test_no_answer_timeout_from_fencing_and_from_the_device(tmp_path):
    fence = load_fencing(make_conf(tmp_path, LEVELS)).for_host("compute-1")
    timings = [(level, d.name, d.fencer.timing.no_answer_timeout)
               for level, d in fence.devices]
    # Level 2 is the last: it waits its whole timeout.
    assert timings == [(1, "bmc", 5.0), (1, "quick", 2.0), (2, "quick", None)]
    fence = load_fencing(make_conf(tmp_path, LEVELS, no_answer_timeout=8.0)
                         ).for_host("compute-1")
    assert fence.devices[0][1].fencer.timing.no_answer_timeout == 8.0


@pytest.mark.parametrize("ini, words", [
    ("[h]\ndriver = ipmi\naddress = a\nusername = u\npassword = p\n"
     "no_answer_timeout = 0\n", ["[h] no_answer_timeout", "'0'"]),
    ("[device:c]\ndriver = ceph\nno_answer_timeout = 5\n",
     ["[device:c] no_answer_timeout", "driver ceph has no"]),
])
def test_a_bad_no_answer_timeout_is_refused(tmp_path, ini, words):
    with pytest.raises(exception.ConfigError) as caught:
        load_fencing(make_conf(tmp_path, ini))
    for word in words:
        assert word in str(caught.value)
