"""The detector, over a real SQLite store and the in-memory Nova, with a
clock that never sleeps and a probe whose answers the test decides."""

import dataclasses
import datetime
import errno
import logging
import socket

import pytest
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery.engine.detector import Detector
from recovery.engine.gates import Gates
from recovery.fencing import load_fencing
from recovery.notification import Kind
from recovery.notification import Status
from tests.unit.fakes import NOVA_NOW
from tests.unit.fakes import MemoryNova
from tests.unit.runs import finish_at
from tests.unit.runs import take_at

HOSTS = ("compute-1", "compute-2", "compute-3", "compute-4")
GRACE = 30.0
POLL = 5.0


class Network:
    """What each address does with a connection: "accept", "refuse", or
    nothing (silence: a timeout)."""

    def __init__(self):
        self.hosts: dict[str, str] = {}
        self.tries: list[tuple[str, int]] = []

    def connect(self, address, timeout):
        self.tries.append(address)
        answer = self.hosts.get(address[0])
        if answer == "accept":
            return
        if answer == "refuse":
            raise ConnectionRefusedError(errno.ECONNREFUSED, "refused")
        raise TimeoutError("timed out")


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    conf.set_override("enabled", True, "detector")
    conf.set_override("grace_period", GRACE, "detector")
    conf.set_override("poll_interval", POLL, "detector")
    conf.set_override("hosts", ["compute-*"], "detector")
    return conf



@pytest.fixture
def nova(clock):
    nova = MemoryNova()
    nova.clock = clock
    for host in HOSTS:
        nova.add_service(host, state="up")
    return nova


@pytest.fixture
def network():
    return Network()


def fenced(conf):
    """Every host has a BMC."""
    conf.set_override("driver", "redfish", "fencing")
    conf.set_override("address", "https://bmc-{host}", "fencing")
    conf.set_override("username", "admin", "fencing")
    conf.set_override("password", "secret", "fencing")


def detector(conf, store, nova, clock, network):
    return Detector(conf, store, nova, load_fencing(conf), clock,
                    connect=network.connect)


def dies(nova, host, heartbeat_age=120):
    nova.add_service(host, state="down", heartbeat_age=heartbeat_age)


def beats(nova, host):
    nova.add_service(host, state="up")


def poll_until(det, clock, seconds, each=lambda: None):
    """Poll every POLL seconds for ``seconds``; ``each`` before a poll
    changes the world (a heartbeat that keeps up, say)."""
    end = clock.t + seconds
    while clock.t <= end:
        each()
        det.poll()
        clock.sleep(POLL)


def stored(store):
    return store.list_notifications(sort_dir="asc")


def test_a_suspect_fails_after_the_grace_period(conf, store, nova, clock,
                                                network):
    fenced(conf)
    det = detector(conf, store, nova, clock, network)
    dies(nova, "compute-1")
    poll_until(det, clock, GRACE - POLL)
    assert stored(store) == []
    poll_until(det, clock, POLL)
    [item] = stored(store)
    assert (item.type, item.kind, item.origin, item.status) == (
        "COMPUTE_HOST", Kind.HOST_FAILURE, "detector", Status.NEW)
    assert item.hostname == "compute-1"
    assert "down for 30 s" in item.message
    assert item.detection == "compute-1@" + (
        NOVA_NOW - datetime.timedelta(seconds=120)).isoformat()
    # One failure, one notification: later polls add nothing.
    poll_until(det, clock, 60)
    assert len(stored(store)) == 1


def test_a_flapping_host_is_never_failed(conf, store, nova, clock,
                                         network):
    fenced(conf)
    det = detector(conf, store, nova, clock, network)
    for _ in range(6):
        dies(nova, "compute-1")
        poll_until(det, clock, GRACE - 2 * POLL)
        beats(nova, "compute-1")
        poll_until(det, clock, 0)
    assert stored(store) == []


def test_forced_down_with_a_live_heartbeat_is_up(conf, store, nova, clock,
                                                 network):
    """Forced down by someone, but nova-compute still reports."""
    fenced(conf)
    det = detector(conf, store, nova, clock, network)
    poll_until(det, clock, 3 * GRACE, each=lambda: nova.add_service(
        "compute-1", state="down", forced_down=True,
        heartbeat_age=5 - clock.t))
    assert stored(store) == []


def test_forced_down_with_its_heartbeat_stopped_is_failed(
        conf, store, nova, clock, network):
    fenced(conf)
    nova.add_service("compute-1", state="down", forced_down=True,
                     heartbeat_age=600)
    poll_until(detector(conf, store, nova, clock, network), clock, GRACE)
    assert [n.hostname for n in stored(store)] == ["compute-1"]


