"""Host failures held by fencing: one ALARM per hold of a host, one per
failure domain whose hosts are held together, a warning for every other
held attempt, and the hold count by cause; read from the store's events,
so that the engines sharing it tell each hold once."""

import logging

import pytest
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery.db.store import open_store
from recovery.engine import runner
from recovery.engine.detector import Detector
from recovery.engine.gates import Gates
from recovery.engine.holds import Holds
from recovery.engine.lease import LeaseKeeper
from recovery.engine.service import Engine
from recovery.fencing import load_fencing
from recovery.metrics import METRICS
from recovery.models import Aggregate
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova
from tests.unit.runs import finish_at
from tests.unit.runs import take_at

RACK = ["r1-0", "r1-1", "r1-2"]
DOMAINS = {host: "rack-1" for host in RACK} | {"r2-0": "rack-2"}
ATTEMPT = "attempt 1; retry in 15 s"


class Held(exception.FencingError):
    """A fencing hold with a cause, as the Fence step raises it."""

    def __init__(self, message: str, cause: str = "unreachable"):
        super().__init__(message)
        self.cause = cause


@pytest.fixture
def store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/h.sqlite")
    yield store
    store.close()


@pytest.fixture
def clock():
    return FakeClock()


def holds(store, clock, actor="engine-a:1", domains=DOMAINS):
    return Holds(store, clock, lambda: domains, actor)


def failure(store, clock, host):
    """A host failure stored, to act on."""
    return store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                     hostname=host, generated_time=clock.now(),
                     payload={"event": "STOPPED"}, origin="detector",
                     status=Status.NEW, now=clock.now())


def end(store, clock, item, status):
    """Run ``item`` once, ended as ``status``."""
    taken = take_at(store, item, "engine-a:1", clock.now())
    finish_at(store, taken, "engine-a:1", status, "done", clock.now())


def error(host, cause="unreachable"):
    return Held(f"{host} could not be proved off: no fencing level proved "
                f"it off: level 1 device bmc (redfish) unreachable", cause)


def alarms(caplog):
    return [r.getMessage() for r in caplog.records if "ALARM" in
            r.getMessage()]


def warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING]


def held_events(store, subject):
    return [e for e in store.events(kinds=["held"]) if e.subject == subject]


# -- a host in no failure domain ---------------------------------------------
def test_a_host_alone_has_its_own_alarm_once_then_warnings(
        store, clock, caplog):
    item = failure(store, clock, "compute-1")
    tell = holds(store, clock)
    with caplog.at_level(logging.WARNING):
        tell.held(item, error("compute-1"), ATTEMPT)
        # Retried, on another engine: the store knows it was told.
        holds(store, clock, actor="engine-b:2").held(
            item, error("compute-1"), "attempt 2; retry in 30 s")
    [alarm] = alarms(caplog)
    assert alarm == (
        "ALARM: compute-1 could not be proved off: no fencing level proved "
        "it off: level 1 device bmc (redfish) unreachable. Nothing is "
        "forced down or evacuated, so its instances stay down until it is "
        "(held: unreachable): repair its BMC so that fencing proves it "
        "off, or check that it is off and run 'recovery fencing confirm "
        f"compute-1 --reason TEXT'. Notification {item.uuid}: {ATTEMPT}")
    [later] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert later.getMessage().startswith(
        "compute-1 is still held by fencing (unreachable), under its "
        "alarm: no fencing level proved it off")
    assert "attempt 2; retry in 30 s" in later.getMessage()
    [event] = held_events(store, "compute-1")
    assert event.message.startswith("ALARM: compute-1 could not be proved "
                                    "off")
    assert event.message.endswith(f"(notification {item.uuid})")


