"""The API before its store opens (recovery.api.starting): 503 with
Retry-After, and for the WSGI entry point, one attempt to open the store
at a time, none within retry_after seconds of one that failed."""

import threading

import webob

from recovery import exception
from recovery.api import starting

RETRY_AFTER = 10


def ok(environ, start_response):
    return webob.Response(status=200, body=b"served")(environ,
                                                       start_response)


class Opener:
    """Fails while ``down``; counts its attempts; ``gate`` holds one."""

    def __init__(self):
        self.down = True
        self.attempts = 0
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def __call__(self):
        self.attempts += 1
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(10)
        if self.down:
            raise exception.StoreUnavailable("the database does not answer")
        return ok


def get(app):
    return webob.Request.blank("/v1/notifications").get_response(app)


def test_a_failed_attempt_is_not_repeated_before_retry_after(clock):
    opener = Opener()
    deferred = starting.Deferred(RETRY_AFTER, opener=opener, clock=clock)
    answer = get(deferred)
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == str(RETRY_AFTER)
    assert opener.attempts == 1
    opener.down = False
    clock.sleep(RETRY_AFTER - 1)
    # Within retry_after of the failure: 503 at once, no attempt.
    assert get(deferred).status_code == 503
    assert opener.attempts == 1
    clock.sleep(1)
    assert get(deferred).body == b"served"
    assert get(deferred).body == b"served"
    assert opener.attempts == 2


def test_one_attempt_at_a_time(clock):
    """While one request waits to open the store (a connect timeout),
    the others are answered 503 at once instead of waiting too."""
    opener = Opener()
    opener.gate = threading.Event()
    deferred = starting.Deferred(RETRY_AFTER, opener=opener, clock=clock)
    first: list[webob.Response] = []
    waiting = threading.Thread(target=lambda: first.append(get(deferred)))
    waiting.start()
    try:
        assert opener.entered.wait(10)
        assert get(deferred).status_code == 503
        assert opener.attempts == 1
    finally:
        opener.gate.set()
        waiting.join(10)
    assert first[0].status_code == 503


def test_served_once_opened_without_an_opener(clock):
    deferred = starting.Deferred(RETRY_AFTER, clock=clock)
    assert get(deferred).status_code == 503
    deferred.serve(ok)
    assert get(deferred).body == b"served"
