"""The machine's RabbitMQ (127.0.0.1:5672, guest/guest, as on CI), for
the message-bus tests: a test publishes on an exchange of its own, so
tests never see each other's messages. Missing: skipped, or failed
under ``CI=true``."""

import os
import socket
import uuid

import pytest

URL = os.environ.get("RECOVERY_TEST_RABBIT",
                     "rabbit://guest:guest@127.0.0.1:5672/")


def require_rabbit() -> str:
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
    except OSError as exc:
        message = f"no RabbitMQ on 127.0.0.1:5672 ({exc})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return URL


def exchange() -> str:
    return f"recovery-test-{uuid.uuid4().hex[:8]}"
