"""The detector's fast path, on a fake clock: hosts whose nova-compute
heartbeats every ``REPORT`` seconds as Nova's does, probes whose answers
each engine's network decides, and engines that share one SQLite store.

A host fails fast once its heartbeat is stale (older than the report
interval plus the margin), it has been silent on the probe for the
window, and a majority of the live engines see it silent."""

import datetime
import logging
import subprocess
import sys

import pytest
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery.census import Census
from recovery.census import HeartbeatAges
from recovery.engine.detector import Detector
from recovery.engine.silence import HoldCause
from recovery.engine.silence import agreements
from recovery.fencing import load_fencing
from recovery.identity import split_owner
from recovery.identity import this_process
from recovery.metrics import DETECTOR_HOLDS
from recovery.metrics import METRICS
from recovery.models import ComputeService
from recovery.notification import Kind
from tests.unit.fakes import NOVA_NOW
from tests.unit.fakes import MemoryNova

HOSTS = tuple(f"compute-{n}" for n in range(1, 7))
REPORT = 10.0           # Nova's report_interval
MARGIN = 1.0
DOWN_AFTER = 60.0       # Nova's service_down_time
WINDOW = 3.0
STEP = 0.5              # the census and the probes, in these tests


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    for name, value in (("enabled", True), ("hosts", ["compute-*"]),
                        ("poll_interval", STEP), ("probe_interval", STEP),
                        ("nova_report_interval", REPORT),
                        ("heartbeat_margin", MARGIN),
                        ("silence_window", WINDOW), ("liveness_probe", [22]),
                        ("grace_period", 30.0)):
        conf.set_override(name, value, "detector")
    conf.set_override("service_down_time", DOWN_AFTER, "safety")
    for name, value in (("driver", "redfish"),
                        ("address", "https://bmc-{host}"),
                        ("username", "admin"), ("password", "secret")):
        conf.set_override(name, value, "fencing")
    return conf


