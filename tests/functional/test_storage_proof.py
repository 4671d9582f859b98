"""A host-failure run whose BMC is gone with the host: proved off by a
storage fence alone, on evidence, or by an operator's confirmation.

The flow runs here, against the fake Nova over real HTTP, and probes
real sockets: the failed host's two addresses are 127.0.0.1 and
127.0.0.2, silent where a listener with a full queue drops the
connections, answering where the port is closed. The fencing devices
are doubles (tests/fencing_doubles.py): a BMC out of reach or answering
On, and a storage fence with scripted watchers that covers every volume
and no local disk (the real Ceph driver has its own tests). The engines'
views are scripted too: which engines see the host silent, since when.
"""

import contextlib
import datetime
import socket
import time

import pytest

from recovery import concurrency
from recovery import exception
from recovery.cmd import output
from recovery.confirmation import Confirmation
from recovery.engine.silence import Agreement
from recovery.events import EventKind
from recovery.flows import Env
from recovery.flows import EvacuationWatcher
from recovery.flows import recover_host
from recovery.nova import load_nova
from recovery.probe import Probe
from recovery.results import Outcome
from tests import fencing_doubles as doubles
from tests.fencing_doubles import PowerDouble
from tests.fencing_doubles import StorageDouble
from tests.functional.test_nova_facade import admin_token_conf
from tests.unit.fakes import ListRecorder
from tests.unit.fakes import settings

HOST = "compute-1"
ADDRESSES = ("127.0.0.1", "127.0.0.2")
CONFIRMED = Confirmation(HOST, "n-1", "alice", "pulled its power cords",
                         datetime.datetime(2026, 11, 29, 8, 30,
                                           tzinfo=datetime.timezone.utc))


@contextlib.contextmanager
def silent_on(addresses):
    """One port, silent on each of ``addresses`` (a listener whose full
    queue drops new connections), closed on the others."""
    listeners, fillers = [], []
    port = 0
    try:
        for address in addresses:
            listener = socket.create_server((address, port), backlog=0)
            port = listener.getsockname()[1]
            listeners.append(listener)
            for _ in range(4):
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex((address, port))
                fillers.append(filler)
        yield port
    finally:
        for sock in (*fillers, *listeners):
            sock.close()


class Engines:
    """Three live engines, ``seeing`` of them seeing the host silent for
    ``silent_for`` seconds when the run starts."""

    def __init__(self, seeing=2, silent_for=10.0):
        self.seeing = seeing
        self.since = time.monotonic() - silent_for

    def agreement(self, host, window):
        long_enough = time.monotonic() - self.since >= window
        silent = ("e1", "e2", "e3")[:self.seeing if long_enough else 0]
        return Agreement(silent, ("e1", "e2", "e3"))


@pytest.fixture
def cloud(fake_nova):
    for host in (HOST, "compute-2", "compute-3"):
        fake_nova.add_compute(host)
    return fake_nova


def volume_backed(fake, name):
    return fake.add_server(name, HOST, image_id=None,
                           volumes=(f"{name}-root", f"{name}-data"))


def recover(fake, fence, *, silent=ADDRESSES, engines=None, **kwargs):
    """Fail the host and run its recovery, probed on both addresses;
    the report and what was recorded."""
    fake.fail_host(HOST)
    recorder = Recorder()
    clock = concurrency.Clock()
    with silent_on(silent) as port:
        env = Env(nova=load_nova(admin_token_conf(fake), clock), clock=clock,
                  settings=settings(
                      poll_interval=0.1, silence_window=3.0,
                      liveness_probe=Probe(
                          (port,), 0.3, {HOST: "+".join(ADDRESSES)})),
                  recorder=recorder, watcher=EvacuationWatcher(clock))
        report = recover_host(env, HOST, fencer=fence, engines=engines
                              or Engines(), **kwargs)
    return report, recorder


class Recorder(ListRecorder):
    """Keeps the message of each step change that recorded an event."""

    def __init__(self):
        super().__init__()
        self.told = []

    def step_changed(self, step, state, message, *, news=None,
                     instances=None):
        super().step_changed(step, state, message, news=news,
                             instances=instances)
        if news is not None:
            self.told.append((news.kind, news.words or message))