def test_a_held_run_that_gives_up_says_what_releases_it_now(
        store, clock, caplog):
    """No BMC repaired proves it off once it is retried no more."""
    host = RACK[0]
    item, alone = failure(store, clock, host), failure(store, clock, "c-1")
    tell = holds(store, clock)
    with caplog.at_level(logging.WARNING):
        tell.held(item, error(host), ATTEMPT)
        tell.held(alone, error("c-1"), "gave up after 1 attempts",
                  retried=False)
        tell.held(item, error(host), "gave up after 5 attempts",
                  retried=False)
    assert len(alarms(caplog)) == 2
    assert alarms(caplog)[1].startswith("ALARM: c-1 could not be proved")
    assert alarms(caplog)[1].endswith(
        "(held: unreachable): it is retried no more: check that it is off "
        "and run 'recovery fencing confirm c-1 --reason TEXT' (its run "
        "goes on at once), or repair its BMC and run 'recovery "
        f"host-failure c-1'. Notification {alone.uuid}: gave up after 1 "
        f"attempts")
    last = caplog.records[-1]
    assert last.levelno == logging.ERROR
    assert last.getMessage().startswith(
        "r1-0 is still held by fencing (unreachable), under the alarm of "
        "failure domain rack-1")
    assert "gave up after 5 attempts. To release it: it is retried no " \
           "more" in last.getMessage()


def test_a_new_failure_after_the_hold_ended_is_a_new_alarm(
        store, clock, caplog):
    first = failure(store, clock, "compute-1")
    tell = holds(store, clock)
    with caplog.at_level(logging.WARNING):
        tell.held(first, error("compute-1"), ATTEMPT)
        # Its BMC repaired, it was proved off and recovered; it fails
        # again later.
        end(store, clock, first, Status.FINISHED)
        clock.t += 3600
        second = failure(store, clock, "compute-1")
        tell.held(second, error("compute-1"), ATTEMPT)
    assert len(alarms(caplog)) == 2
    assert second.uuid in alarms(caplog)[1]


def test_a_fencing_error_with_no_cause_is_held_as_fence_failed(
        store, clock, caplog):
    item = failure(store, clock, "compute-1")
    with caplog.at_level(logging.WARNING):
        holds(store, clock).held(
            item, exception.FencingError("compute-1 could not be proved "
                                         "off: BMC says no"), ATTEMPT)
    [alarm] = alarms(caplog)
    assert "BMC says no. Nothing is forced down" in alarm
    assert "(held: fence_failed)" in alarm


# -- a failure domain --------------------------------------------------------
def test_three_held_hosts_of_a_domain_are_one_alarm_and_one_event(
        store, clock, caplog):
    items = [failure(store, clock, host) for host in RACK]
    # Each on an engine of its own.
    with caplog.at_level(logging.WARNING):
        for n, item in enumerate(items):
            holds(store, clock, actor=f"engine-{n}:1").held(
                item, error(item.hostname), ATTEMPT)
    [alarm] = alarms(caplog)
    assert alarm.startswith(
        "ALARM: failure domain rack-1 is held by fencing: r1-0 could not "
        "be proved off (unreachable); its hosts whose failure is being "
        "recovered: r1-0, r1-1, r1-2. Nothing is forced down or evacuated "
        "on a held host until it is proved off")
    assert "'recovery fencing confirm HOST --reason TEXT' for each" in alarm
    [event] = held_events(store, "rack-1")
    assert (event.actor, event.message) == ("engine-0:1", alarm)
    # The others: a warning each, under the domain's alarm.
    joined = warnings(caplog)
    assert [w.split(" ")[0] for w in joined] == ["r1-1", "r1-2"]
    assert all("held by fencing (unreachable), under the alarm of failure "
               "domain rack-1" in w for w in joined)
    assert "'recovery fencing confirm r1-1 --reason TEXT'" in joined[0]
    # Each host's hold is recorded, for the engines to read.
    assert [len(held_events(store, host)) for host in RACK] == [1, 1, 1]


def test_a_domain_s_retries_and_late_holds_raise_no_second_alarm(
        store, clock, caplog):
    first, second = (failure(store, clock, host) for host in RACK[:2])
    tell = holds(store, clock)
    with caplog.at_level(logging.WARNING):
        tell.held(first, error("r1-0"), ATTEMPT)
        tell.held(first, error("r1-0"), "attempt 2; retry in 30 s")
        clock.t += 600
        # Held later in the same failure: it joins.
        tell.held(second, error("r1-1", "bmc_answered"), ATTEMPT)
    assert len(alarms(caplog)) == 1
    assert len(held_events(store, "rack-1")) == 1
    still, joined = warnings(caplog)
    assert still.startswith("r1-0 is still held by fencing (unreachable), "
                            "under the alarm of failure domain rack-1")
    assert joined.startswith("r1-1 is held by fencing (bmc_answered), "
                             "under the alarm of failure domain rack-1")


