"""The evidence rule: a storage fence alone proves a host off only when
its BMCs never answered, it is silent on every probe address, the
engines agree, and it no longer talks to its storage. On the fake clock:
the engines' views and the watch timeout are judged by it."""

import datetime

import pytest

from recovery import exception
from recovery.engine.silence import Agreement
from recovery.flows.evidence import Evidence
from recovery.flows.host_context import HostContext
from recovery.probe import Probe
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from tests import fencing_doubles as doubles
from tests.fencing_doubles import PowerDouble
from tests.fencing_doubles import StorageDouble
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import make_env

HOST = "compute-1"
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
ADDRESSES = "10.0.0.5+10.1.0.5"
WATCHER = "10.2.0.5:0/3942"


class Engines:
    """Three live engines; ``seeing`` of them have seen the host silent
    since ``since`` on the fake clock (the fencing starts at 0)."""

    def __init__(self, clock: FakeClock, seeing: int = 2,
                 since: float = -10.0):
        self.clock, self.seeing, self.since = clock, seeing, since

    def agreement(self, host: str, window: float) -> Agreement:
        long_enough = self.clock.t - self.since >= window
        silent = ("e1", "e2", "e3")[:self.seeing if long_enough else 0]
        return Agreement(silent, ("e1", "e2", "e3"))


def probe(answering: str | None = None) -> Probe:
    """Port 22 of both addresses; ``answering`` accepts, the rest is
    silent."""
    def connect(address, timeout):
        if address[0] != answering:
            raise TimeoutError("timed out")
    return Probe((22,), 1.0, {HOST: ADDRESSES}, connect=connect)


class Case:
    """One host with a dead BMC at level 1 and a storage fence at level
    2, one instance, and everything the rule asks: changed per test."""

    def __init__(self, **settings):
        self.clock = FakeClock()
        self.nova = MemoryNova()
        self.nova.add_server("a")
        self.bmc = PowerDouble(HOST)
        self.storage = StorageDouble(HOST)
        self.said: list[str] = []
        self.engines = Engines(self.clock)
        self.settings = {"liveness_probe": probe(), "silence_window": 3.0,
                         **settings}

    def fence(self, journal=()):
        env = make_env(self.nova, self.clock, **self.settings)
        ctx = HostContext(env=env, host=HOST, fencer=None,
                          report=HostReport(HOST, env.clock.now()),
                          engines=self.engines,
                          journal={r.uuid: r for r in journal})
        fence = doubles.fence(HOST, [self.bmc], [self.storage])
        return fence.power_off(self.clock, gate=Evidence(ctx,
                                                         self.said.append))

    def held(self, journal=()) -> exception.FenceHeld:
        with pytest.raises(exception.FenceHeld) as caught:
            self.fence(journal)
        assert self.storage.fenced == 0
        return caught.value


ACCEPTED = ("power yes: no power device answered at all "
            "(power-double-1-0); probe yes: silent on TCP port(s) 22 of "
            "compute-1 (10.0.0.5, 10.1.0.5); engines yes: 2 of 3 live "
            "engine(s) see it silent (e1, e2), 2 needed; storage yes: "
            "storage-double-2-0: no watch of its 1 instance(s)' images "
            "from its addresses")


def test_a_storage_fence_alone_is_accepted_when_every_condition_holds():
    case = Case()
    proof = case.fence()
    assert proof.storage_only and proof.storage == (case.storage,)
    assert case.storage.fenced == 1
    assert case.said == [f"a storage fence alone is accepted: {ACCEPTED}"]
    assert proof.text == (
        f"level 2: blocklisted compute-1's storage address, read back; a "
        f"storage fence alone, on this evidence: {ACCEPTED}")


def test_a_bmc_that_answers_on_holds_the_host_whatever_else_holds():
    case = Case()
    case.bmc = PowerDouble(HOST, state="On")
    held = case.held()
    assert held.cause == "bmc_answered" and not held.bmcs_unreachable
    assert case.storage.asked == ["watchers"]   # recorded, never fenced
    [said] = case.said
    assert said.startswith("a storage fence alone is refused (bmc_answered)"
                           ": power NO: power-double-1-0 answered (")
    assert "the power last read On" in said
    assert ("a BMC that answers has power, so the host may be live; probe "
            "yes: ") in said
    assert "; engines yes: " in said and "; storage yes: " in said


