"""Small parts of the service: the retry schedule, the sd_notify client
and the loop's wake-up."""

import datetime
import os
import socket
import threading

from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery.db.store import open_store
from recovery.engine import runner
from recovery.engine.detector import Detector
from recovery.engine.gates import Gates
from recovery.engine.lease import LeaseKeeper
from recovery.engine.runner import retry_delay
from recovery.engine.service import Engine
from recovery.engine.systemd import Notifier
from recovery.fencing import load_fencing
from recovery.notification import Kind
from recovery.notification import Status
from recovery.nova import Nova
from tests.unit.fakes import FakeClock

NOW = datetime.datetime(2026, 11, 22, tzinfo=datetime.timezone.utc)


def test_retry_backoff_doubles_up_to_the_cap():
    delays = [retry_delay(n, 15, 100) for n in range(1, 6)]
    assert delays == [15, 30, 60, 100, 100]


def test_notifier_sends_to_an_abstract_socket():
    name = f"recovery-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
        notifier.ready("listening on 127.0.0.1:1")
        assert server.recv(4096) == (b"READY=1\n"
                                     b"STATUS=listening on 127.0.0.1:1")


def test_a_notify_socket_nobody_reads_never_blocks(caplog):
    """The datagram queue fills (a few messages); later messages are
    dropped with a warning instead of stalling the engine's loop."""
    name = f"recovery-full-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
        sender = threading.Thread(target=lambda: [
            notifier.status(f"update {n}") for n in range(1000)],
            daemon=True)
        sender.start()
        sender.join(timeout=10)
        assert not sender.is_alive()
    assert "Could not notify systemd" in caplog.text


def test_notifier_without_systemd_does_nothing():
    notifier = Notifier({})
    notifier.ready("x")            # no socket: no error
    assert notifier.watchdog_interval is None


def test_watchdog_is_for_this_process_only():
    assert Notifier({"WATCHDOG_USEC": "30000000"}).watchdog_interval == 15
    other = {"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}
    assert Notifier(other).watchdog_interval is None


def test_a_finished_run_wakes_the_loop_for_waiting_work(tmp_path):
    """A host waiting for a free slot is claimed as soon as a run ends,
    not at the loop's next idle look."""
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    clock = FakeClock()
    store = open_store(f"sqlite:///{tmp_path}/s.sqlite")
    store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
              hostname="compute-1", generated_time=clock.now(), payload={},
              origin="api", status=Status.NEW, now=clock.now())
    nova, fencing = Nova(None, retries=0, clock=clock), load_fencing(conf)
    keeper = LeaseKeeper(store, clock, 60)
    attempted = []

    def attempt(run):
        attempted.append(run.notification.uuid)
        return runner.Attempt(Status.FINISHED, "1 recovered")

    engine = Engine(conf, store, clock,
                    detector=Detector(conf, store, nova, fencing, clock),
                    gates=Gates(conf, store, nova, clock), keeper=keeper,
                    attempt=attempt)
    notification = store.take(store.next_runnable(), engine.owner, 60)
    run = engine.claimed(notification, clock.monotonic(), 60)
    assert keeper.tracked() == [run.lease]
    engine.run(run)
    assert attempted == [notification.uuid]
    assert engine.wake.is_set()
    assert keeper.tracked() == []
    assert store.get(notification.uuid).status is Status.FINISHED
    [*_, end] = store.events(notification.uuid)
    assert (end.actor, end.kind, end.message) == (
        engine.owner, "finished", "1 recovered")
    store.close()