def test_the_domain_s_episode_ends_when_none_of_its_hosts_is_held(
        store, clock, caplog):
    items = [failure(store, clock, host) for host in RACK[:2]]
    tell = holds(store, clock)
    with caplog.at_level(logging.WARNING):
        for item in items:
            tell.held(item, error(item.hostname), ATTEMPT)
        # One recovered, the other gave up: no host of it is held.
        end(store, clock, items[0], Status.FINISHED)
        end(store, clock, items[1], Status.FAILED)
        clock.t += 3600
        again = failure(store, clock, "r1-2")
        tell.held(again, error("r1-2"), ATTEMPT)
    assert len(alarms(caplog)) == 2
    assert alarms(caplog)[1].startswith(
        "ALARM: failure domain rack-1 is held by fencing: r1-2 could not "
        "be proved off (unreachable); its hosts whose failure is being "
        "recovered: r1-2.")
    assert len(held_events(store, "rack-1")) == 2


def test_an_operator_s_confirmation_releases_a_host_from_the_episode(
        store, clock, caplog):
    """Its notification is still to be acted on, but no longer held."""
    items = [failure(store, clock, host) for host in RACK[:2]]
    tell = holds(store, clock)
    with caplog.at_level(logging.WARNING):
        for item in items:
            tell.held(item, error(item.hostname), ATTEMPT)
        for host in RACK[:2]:
            store.confirm_fenced(host, "alice", "checked: the rack is "
                                 "dark", clock.now())
        tell.held(failure(store, clock, "r1-2"), error("r1-2"), ATTEMPT)
    assert len(alarms(caplog)) == 2
    assert alarms(caplog)[1].startswith(
        "ALARM: failure domain rack-1 is held by fencing: r1-2 could not "
        "be proved off (unreachable); its hosts whose failure is being "
        "recovered: r1-0, r1-1, r1-2.")


def test_a_host_of_another_domain_or_none_is_not_under_the_alarm(
        store, clock, caplog):
    tell = holds(store, clock)
    with caplog.at_level(logging.WARNING):
        for host in ("r1-0", "r2-0", "compute-1"):
            tell.held(failure(store, clock, host), error(host), ATTEMPT)
    found = alarms(caplog)
    assert len(found) == 3
    assert found[0].startswith("ALARM: failure domain rack-1 is held")
    assert found[1].startswith("ALARM: failure domain rack-2 is held by "
                               "fencing: r2-0 could not")
    assert found[2].startswith("ALARM: compute-1 could not be proved off")


class Interleaved:
    """The store, where another engine's whole hold runs right after this
    engine records its own hold and before it reads its domain's."""

    def __init__(self, store, then):
        self._store, self._then = store, then

    def add_event(self, decision, now):
        self._store.add_event(decision, now)
        then, self._then = self._then, None
        if then is not None:
            then()

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_two_engines_holding_a_domain_s_hosts_at_once_raise_one_alarm(
        store, clock, caplog):
    """Each engine records its host's hold before it reads the domain's:
    the second to record reads the first's, and joins it."""
    first, second = (failure(store, clock, host) for host in RACK[:2])
    other = holds(store, clock, actor="engine-b:2")
    interleaved = Interleaved(
        store, lambda: other.held(second, error("r1-1"), ATTEMPT))
    with caplog.at_level(logging.WARNING):
        Holds(interleaved, clock, lambda: DOMAINS, "engine-a:1").held(
            first, error("r1-0"), ATTEMPT)
    # Raised once both holds are recorded: it names both.
    [alarm] = alarms(caplog)
    assert "rack-1 is held by fencing: r1-0, r1-1 could not be proved " \
           "off" in alarm
    [event] = held_events(store, "rack-1")
    assert event.actor == "engine-a:1"
    [joined] = warnings(caplog)
    assert joined.startswith("r1-1 is held by fencing (unreachable), under "
                             "the alarm of failure domain rack-1")