def said(recorder, kind):
    """What the step changes that recorded ``kind`` said."""
    return [message for told, message in recorder.told if told is kind]


def writes(fake):
    return [r for r in fake.requests if r["method"] in ("POST", "PUT")]


def held(fake, fence, cause, **kwargs):
    """The run is held for ``cause``, with nothing changed in Nova."""
    with pytest.raises(exception.FenceHeld) as caught:
        recover(fake, fence, **kwargs)
    assert caught.value.cause == cause
    assert writes(fake) == []
    return caught.value


def test_a_covered_host_is_recovered_on_a_storage_fence_alone(cloud):
    uuids = [volume_backed(cloud, f"vm-{n}") for n in range(3)]
    storage = StorageDouble(HOST)
    report, recorder = recover(cloud, doubles.fence(
        HOST, [PowerDouble(HOST)], [storage]))
    assert [r.outcome for r in report.instances] == [Outcome.RECOVERED] * 3
    assert all(cloud.server(u)["host"] != HOST for u in uuids)
    assert storage.fenced == 1
    # The decision, with each condition, as an event; the proof (the
    # fenced event, and the run's message) says it again.
    [evidence] = said(recorder, EventKind.EVIDENCE)
    assert evidence.startswith("a storage fence alone is accepted: power "
                               "yes: no power device answered at all")
    assert (f"probe yes: silent on TCP port(s) {report_port(evidence)} of "
            f"compute-1 (127.0.0.1, 127.0.0.2)") in evidence
    assert "; engines yes: 2 of 3 live engine(s) see it silent" in evidence
    assert ("; storage yes: storage-double-2-0: no watch of its 3 "
            "instance(s)' images") in evidence
    [fenced] = said(recorder, EventKind.FENCED)
    assert fenced == report.evidence
    assert fenced.endswith(evidence.removeprefix(
        "a storage fence alone is accepted: "))


def report_port(evidence):
    return evidence.split("TCP port(s) ")[1].split(" ")[0]


def test_a_bmc_that_answers_on_holds_the_host_and_nothing_moves(cloud):
    volume_backed(cloud, "vm")
    storage = StorageDouble(HOST)
    error = held(cloud, doubles.fence(HOST, [PowerDouble(HOST, "On")],
                                      [storage]), "bmc_answered")
    assert storage.fenced == 0
    assert str(error).startswith(f"{HOST} could not be proved off: ")
    assert "power NO: power-double-1-0 answered (" in str(error)


def test_an_answer_on_the_second_address_holds_the_host(cloud):
    volume_backed(cloud, "vm")
    storage = StorageDouble(HOST)
    error = held(cloud, doubles.fence(HOST, [PowerDouble(HOST)], [storage]),
                 "probe_answered", silent=ADDRESSES[:1])
    assert storage.fenced == 0
    assert "probe NO: compute-1 (127.0.0.2) answers on TCP port" in str(
        error)


def test_without_the_engines_majority_the_host_is_held(cloud):
    volume_backed(cloud, "vm")
    storage = StorageDouble(HOST)
    error = held(cloud, doubles.fence(HOST, [PowerDouble(HOST)], [storage]),
                 "no_agreement", engines=Engines(seeing=1))
    assert storage.fenced == 0
    assert "engines NO: 1 of 3 live engine(s) see it silent (e1)" in str(
        error)


def test_a_host_that_still_talks_to_its_storage_is_held(cloud):
    """Watched past the watch timeout (1 s; it has been silent 10 s)."""
    volume_backed(cloud, "vm")
    storage = StorageDouble(HOST, watching=("127.0.0.1:0/77",),
                            watch_timeout=1.0)
    error = held(cloud, doubles.fence(HOST, [PowerDouble(HOST)], [storage]),
                 "ceph_talks")
    assert storage.fenced == 0
    assert "it still talks to its storage" in str(error)


