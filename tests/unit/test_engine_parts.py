"""Small parts of the service: the retry schedule and the sd_notify
client."""

import datetime
import os
import socket

from recovery.engine.runner import retry_at
from recovery.engine.systemd import Notifier

NOW = datetime.datetime(2026, 11, 22, tzinfo=datetime.timezone.utc)


def test_retry_backoff_doubles_up_to_the_cap():
    delays = [(retry_at(n, NOW, 15, 100) - NOW).total_seconds()
              for n in range(1, 6)]
    assert delays == [15, 30, 60, 100, 100]


def test_notifier_sends_to_an_abstract_socket():
    name = f"recovery-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
        notifier.ready("listening on 127.0.0.1:1")
        assert server.recv(4096) == (b"READY=1\n"
                                     b"STATUS=listening on 127.0.0.1:1")


def test_notifier_without_systemd_does_nothing():
    notifier = Notifier({})
    notifier.ready("x")            # no socket: no error
    assert notifier.watchdog_interval is None


def test_watchdog_is_for_this_process_only():
    assert Notifier({"WATCHDOG_USEC": "30000000"}).watchdog_interval == 15
    other = {"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}
    assert Notifier(other).watchdog_interval is None