# -- the count ---------------------------------------------------------------
def test_every_held_attempt_counts_by_cause(store, clock):
    def count(cause):
        return METRICS.registry.get_sample_value(
            "recovery_fencing_holds_total", {"cause": cause}) or 0.0

    before = {cause: count(cause) for cause in ("unreachable",
                                                "fence_failed")}
    item = failure(store, clock, "compute-1")
    tell = holds(store, clock)
    tell.held(item, error("compute-1"), ATTEMPT)
    tell.held(item, error("compute-1"), ATTEMPT)
    tell.held(item, exception.FencingError("BMC says no"), ATTEMPT)
    assert count("unreachable") == before["unreachable"] + 2
    assert count("fence_failed") == before["fence_failed"] + 1


def test_a_store_that_fails_still_alarms(clock, caplog):
    class Down:
        def events(self, *args, **kwargs):
            raise exception.StoreUnavailable("database gone")

    item = failure_of("compute-1", clock)
    with caplog.at_level(logging.WARNING):
        Holds(Down(), clock, lambda: {}, "engine-a:1").held(
            item, error("compute-1"), ATTEMPT)
    [alarm] = alarms(caplog)
    assert alarm.startswith("ALARM: compute-1 could not be proved off")
    assert alarm.endswith("(the store could not say whether this hold was "
                          "told before: database gone)")


def failure_of(host, clock):
    """A host failure as the engine holds it, without a store."""
    return Notification(id=1, uuid="n-1", type="COMPUTE_HOST",
                        kind=Kind.HOST_FAILURE, hostname=host,
                        generated_time=clock.now(), payload={},
                        origin="detector", status=Status.RUNNING,
                        created_at=clock.now(), updated_at=clock.now())


# -- the engine --------------------------------------------------------------
def engine_with(store, clock, outcome):
    """An engine whose every attempt ends as ``outcome``, and whose
    failure domains are Nova's aggregates (the rack)."""
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    nova = MemoryNova()
    nova.aggregates.append(Aggregate(1, "rack-1"))
    nova.aggregate_hosts[1] = list(RACK)
    nova.aggregate_metadata[1] = {"failure_domain": "rack-1"}
    fencing = load_fencing(conf)
    return Engine(conf, store, clock,
                  detector=Detector(conf, store, nova, fencing, clock),
                  gates=Gates(conf, store, nova, clock),
                  keeper=LeaseKeeper(store, clock, 60),
                  attempt=lambda run: outcome(run.notification))


def run_once(engine, store, item):
    """One attempt of ``item``, due by then on the engine's clock."""
    store.lease_clock = lambda conn: engine.clock.now()
    taken = store.take(store.get(item.uuid), engine.owner, 60)
    engine.run(engine.claimed(taken, engine.clock.monotonic(), 60))
    return store.get(item.uuid)


def test_the_engine_tells_a_held_run_once_and_its_retries_as_warnings(
        store, clock, caplog):
    items = [failure(store, clock, host) for host in RACK + ["compute-1"]]
    engine = engine_with(store, clock, lambda n: runner.Attempt(
        Status.ERROR, f"{n.hostname} could not be proved off: BMC gone",
        error=Held(f"{n.hostname} could not be proved off: BMC gone")))
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            ended = [run_once(engine, store, item) for item in items]
            clock.t += 3600
    assert [n.status for n in ended] == [Status.ERROR] * 4
    assert ended[0].message == ("r1-0 could not be proved off: BMC gone "
                                "(attempt 2; retry in 30 s)")
    # One for the rack, one for the host alone; no other error line.
    rack, alone = [r.getMessage() for r in caplog.records
                   if r.levelno >= logging.ERROR]
    assert rack.startswith("ALARM: failure domain rack-1 is held by "
                           "fencing: r1-0 could not be proved off")
    assert alone.startswith("ALARM: compute-1 could not be proved off")
    assert len(warnings(caplog)) == 6
    assert len(held_events(store, "rack-1")) == 1


def test_the_engine_logs_other_errors_as_before(store, clock, caplog):
    item = failure(store, clock, "compute-1")
    engine = engine_with(store, clock, lambda n: runner.Attempt(
        Status.ERROR, "Nova said no", error=exception.NovaError("no")))
    with caplog.at_level(logging.WARNING):
        run_once(engine, store, item)
    assert alarms(caplog) == []
    assert f"Notification {item.uuid} error: Nova said no (attempt 1; " \
           f"retry in 15 s)" in caplog.text
    assert store.events(kinds=["held"]) == []
