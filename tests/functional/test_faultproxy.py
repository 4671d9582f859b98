"""The fault proxy (tests/faultproxy.py) itself, in front of a small HTTP
server: what each fault does to the client and to the server."""

import http.server
import json
import threading
import time

import pytest
import requests

from tests.faultproxy import FaultProxy
from tests.faultproxy import Match
from tests.faultproxy import Rule

CLIENT_TIMEOUT = 0.5


class Upstream(http.server.ThreadingHTTPServer):
    """Answers GET with a page whose next link names itself; records the
    body of every POST it got, and when."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.posts = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_port}/v2.1"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 - http.server's name
        own = f"http://127.0.0.1:{self.server.server_port}"
        self._answer(200, {"servers": [], "host": self.headers["Host"],
                           "servers_links": [{
                               "rel": "next",
                               "href": f"{own}/v2.1/servers?marker=x"}]})

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.posts.append((time.time(), json.loads(body)))
        self._answer(202, None)

    def _answer(self, status, doc):
        data = b"" if doc is None else json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.shutdown()
    server.server_close()


def post(session, proxy, action):
    return session.post(f"{proxy.endpoint}/servers/x/action",
                        json={action: None}, timeout=CLIENT_TIMEOUT)


def test_passes_requests_through_on_one_connection(upstream):
    with FaultProxy(upstream.url) as proxy, requests.Session() as session:
        first = session.get(f"{proxy.endpoint}/servers", timeout=5)
        assert post(session, proxy, "lock").status_code == 202
        assert first.json()["host"] == f"127.0.0.1:{proxy.port}"
        # A next link naming the upstream is pointed at the proxy.
        [link] = first.json()["servers_links"]
        assert link["href"] == f"{proxy.endpoint}/servers?marker=x"
    assert [body for _, body in upstream.posts] == [{"lock": None}]
    assert [(r.method, r.action, r.fault, r.status, r.answered)
            for r in proxy.records] == [
        ("GET", None, None, 200, True), ("POST", "lock", None, 202, True)]


@pytest.mark.parametrize("fault, error, reaches", [
    ("503", None, False),
    ("reset_before", requests.ConnectionError, False),
    ("reset_after", requests.ConnectionError, True),
    ("late_answer", requests.Timeout, True),
])
def test_faults(upstream, fault, error, reaches):
    rules = [Rule.once(fault, action="evacuate")]
    with FaultProxy(upstream.url, rules=rules) as proxy, \
            requests.Session() as session:
        if error is None:
            assert post(session, proxy, "evacuate").status_code == 503
        else:
            with pytest.raises(error):
                post(session, proxy, "evacuate")
        # The next request goes through: the rule is used up.
        assert post(session, proxy, "evacuate").status_code == 202
    assert len(upstream.posts) == (2 if reaches else 1)
    assert [r.fault for r in proxy.records] == [fault, None]


def test_late_delivery_reaches_after_the_client_gave_up(upstream):
    rules = [Rule.once("late_delivery", action="lock", late_by=0.2)]
    with FaultProxy(upstream.url, rules=rules) as proxy, \
            requests.Session() as session:
        sent = time.time()
        with pytest.raises(requests.Timeout):
            post(session, proxy, "lock")
        assert upstream.posts == []
        assert proxy.drain(timeout=10)
    [(arrived, body)] = upstream.posts
    assert body == {"lock": None}
    [held] = proxy.records
    assert held.client_gone - sent >= CLIENT_TIMEOUT
    assert arrived - held.client_gone >= 0.2
    assert (held.status, held.answered) == (202, False)


def test_late_delivery_can_wait_for_a_later_request(upstream):
    """A held lock reaches the server only after the unlock that
    followed it was answered."""
    rules = [Rule.once("late_delivery", action="lock", late_by=0.0,
                       after=Match("POST", action="unlock"))]
    with FaultProxy(upstream.url, rules=rules) as proxy, \
            requests.Session() as session:
        with pytest.raises(requests.Timeout):
            post(session, proxy, "lock")
        time.sleep(0.3)
        assert upstream.posts == []
        assert post(session, proxy, "unlock").status_code == 202
        assert proxy.drain(timeout=10)
    assert [body for _, body in upstream.posts] == [
        {"unlock": None}, {"lock": None}]


def test_a_seed_draws_the_same_faults(upstream):
    def faults(seed):
        rules = [Rule.mix({"503": 0.3, "reset_before": 0.2})]
        with FaultProxy(upstream.url, seed=seed, rules=rules) as proxy, \
                requests.Session() as session:
            for _ in range(30):
                try:
                    session.get(f"{proxy.endpoint}/servers", timeout=5)
                except requests.ConnectionError:
                    pass
        return [r.fault for r in proxy.records]

    assert faults(4) == faults(4)
    assert faults(4) != faults(5)
    assert {"503", "reset_before", None} == set(faults(4))


def test_max_in_a_row_lets_the_next_try_through(upstream):
    rules = [Rule.mix({"503": 1.0}, max_in_a_row=2)]
    with FaultProxy(upstream.url, rules=rules) as proxy, \
            requests.Session() as session:
        statuses = [session.get(f"{proxy.endpoint}/servers?n={n}",
                                timeout=5).status_code for n in range(6)]
        other = session.get(f"{proxy.endpoint}/flavors", timeout=5)
    # One request, whatever its query: two faults, then one through.
    assert statuses == [503, 503, 200, 503, 503, 200]
    assert other.status_code == 503  # another request has a streak of its own