def test_one_poll_is_one_request(conf, store, nova, clock, network):
    det = detector(conf, store, nova, clock, network)
    det.poll()
    det.poll()          # not due yet
    clock.sleep(POLL)
    det.poll()
    assert nova.names() == ["list_services", "list_services"]


def test_three_engines_detecting_at_once_give_one_notification(
        conf, store, nova, clock, network):
    fenced(conf)
    engines = [detector(conf, store, nova, clock, network)
               for _ in range(3)]
    dies(nova, "compute-1")
    end = clock.t + GRACE
    while clock.t <= end:
        for det in engines:
            det.poll()
        clock.sleep(POLL)
    assert len(stored(store)) == 1


def test_a_host_that_answers_the_probe_is_a_process_failure(
        conf, store, nova, clock, network, caplog):
    conf.set_override("liveness_probe", [22, 16509], "detector")
    conf.set_override("probe_addresses", {"compute-1": "10.0.0.1"},
                      "detector")
    network.hosts["10.0.0.1"] = "refuse"
    dies(nova, "compute-1")
    with caplog.at_level(logging.ERROR):
        poll_until(detector(conf, store, nova, clock, network), clock,
                   GRACE)
    [item] = stored(store)
    assert (item.type, item.kind, item.status) == (
        "PROCESS", Kind.PROCESS, Status.NEW)
    assert item.payload["process_name"] == "nova-compute"
    assert item.payload["event"] == "STOPPED"
    assert "answers on TCP port 22" in item.payload["liveness"]
    assert "answers on TCP port 22" in item.message
    assert "not evacuated" in item.message
    assert "ALARM detector" in caplog.text
    # Every port asked at once.
    assert sorted(network.tries) == [("10.0.0.1", 22), ("10.0.0.1", 16509)]


def test_a_silent_probe_proves_a_host_with_no_fencing_off(
        conf, store, nova, clock, network):
    conf.set_override("liveness_probe", [22, 16509], "detector")
    dies(nova, "compute-1")
    poll_until(detector(conf, store, nova, clock, network), clock, GRACE)
    [item] = stored(store)
    assert (item.kind, item.status) == (Kind.HOST_FAILURE, Status.NEW)
    assert network.tries == [("compute-1", 22), ("compute-1", 16509)]


def test_with_neither_fencing_nor_probe_it_is_ignored(conf, store, nova,
                                                      clock, network):
    dies(nova, "compute-1")
    det = detector(conf, store, nova, clock, network)
    poll_until(det, clock, GRACE)
    [item] = stored(store)
    assert item.status is Status.IGNORED
    assert "Configure fencing" in item.message
    assert "liveness_probe" in item.message
    assert "recovery host-failure compute-1" in item.message
    # Recorded once, not at every poll.
    poll_until(det, clock, 60)
    assert len(stored(store)) == 1


def test_trusting_nova_s_heartbeat_evacuates_without_proof(
        conf, store, nova, clock, network):
    conf.set_override("trust_nova_heartbeat", True, "detector")
    dies(nova, "compute-1")
    poll_until(detector(conf, store, nova, clock, network), clock, GRACE)
    assert [n.status for n in stored(store)] == [Status.NEW]


def test_only_watched_hosts_are_failed(conf, store, nova, clock, network):
    fenced(conf)
    conf.set_override("hosts", [], "detector")
    segment = store.create_segment(name="rack-1", recovery_method="auto",
                                   service_type="COMPUTE", now=clock.now())
    store.create_host(segment.uuid, name="compute-2", type="COMPUTE",
                      control_attributes="", now=clock.now())
    dies(nova, "compute-1")
    dies(nova, "compute-2")
    poll_until(detector(conf, store, nova, clock, network), clock, GRACE)
    assert [n.hostname for n in stored(store)] == ["compute-2"]


def test_a_recovered_host_is_not_detected_again(conf, store, nova, clock,
                                                network):
    fenced(conf)
    reason = conf.host_failure.service_disable_reason
    nova.services["compute-1"] = dataclasses.replace(
        nova.services["compute-1"], state="down", status="disabled",
        disabled_reason=reason, forced_down=True)
    poll_until(detector(conf, store, nova, clock, network), clock, 3 * GRACE)
    assert stored(store) == []