def test_an_answer_on_the_second_address_holds_the_host():
    case = Case(liveness_probe=probe(answering="10.1.0.5"))
    held = case.held()
    assert held.cause == "probe_answered" and held.bmcs_unreachable
    assert ("probe NO: compute-1 (10.1.0.5) answers on TCP port 22: a "
            "connection was accepted") in case.said[0]


def test_a_host_with_no_probe_is_held():
    case = Case(liveness_probe=None)
    assert case.held().cause == "no_probe"
    assert "probe NO: no [detector] liveness_probe" in case.said[0]


@pytest.mark.parametrize("engines, says", [
    (lambda clock: Engines(clock, seeing=1),
     "engines NO: 1 of 3 live engine(s) see it silent (e1), 2 needed"),
    (lambda clock: Engines(clock, since=-2.0),
     "engines NO: 0 of 3 live engine(s) see it silent, 2 needed"),
    (lambda clock: None, "engines NO: no engine's probe views to ask")])
def test_without_the_engines_majority_the_host_is_held(engines, says):
    """Too few see it silent, or not for silence_window yet (2.3 s of
    the 3 s when the gate asks), or no engine to ask."""
    case = Case()
    case.engines = engines(case.clock)
    assert case.held().cause == "no_agreement"
    assert says in case.said[0]


def test_watches_listed_before_the_watch_timeout_are_inconclusive():
    case = Case()
    case.storage.watching = (WATCHER,)
    case.engines.since = -20.0       # silent 20.3 s, under the 30 s
    proof = case.fence()
    assert proof.storage_only
    assert (f"storage yes: storage-double-2-0: watched from its addresses "
            f"({WATCHER}), but it has been silent for less than the watch "
            f"timeout (30 s), which a dead client's watch outlives it by: "
            f"inconclusive") in case.said[0]


def test_watches_still_listed_after_the_watch_timeout_hold_the_host():
    """Silent everywhere else, it still talks to its storage."""
    case = Case()
    case.storage.watching = (WATCHER,)
    case.engines.since = -30.0
    held = case.held()
    assert held.cause == "ceph_talks"
    assert (f"storage NO: storage-double-2-0: its images are still watched "
            f"from its addresses ({WATCHER}) after it was silent for the "
            f"watch timeout (30 s): it still talks to its storage, so it is "
            f"not lost to everyone") in case.said[0]
    assert str(held).endswith(case.said[0])


def test_storage_that_cannot_be_asked_holds_the_host():
    case = Case()

    def watchers(servers, clock):
        raise exception.FencingError("no monitor answered")

    case.storage.watchers = watchers
    assert case.held().cause == "fence_failed"
    assert ("storage NO: storage-double-2-0: cannot list the watchers of "
            "its images: no monitor answered") in case.said[0]


def _journaled(uuid: str, sent: bool) -> InstanceResult:
    return InstanceResult(uuid=uuid, name=uuid, source_host=HOST,
                          original_state="active", outcome=Outcome.FAILED,
                          reason="an earlier attempt's",
                          evacuate_sent_at=EPOCH if sent else None)


def test_a_retry_stands_on_the_proof_that_evacuated_in_an_earlier_attempt():
    """The engines stop probing a host once it is isolated: on a retry of
    the same failure their views are gone, and the earlier attempt's
    proof (which instances were evacuated on) stands for them. The power
    and the probe are asked again."""
    case = Case()
    case.engines = None
    proof = case.fence(journal=[_journaled("a", sent=True),
                                _journaled("b", sent=False)])
    assert proof.storage_only
    assert ("engines yes: an earlier attempt of this failure proved it off "
            "and evacuated 1 instance(s) on that proof") in case.said[0]


def test_a_retry_with_nothing_evacuated_earlier_needs_the_engines():
    case = Case()
    case.engines = None
    assert case.held(journal=[_journaled("b", sent=False)]).cause == (
        "no_agreement")


def test_a_retry_whose_host_answers_now_is_held_whatever_came_before():
    case = Case(liveness_probe=probe(answering="10.0.0.5"))
    case.engines = None
    held = case.held(journal=[_journaled("a", sent=True)])
    assert held.cause == "probe_answered"