class Cloud:
    """Nova's heartbeats, and what each engine's probes find.

    Each host heartbeats every REPORT seconds at its own phase, by Nova's
    clock (an hour ahead of the engines': the fast path must not care),
    until it dies; Nova reports it down DOWN_AFTER seconds after its last
    heartbeat. A probe answers unless the host is dead, its link is cut,
    or the probing engine is cut off."""

    SKEW = datetime.timedelta(hours=1)

    def __init__(self, nova, clock):
        self.nova, self.clock = nova, clock
        self.phase = {h: n * REPORT / len(HOSTS) for n, h in
                      enumerate(HOSTS)}
        self.died: dict[str, float] = {}     # host -> its last heartbeat
        self.link_cut: set[str] = set()
        self.cut_off: set[str] = set()       # engines cut off
        self.tick()

    def last_heartbeat(self, host):
        if host in self.died:
            return self.died[host]
        phase = self.phase[host]
        return phase + REPORT * ((self.clock.t - phase) // REPORT)

    def die(self, host):
        """Power loss: heartbeats stop, and the probe is silent."""
        self.died[host] = self.last_heartbeat(host)

    def tick(self):
        for host in HOSTS:
            last = self.last_heartbeat(host)
            state = "down" if self.clock.t - last > DOWN_AFTER else "up"
            self.nova.services[host] = ComputeService(
                id=f"svc-{host}", host=host, state=state, status="enabled",
                forced_down=False, disabled_reason=None,
                updated_at=NOVA_NOW + self.SKEW
                + datetime.timedelta(seconds=last))

    def answers(self, engine, host):
        return not (host in self.died or host in self.link_cut
                    or engine in self.cut_off)

    def probe(self, detector):
        for host in detector.prober.hosts():
            answer = ("answers" if self.answers(detector.name, host)
                      else None)
            detector.prober.record(host, self.clock.t, answer)


@pytest.fixture
def nova(clock):
    nova = MemoryNova()
    nova.clock = clock
    return nova


@pytest.fixture
def cloud(nova, clock):
    return Cloud(nova, clock)


def engines(conf, store, nova, clock, count=1):
    found = []
    for n in range(count):
        name = f"engine-{n}"
        store.engine_seen(name, "node", n)
        found.append(Detector(conf, store, nova, load_fencing(conf), clock,
                              connect=_no_slow_probe, name=name))
    return found


def _no_slow_probe(address, timeout):
    raise AssertionError("the slow path's probe is not used here")


def run(cloud, detectors, seconds, until=None):
    """Turn the world every STEP for ``seconds`` (or until ``until()``)."""
    end = cloud.clock.t + seconds
    while cloud.clock.t < end:
        cloud.tick()
        for detector in detectors:
            cloud.probe(detector)
            detector.poll()
        if until is not None and until():
            return cloud.clock.t
        cloud.clock.sleep(STEP)
    return None


def stored(store):
    return store.list_notifications(sort_dir="asc")


def kinds(store, subject):
    return [(e.actor, e.kind) for e in store.events()
            if e.subject == subject]


def test_a_dead_host_fails_one_interval_and_the_margin_after_its_last_beat(
        conf, store, nova, clock, cloud):
    [detector] = engines(conf, store, nova, clock)
    run(cloud, [detector], 25)
    cloud.die("compute-3")
    last = cloud.last_heartbeat("compute-3")
    failed_at = run(cloud, [detector], 30, until=lambda: stored(store))
    assert failed_at is not None
    # Never before the heartbeat is stale; at most two looks after.
    assert REPORT + MARGIN < failed_at - last <= REPORT + MARGIN + 2 * STEP
    [item] = stored(store)
    assert (item.hostname, item.kind, item.origin) == (
        "compute-3", Kind.HOST_FAILURE, "detector")
    assert "detected (fast path)" in item.message
    assert "1 of 1 live engine(s) see it silent" in item.message
    assert item.payload["heartbeat"] == nova.services[
        "compute-3"].updated_at.isoformat()
    assert kinds(store, "compute-3") == [
        ("detector", "suspect"), ("engine-0", "agreed"),
        ("detector", "received")]
    # The slow path, once Nova calls it down, finds it stored.
    run(cloud, [detector], DOWN_AFTER + 40)
    assert len(stored(store)) == 1


def test_a_fresh_heartbeat_is_alive_whatever_the_probe_says(
        conf, store, nova, clock, cloud):
    [detector] = engines(conf, store, nova, clock)
    cloud.link_cut.add("compute-2")
    run(cloud, [detector], 3 * DOWN_AFTER)
    assert stored(store) == []
    assert kinds(store, "compute-2") == []


def test_a_stale_heartbeat_on_a_host_that_answers_is_not_failed_fast(
        conf, store, nova, clock, cloud):
    """nova-compute crashed, the host runs: the slow path's business."""
    [detector] = engines(conf, store, nova, clock)
    cloud.die("compute-2")
    cloud.died["compute-2"] = cloud.last_heartbeat("compute-2")
    cloud.link_cut.discard("compute-2")
    detector_answers = cloud.answers
    cloud.answers = lambda engine, host: (
        host == "compute-2" or detector_answers(engine, host))
    run(cloud, [detector], DOWN_AFTER - 5)
    assert stored(store) == []
    assert kinds(store, "compute-2") == [("detector", "suspect")]


def test_a_flap_shorter_than_the_window_never_fails(conf, store, nova, clock,
                                                    cloud):
    [detector] = engines(conf, store, nova, clock)
    cloud.die("compute-1")       # heartbeats stop: stale soon
    silent = True
    for _ in range(40):          # silent 2 s, then an answer, again
        if silent:
            cloud.link_cut.add("compute-1")
        run(cloud, [detector], WINDOW - 1)
        cloud.link_cut.discard("compute-1")
        cloud.died.pop("compute-1")
        run(cloud, [detector], STEP)
        cloud.die("compute-1")
    assert stored(store) == []


def test_no_fencing_no_fast_path(conf, store, nova, clock, cloud):
    conf.set_override("driver", None, "fencing")
    [detector] = engines(conf, store, nova, clock)
    cloud.die("compute-1")
    run(cloud, [detector], DOWN_AFTER - 5)
    assert stored(store) == []


def test_a_majority_of_engines_must_see_it_silent(conf, store, nova, clock,
                                                  cloud, caplog):
    detectors = engines(conf, store, nova, clock, 3)
    # compute-1's nova-compute stops; only engine-0 sees it silent.
    cloud.answers = lambda engine, host: not (
        host == "compute-1" and engine == "engine-0")
    cloud.die("compute-1")
    with caplog.at_level(logging.WARNING):
        run(cloud, detectors, DOWN_AFTER - 5)
    assert stored(store) == []
    held = [e for e in store.events() if e.kind == "held"]
    assert [(e.actor, e.subject) for e in held] == [
        ("engine-0", "compute-1")]
    assert "only 1 of 3 live engine(s) see it silent (engine-0), 2 needed" \
        in held[0].message
    assert METRICS.detector_holds.labels("no_agreement")._value.get() >= 1


def test_two_engines_of_three_agree(conf, store, nova, clock, cloud):
    detectors = engines(conf, store, nova, clock, 3)
    cloud.answers = lambda engine, host: not (
        host in cloud.died and engine != "engine-2")
    run(cloud, detectors, 12)
    cloud.die("compute-4")
    last = cloud.last_heartbeat("compute-4")
    failed_at = run(cloud, detectors, 30, until=lambda: stored(store))
    assert failed_at is not None
    assert failed_at - last <= REPORT + MARGIN + 2 * STEP
    [item] = stored(store)
    assert "2 of 3 live engine(s) see it silent (engine-0, engine-1)" \
        in item.message


def test_an_engine_gone_from_the_registry_is_not_waited_for(
        conf, store, nova, clock, cloud):
    detectors = engines(conf, store, nova, clock, 3)
    # engine-1 and engine-2 stopped long ago: engine-0 is alone.
    clock.sleep(conf.engine.lease_seconds + 1)
    store.engine_seen("engine-0", "node", 0)
    cloud.die("compute-5")
    assert run(cloud, detectors[:1], 20,
               until=lambda: stored(store)) is not None


def test_an_engine_cut_off_from_every_host_holds_and_alarms(
        conf, store, nova, clock, cloud, caplog):
    detectors = engines(conf, store, nova, clock, 3)
    cloud.cut_off.add("engine-0")
    with caplog.at_level(logging.ERROR):
        run(cloud, detectors, 20)
    assert stored(store) == []
    held = [e for e in store.events() if e.kind == "held"]
    assert [(e.actor, e.subject) for e in held] == [
        ("engine-0", "all hosts")]
    assert "6 of 6 watched hosts are silent" in held[0].message
    assert "ALARM detector: this engine may be cut off" in caplog.text
    # A host that does die is failed by the two that see it, the cut-off
    # engine's silence counting for nothing.
    cloud.die("compute-6")
    assert run(cloud, detectors, 20, until=lambda: stored(store))
    [item] = stored(store)
    assert "2 of 3 live engine(s) see it silent (engine-1, engine-2)" \
        in item.message


def test_the_cut_off_engine_alone_never_fails_a_host(conf, store, nova,
                                                     clock, cloud):
    """Alone, and cut off, when a host also dies: nothing fails fast."""
    [detector] = engines(conf, store, nova, clock)
    cloud.cut_off.add("engine-0")
    cloud.die("compute-1")
    run(cloud, [detector], DOWN_AFTER - 5)
    assert stored(store) == []
    assert METRICS.brake.labels("silent_probes")._value.get() == 1
    assert store.probe_views(["compute-1"], window=0, fresh=60,
                             live_within=60).silent["compute-1"] == set()
    cloud.cut_off.clear()
    run(cloud, [detector], 2 * STEP)
    assert METRICS.brake.labels("silent_probes")._value.get() == 0


def _exited_process():
    """The owner name of a process of this machine that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{split_owner(this_process())[0]}:{child.pid}"


def test_an_engine_known_gone_leaves_the_majority_at_once(store):
    """An engine that crashed stays in the registry until its row is a
    lease old. Once its process is known to have exited (a process of
    this machine), it no longer counts: the engine that restarted in its
    place is a majority alone. An engine on another machine still counts
    until its lease runs out, whatever its pid: a live engine is never
    taken for gone."""
    me, gone = this_process(), _exited_process()
    for name in (gone, me):
        store.engine_seen(name, *split_owner(name))
    store.record_probe_views(me, {"compute-1": 10.0})

    def agreement():
        views = store.probe_views(["compute-1"], window=WINDOW, fresh=60,
                                  live_within=60)
        return agreements(views, me)["compute-1"]

    assert agreement().live == (me,)
    assert agreement().reached
    elsewhere = f"not-{split_owner(gone)[0]}:{split_owner(gone)[1]}"
    store.engine_seen(elsewhere, *split_owner(elsewhere))
    assert agreement().live == tuple(sorted((me, elsewhere)))
    assert not agreement().reached
    assert agreement().describe() == (
        f"1 of 2 live engine(s) see it silent ({me}), 2 needed")


def test_the_hold_causes_are_the_metric_s_labels():
    """Each cause is counted under a label the metric made at start."""
    assert tuple(HoldCause) == DETECTOR_HOLDS


# -- the heartbeat's age ---------------------------------------------------
def _service(stamp):
    return ComputeService(id="1", host="h", state="up", status="enabled",
                          forced_down=False, disabled_reason=None,
                          updated_at=stamp)


def test_a_heartbeat_s_age_never_exceeds_its_true_age():
    """Nova's clock is ahead by an hour; the censuses come back 0.3 s
    after a heartbeat at best: ages are that much younger, never older."""
    ages = HeartbeatAges()
    base = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    skew = 3600.0
    for t in range(0, 100, 10):
        stamp = base + datetime.timedelta(seconds=skew + t)
        ages.observe(Census((_service(stamp),), DOWN_AFTER), t + 0.3)
    last = base + datetime.timedelta(seconds=skew + 90)
    assert ages.age(_service(last), 100.0) == pytest.approx(9.7)
    assert ages.age(_service(last), 90.3) == pytest.approx(0.0)