def test_switched_off_it_asks_nova_nothing(conf, store, nova, clock,
                                           network):
    conf.set_override("enabled", False, "detector")
    dies(nova, "compute-1")
    poll_until(detector(conf, store, nova, clock, network), clock, GRACE)
    assert nova.calls == [] and stored(store) == []


def test_one_decision_line_per_change(conf, store, nova, clock, network,
                                      caplog):
    fenced(conf)
    det = detector(conf, store, nova, clock, network)
    with caplog.at_level(logging.INFO, "recovery.engine.detector"):
        poll_until(det, clock, POLL)          # all up
        dies(nova, "compute-1")
        poll_until(det, clock, GRACE)         # suspect ... failed
        poll_until(det, clock, 3 * POLL)      # nothing new
    lines = [r.getMessage() for r in caplog.records
             if r.getMessage().startswith("detector: 4 hosts")]
    assert lines[0] == "detector: 4 hosts, 4 up"
    assert lines[1] == "detector: 4 hosts, 3 up, 1 suspect (compute-1, 0 s)"
    assert lines[2].startswith("detector: 4 hosts, 3 up, 1 failed -> "
                               "compute-1: notification ")
    assert lines[3] == "detector: 4 hosts, 3 up"
    assert len(lines) == 4


def test_the_mass_failure_brake_holds_detected_failures(
        conf, store, nova, clock, network):
    fenced(conf)
    for host in HOSTS[:3]:
        dies(nova, host)
    poll_until(detector(conf, store, nova, clock, network), clock, GRACE)
    detected = stored(store)
    assert len(detected) == 3
    gates = Gates(conf, store, nova, clock)
    holds = [gates.check(item) for item in detected]
    assert all(hold is not None and "3 of 4" in hold.message
               for hold in holds)


# -- the host's return -------------------------------------------------------
def recovered(conf, store, nova, clock, host="compute-1"):
    """``host`` as a finished recovery leaves it: forced down, disabled
    with recovery's reason, its failure finished in the store."""
    nova.services[host] = dataclasses.replace(
        nova.services[host], state="down", status="disabled",
        disabled_reason=conf.host_failure.service_disable_reason,
        forced_down=True)
    failure = store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                        hostname=host, generated_time=clock.now(),
                        payload={"event": "STOPPED"}, origin="api",
                        status=Status.NEW, now=clock.now())
    finish_at(store, take_at(store, failure, "engine-a:1", clock.now()),
              "engine-a:1", Status.FINISHED, "recovered", clock.now())
    return failure


def heartbeats_again(nova, clock, host="compute-1"):
    """nova-compute runs again on the forced-down host: its heartbeat
    keeps up with Nova's clock."""
    nova.services[host] = dataclasses.replace(
        nova.services[host],
        updated_at=NOVA_NOW + datetime.timedelta(seconds=clock.t))


def test_a_recovered_host_that_heartbeats_again_returns(
        conf, store, nova, clock, network):
    conf.set_override("auto_host_return", True, "detector")
    failure = recovered(conf, store, nova, clock)
    det = detector(conf, store, nova, clock, network)
    poll_until(det, clock, 2 * GRACE,
               each=lambda: heartbeats_again(nova, clock))
    [back] = [n for n in stored(store) if n.uuid != failure.uuid]
    assert (back.kind, back.origin, back.status) == (
        Kind.HOST_RETURN, "detector", Status.NEW)
    assert back.detection == f"compute-1@return-after@{failure.uuid}"
    assert failure.uuid in back.message


def test_a_return_after_a_quiet_period_brings_the_instances_home(
        conf, store, nova, clock, network):
    conf.set_override("auto_host_return", True, "detector")
    conf.set_override("bring_back_after", 3 * GRACE, "host_drain")
    failure = recovered(conf, store, nova, clock)
    det = detector(conf, store, nova, clock, network)
    poll_until(det, clock, 2 * GRACE,
               each=lambda: heartbeats_again(nova, clock))
    assert [n.uuid for n in stored(store)] == [failure.uuid]
    poll_until(det, clock, 2 * GRACE,
               each=lambda: heartbeats_again(nova, clock))
    [back] = [n for n in stored(store) if n.uuid != failure.uuid]
    assert back.kind is Kind.HOST_RETURN
    assert back.payload["bring_back"] is True
    assert back.message.endswith("; its instances are brought back")


def test_without_auto_host_return_a_recovered_host_waits(
        conf, store, nova, clock, network):
    failure = recovered(conf, store, nova, clock)
    det = detector(conf, store, nova, clock, network)
    poll_until(det, clock, 2 * GRACE,
               each=lambda: heartbeats_again(nova, clock))
    assert [n.uuid for n in stored(store)] == [failure.uuid]