def test_an_instance_on_a_local_disk_is_held_and_the_others_move(cloud):
    """Then an operator's confirmation moves it too, in the next run."""
    covered = [volume_backed(cloud, f"vm-{n}") for n in range(2)]
    local = cloud.add_server("local", HOST)
    fence = doubles.fence(HOST, [PowerDouble(HOST)], [StorageDouble(HOST)])
    report, _ = recover(cloud, fence)
    results = {r.uuid: r for r in report.instances}
    assert [results[u].outcome for u in covered] == [Outcome.RECOVERED] * 2
    assert results[local].outcome is Outcome.FAILED
    assert results[local].reason.startswith(
        f"held: not covered by the storage fence, the only proof that {HOST} "
        f"is off: its root disk (image ")
    assert results[local].reason.endswith(
        f"is on {HOST}'s local disk. Never evacuated on that proof: once you "
        f"have made sure {HOST} is off, 'recovery fencing confirm {HOST} "
        f"--reason ...' releases it")
    assert cloud.server(local)["host"] == HOST
    assert sorted(c["uuid"] for c in cloud.evacuate_calls) == sorted(covered)
    assert not report.succeeded
    assert results[local].reason in output.render_table(report)

    report, recorder = recover(cloud, fence, journal=report.instances,
                               confirmed=lambda: CONFIRMED)
    assert {r.uuid: r.outcome for r in report.instances}[local] is (
        Outcome.RECOVERED)
    assert cloud.server(local)["host"] != HOST


def test_a_confirmation_is_a_proof_for_every_instance(cloud):
    """Asked first: no device is tried."""
    uuids = [volume_backed(cloud, "bfv"), cloud.add_server("local", HOST)]
    bmc, storage = PowerDouble(HOST), StorageDouble(HOST)
    report, recorder = recover(cloud, doubles.fence(HOST, [bmc], [storage]),
                               confirmed=lambda: CONFIRMED)
    assert [r.outcome for r in report.instances] == [Outcome.RECOVERED] * 2
    assert all(cloud.server(u)["host"] != HOST for u in uuids)
    assert bmc.requests == storage.fenced == 0
    assert said(recorder, EventKind.FENCED) == [
        "confirmed off by alice at 2026-11-29 08:30:00 UTC: pulled its "
        "power cords"]
    assert report.evidence == CONFIRMED.describe()


class ConfirmedMeanwhile(PowerDouble):
    """A dead BMC; the operator confirms the host off while it is
    tried."""

    def __init__(self, confirmations):
        super().__init__(HOST)
        self.confirmations = confirmations

    def _send_off(self, seconds):
        self.confirmations.append(CONFIRMED)
        super()._send_off(seconds)


def test_a_confirmation_that_comes_while_fencing_fails_is_used(cloud):
    uuid = cloud.add_server("local", HOST)
    confirmations = []
    bmc = ConfirmedMeanwhile(confirmations)
    report, recorder = recover(
        cloud, doubles.fence(HOST, [bmc]),
        confirmed=lambda: confirmations[0] if confirmations else None)
    assert bmc.requests == 1
    assert report.instances[0].outcome is Outcome.RECOVERED
    assert cloud.server(uuid)["host"] != HOST
    assert said(recorder, EventKind.FENCED) == [CONFIRMED.describe()]


def test_a_dry_run_says_what_a_storage_fence_would_cover(cloud):
    bfv = volume_backed(cloud, "bfv")
    local = cloud.add_server("local", HOST, image_id=None, ephemeral_gb=5)
    bmc, storage = PowerDouble(HOST), StorageDouble(HOST)
    report, _ = recover(cloud, doubles.fence(HOST, [bmc], [storage]),
                        dry_run=True)
    reasons = {r.uuid: r.reason for r in report.instances}
    assert {r.outcome for r in report.instances} == {Outcome.PLANNED}
    assert reasons[bfv].endswith("covered by the storage fence alone")
    assert reasons[local].endswith(
        f"not covered by the storage fence alone (its ephemeral and swap "
        f"disks are on {HOST}'s local disk): held if that is the only "
        f"proof")
    assert bmc.requests == storage.fenced == 0
    assert writes(cloud) == []
