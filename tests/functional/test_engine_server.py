"""recovery-engine's ``Server`` in a child process (``server_child``), on
each concurrency backend: the order of shutdown, requests in flight, and
the signal handlers it leaves as it found them."""

import json
import os
import subprocess
import sys

import pytest

from recovery import concurrency
from tests.bmc import ROOT

pytestmark = pytest.mark.parametrize("backend", concurrency.BACKENDS)

SERVING = ["READY", "serving; API answers: True", "STOPPING",
           "engine takes no new work", "drained: True"]
CLOSED = ["store closed; API answers: False",
          "signal handlers restored: True"]


def child(scenario: str, backend: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "tests.functional.server_child", scenario],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, concurrency.BACKEND_VARIABLE: backend})
    assert result.returncode == 0, result.stderr
    notes = json.loads(result.stdout)
    assert notes.pop(0) == f"backend: {backend}"
    return notes


def test_stop_signal_shuts_down_in_order(backend):
    """No new work, the runs drain, the API stops listening, and only
    then the store closes; the previous signal handlers come back."""
    assert child("stop", backend) == SERVING + CLOSED


def test_requests_in_flight_end_before_the_store_closes(backend):
    assert child("slow-request", backend) == SERVING + [
        "request in flight answered: True"] + CLOSED


def test_a_hung_request_holds_up_the_shutdown_only_so_long(backend):
    """Up to ``graceful_shutdown_timeout`` (1 s here), with a warning."""
    assert child("hung-request", backend) == SERVING + [
        "warning: Stopping with API requests unanswered"] + CLOSED


def test_api_that_cannot_listen_still_closes_the_store(backend):
    notes = child("taken-port", backend)
    assert notes[0] == "store closed; API answers: False"
    assert notes[1].startswith("ConfigError: cannot listen on 127.0.0.1:")
    assert notes[2:] == ["signal handlers restored: True"]