def test_a_return_that_flaps_waits_for_a_whole_grace_period(
        conf, store, nova, clock, network):
    conf.set_override("auto_host_return", True, "detector")
    failure = recovered(conf, store, nova, clock)
    det = detector(conf, store, nova, clock, network)
    for _ in range(4):
        poll_until(det, clock, GRACE - 2 * POLL,
                   each=lambda: heartbeats_again(nova, clock))
        clock.sleep(120)        # silent: the heartbeat grows old
        det.poll()
    assert [n.uuid for n in stored(store)] == [failure.uuid]


def test_a_host_an_operator_disabled_is_left_alone(conf, store, nova, clock,
                                                   network):
    """Planned maintenance: disabled, then powered off."""
    fenced(conf)
    nova.services["compute-1"] = dataclasses.replace(
        nova.services["compute-1"], state="down", status="disabled",
        disabled_reason="maintenance: new DIMMs (ops)")
    poll_until(detector(conf, store, nova, clock, network), clock, 3 * GRACE)
    assert stored(store) == []


def test_a_process_failure_host_that_dies_later_is_recovered(
        conf, store, nova, clock, network):
    """Disabled as a process failure, it stays watched: once it no longer
    answers its probe, it is a dead host."""
    conf.set_override("liveness_probe", [22], "detector")
    network.hosts["compute-1"] = "accept"
    dies(nova, "compute-1")
    det = detector(conf, store, nova, clock, network)
    poll_until(det, clock, GRACE)
    [process] = stored(store)
    assert process.kind is Kind.PROCESS
    # The process flow disables it (Nova's updated_at may or may not
    # move). The host still answers: nothing more.
    nova.services["compute-1"] = dataclasses.replace(
        nova.services["compute-1"], status="disabled",
        disabled_reason=conf.process_failure.disable_reason)
    poll_until(det, clock, 2 * GRACE)
    assert len(stored(store)) == 1
    # Then the machine dies.
    del network.hosts["compute-1"]
    poll_until(det, clock, 2 * POLL)
    [_, failure] = stored(store)
    assert (failure.kind, failure.status) == (Kind.HOST_FAILURE, Status.NEW)


def test_a_host_the_probe_cannot_reach_by_name_is_not_evacuated(
        conf, store, nova, clock, network):
    conf.set_override("liveness_probe", [22], "detector")

    def unresolvable(address, timeout):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    dies(nova, "compute-1")
    det = Detector(conf, store, nova, load_fencing(conf), clock,
                   connect=unresolvable)
    poll_until(det, clock, GRACE)
    [item] = stored(store)
    assert item.status is Status.IGNORED
    assert "does not resolve" in item.message


def test_its_decisions_are_events(conf, store, nova, clock, network):
    """A suspect and its end before any notification; the failure it
    stores, or the proof it lacks, as the notification's first event."""
    fenced(conf)
    det = detector(conf, store, nova, clock, network)
    dies(nova, "compute-1")
    poll_until(det, clock, POLL)
    beats(nova, "compute-1")
    poll_until(det, clock, 0)
    dies(nova, "compute-1")
    poll_until(det, clock, GRACE + POLL)
    [item] = stored(store)
    events = store.events()
    assert [(e.actor, e.subject, e.kind, e.notification_uuid)
            for e in events] == [
        ("detector", "compute-1", "suspect", None),
        ("detector", "compute-1", "cleared", None),
        ("detector", "compute-1", "suspect", None),
        ("detector", "compute-1", "received", item.uuid)]
    assert events[0].message == (
        "nova-compute seen down (Nova reports it down); failed if no "
        "heartbeat comes within grace_period 30 s")
    assert events[1].message == ("nova-compute heartbeats again, 10 s "
                                 "after it was seen down")
    assert events[3].message == f"COMPUTE_HOST STOPPED, host_status " \
                                f"NORMAL; {item.message}"
    assert "down for 30 s" in events[3].message


def test_a_failure_it_cannot_prove_is_an_ignored_event(conf, store, nova,
                                                       clock, network):
    dies(nova, "compute-1")
    poll_until(detector(conf, store, nova, clock, network), clock, GRACE)
    [item] = stored(store)
    [event] = store.events(item.uuid)
    assert (event.actor, event.kind) == ("detector", "ignored")
    assert event.message.endswith(item.message)
    assert "Configure fencing" in event.message
