"""The liveness probe: what counts as an answer, over real sockets on
127.0.0.1 where the test can make one, and an injected connect for
silence (a real one takes the whole timeout)."""

import errno
import socket

import pytest

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
    assert tried == [(("compute-1", 22), 0.5), (("compute-1", 16509), 0.5)]
    assert Probe((22,), 0.5, connect=silent).answer("compute-1") is None


def test_a_name_that_does_not_resolve_is_no_proof():
    def connect(address, timeout):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(exception.ProbeFailed, match="probe_addresses"):
        Probe((22,), 0.5, connect=connect).answer("compute-9")
