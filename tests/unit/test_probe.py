"""The liveness probe: what counts as an answer, over real sockets on
127.0.0.1 where the test can make one, and an injected connect for
silence (a real one takes the whole timeout)."""

import errno
import socket

import pytest

from recovery import concurrency
from recovery import exception
from recovery.probe import Probe


def silent(address, timeout):
    raise TimeoutError("timed out")


def test_an_accepted_connection_is_an_answer():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = Probe((port,), 1.0, {"compute-1": "127.0.0.1"})
        assert "connection was accepted" in probe.answer("compute-1")


def test_a_refused_connection_is_an_answer():
    """A closed port: the host's network stack answered for it."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    probe = Probe((port,), 1.0, {"compute-1": "127.0.0.1"})
    assert "refused" in probe.answer("compute-1")


def test_silence_on_every_port_is_no_answer():
    tried = []

    def connect(address, timeout):
        tried.append((address, timeout))
        raise OSError(errno.EHOSTUNREACH, "no route to host")

    probe = Probe((22, 16509), 0.5, connect=connect)
    assert probe.answer("compute-1") is None
    assert sorted(tried) == [(("compute-1", 22), 0.5),
                             (("compute-1", 16509), 0.5)]
    assert Probe((22,), 0.5, connect=silent).answer("compute-1") is None


def test_a_host_answering_on_one_of_its_addresses_answers():
    """Several networks: silent on the first address, it answers on the
    second; and every port of every address is asked."""
    tried = []

    def connect(address, timeout):
        tried.append(address)
        if address != ("10.1.0.5", 16509):
            raise TimeoutError("timed out")

    probe = Probe((22, 16509), 0.5, {"compute-1": "10.0.0.5+10.1.0.5"},
                  connect=connect)
    answer = probe.answer("compute-1")
    assert answer == ("compute-1 (10.1.0.5) answers on TCP port 16509: a "
                      "connection was accepted")
    assert sorted(tried) == [("10.0.0.5", 22), ("10.0.0.5", 16509),
                             ("10.1.0.5", 22), ("10.1.0.5", 16509)]
    assert probe.describe("compute-1") == (
        "TCP port(s) 22, 16509 of compute-1 (10.0.0.5, 10.1.0.5)")
    assert Probe((22,), 0.5, {"compute-1": "10.0.0.5+10.1.0.5"},
                 connect=silent).answer("compute-1") is None


def test_the_ports_are_asked_at_once():
    """Silent addresses take each port's timeout, but not one after the
    other: every ask is in flight before the first one ends."""
    started, release = [], concurrency.Event()

    def connect(address, timeout):
        started.append(address)
        if len(started) == 4:
            release.set()
        if not release.wait(5):
            raise AssertionError("asked one after the other")
        raise TimeoutError("timed out")

    probe = Probe((22, 16509), 5, {"compute-1": "10.0.0.5+10.1.0.5"},
                  connect=connect)
    assert probe.answer("compute-1") is None
    assert len(started) == 4


def test_a_name_that_does_not_resolve_is_no_proof():
    def connect(address, timeout):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(exception.ProbeFailed, match="probe_addresses"):
        Probe((22,), 0.5, connect=connect).answer("compute-9")
