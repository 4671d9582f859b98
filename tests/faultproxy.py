"""An HTTP proxy that injects faults between recovery and a Nova API.

    with FaultProxy("http://127.0.0.1:8774/v2.1", seed=7, rules=[
            Rule.once("late_delivery", action="evacuate"),
            Rule.mix({"503": 0.05, "reset_after": 0.02})]) as proxy:
        ... point recovery's [nova] endpoint at proxy.endpoint ...
        proxy.drain()               # every held request delivered
        proxy.records               # what arrived, and what was done to it

It forwards each request, unchanged, to the upstream server, and answers
the client with the upstream answer, unless a rule picks a fault for it:

- ``503``: answer 503 without forwarding, as a load balancer with no
  backend does (nothing happened);
- ``reset_before``: reset the client's connection (TCP RST) without
  forwarding;
- ``reset_after``: forward, let the upstream act, then reset the client
  instead of answering;
- ``late_answer``: forward at once, hold the answer until the client has
  given up (closed its connection), then drop it;
- ``late_delivery``: hold the request until the client has given up, then
  deliver it anyway (as a request queued in a load balancer or an API
  worker), ``late_by`` seconds later; its answer is discarded.

Rules are tried in order; the first that matches a request (method, a
regular expression searched in the path and query, and the server action
named by a JSON body such as ``{"lock": ...}``) and has uses left decides,
drawing from ``random.Random(seed)``: one fault, or none, by the rule's
fractions. Rules with a fraction of 1 and ``times=1`` pick one request.
A rule's ``max_in_a_row`` lets the next try of a request through after
that many faults in a row, so that a client's retries can outlast them.

HTTP/1.1 with keep-alive on the client side (recovery's requests pool),
``Content-Length`` or chunked request bodies, one upstream connection per
request. The ``Host`` header is passed through, so the links Nova builds
from it already name the proxy; pagination hrefs (``*_links``) that name
the upstream's address anyway are rewritten to the proxy's. Nothing else
is changed. Threads are fine: this is a test tool.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import random
import re
import select
import socket
import struct
import threading
import time
import urllib.parse
from collections import Counter
from typing import Any

FAULTS = ("503", "reset_before", "reset_after", "late_answer",
          "late_delivery")
#: Headers that describe one connection, not the message (RFC 9110 7.6.1).
HOP_BY_HOP = frozenset((
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"))
MAX_HEAD = 65536
_BODY_503 = (b"<html><body><h1>503 Service Unavailable</h1>\n"
             b"No server is available to handle this request.\n"
             b"</body></html>\n")


@dataclasses.dataclass(frozen=True)
class Match:
    """Which requests a rule is about; ``None`` matches anything."""

    method: str | None = None
    path: str | None = None     # a regular expression, searched
    action: str | None = None   # the server action, e.g. "evacuate"

    def matches(self, method: str, path: str, action: str | None) -> bool:
        return ((self.method is None or self.method == method)
                and (self.path is None or re.search(self.path, path)
                     is not None)
                and (self.action is None or self.action == action))


@dataclasses.dataclass
class Rule:
    """Faults for the requests ``match`` selects: each fault with the
    fraction of those requests it hits (together at most 1)."""

    faults: dict[str, float]
    match: Match = Match()
    #: How many requests the rule may fault; None: no limit.
    times: int | None = None
    #: late_delivery: how long after the client gave up (default: the
    #: proxy's ``late_by``); a ``(low, high)`` pair draws it uniformly.
    late_by: float | tuple[float, float] | None = None
    #: late_delivery: also wait until a request matching this, sent after
    #: the held one, has been answered by the upstream (bounded by the
    #: proxy's ``hold``): e.g. deliver a held ``lock`` after the
    #: ``unlock`` that follows it.
    after: Match | None = None
    #: At most this many faults in a row for one request (its method,
    #: path without the query, and action); the next try goes through.
    #: None: no limit. A transient fault, as a client's retries meet it.
    max_in_a_row: int | None = None
    used: int = 0
    #: Faults in a row so far, by request.
    streaks: Counter[tuple[str, str, str | None]] = dataclasses.field(
        default_factory=Counter)

    def __post_init__(self) -> None:
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; "
                             f"known: {', '.join(FAULTS)}")
        if sum(self.faults.values()) > 1.0 + 1e-9:
            raise ValueError("the fractions of a rule add up to more "
                             "than 1")

    @classmethod
    def once(cls, fault: str, *, method: str | None = "POST",
             path: str | None = None, action: str | None = None,
             times: int = 1,
             late_by: float | tuple[float, float] | None = None,
             after: Match | None = None) -> Rule:
        """``fault`` on the first ``times`` matching requests."""
        return cls({fault: 1.0}, Match(method, path, action), times=times,
                   late_by=late_by, after=after)

    @classmethod
    def mix(cls, faults: dict[str, float], *, method: str | None = None,
            path: str | None = None, action: str | None = None,
            times: int | None = None,
            late_by: float | tuple[float, float] | None = None,
            max_in_a_row: int | None = None) -> Rule:
        """Each fault on its fraction of the matching requests."""
        return cls(dict(faults), Match(method, path, action), times=times,
                   late_by=late_by, max_in_a_row=max_in_a_row)

    def usable(self) -> bool:
        return self.times is None or self.used < self.times

    def draw(self, rng: random.Random, record: Record) -> str | None:
        """One fault or none for ``record``, by the fractions and the
        limit in a row."""
        roll, edge, drawn = rng.random(), 0.0, None
        for fault, fraction in self.faults.items():
            edge += fraction
            if roll < edge:
                drawn = fault
                break
        key = (record.method, record.path.split("?", 1)[0], record.action)
        if drawn is None or (self.max_in_a_row is not None
                             and self.streaks[key] >= self.max_in_a_row):
            self.streaks.pop(key, None)
            return None
        self.streaks[key] += 1
        return drawn


@dataclasses.dataclass
class Record:
    """One request the proxy received, and what became of it."""

    n: int
    time: float
    method: str
    path: str
    action: str | None
    fault: str | None = None
    #: The upstream's status, once it answered (None: never forwarded,
    #: not answered yet, or the upstream connection failed).
    status: int | None = None
    forwarded: float | None = None   # when it was sent upstream
    #: The proxy sent the client an answer; set before the bytes go, so
    #: a client that has read its answer always sees it here.
    answered: bool = False
    client_gone: float | None = None  # when the client gave up (held)
    error: str | None = None         # the upstream could not be reached
    late_by: float | None = None     # late_delivery: after the client gave up

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class _Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower()
                  for t in (self.header("connection") or "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


class FaultProxy:
    """The proxy, on ``127.0.0.1``; ``endpoint`` is the upstream URL with
    the proxy's address."""

    def __init__(self, upstream: str, *, seed: int = 0,
                 rules: list[Rule] | tuple[Rule, ...] = (),
                 late_by: float = 0.5, hold: float = 60.0,
                 upstream_timeout: float = 120.0) -> None:
        """``late_by``: how long after its client gave up a held request
        is delivered; ``hold``: the most a held request or answer waits
        for its client to give up (a client without a timeout)."""
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or parsed.hostname is None:
            raise ValueError(f"need an http:// upstream, not {upstream!r}")
        self.upstream = upstream.rstrip("/")
        self._target = (parsed.hostname, parsed.port or 80)
        self._upstream_netloc = parsed.netloc
        self._upstream_path = parsed.path.rstrip("/")
        self.rules = list(rules)
        self.late_by = late_by
        self.hold = hold
        self.upstream_timeout = upstream_timeout
        self._rng = random.Random(seed)
        self._lock = threading.Condition()
        self._records: list[Record] = []
        self._clients: set[socket.socket] = set()
        #: late_delivery requests not delivered yet, by number.
        self._held: set[int] = set()
        self._listener: socket.socket | None = None
        self._closed = False
        self.port = 0

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> FaultProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True,
                         name=f"faultproxy-{self.port}").start()
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}{self._upstream_path}"

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every held request has been delivered (or has
        failed to be); whether none is left."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._held, timeout)

    def close(self) -> None:
        """Stop accepting and reset every client connection; held
        requests are still delivered (see ``drain``)."""
        with self._lock:
            self._closed = True
            listener, self._listener = self._listener, None
            clients, self._clients = self._clients, set()
        if listener is not None:
            _shutdown(listener)
        for client in clients:
            _reset(client)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what happened -------------------------------------------------------
    @property
    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)

    def faults(self) -> Counter[str]:
        """How many requests got each fault."""
        return Counter(r.fault for r in self.records if r.fault)

    # -- serving -------------------------------------------------------------
    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    _reset(client)
                    continue
                self._clients.add(client)
            threading.Thread(target=self._serve, args=(client,),
                             daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        """Requests of one client connection, one after another."""
        reader = client.makefile("rb")
        keep = True
        try:
            while keep:
                try:
                    request = _read_request(reader)
                except (OSError, ValueError):
                    break
                if request is None:
                    break
                keep = self._handle(client, request)
        finally:
            reader.close()
            with self._lock:
                self._clients.discard(client)
            if keep:
                _shutdown(client)
            else:
                _reset(client)

    def _handle(self, client: socket.socket, request: _Request) -> bool:
        """Serve one request; whether the connection may carry more."""
        action = _action(request)
        with self._lock:
            record = Record(len(self._records), time.time(), request.method,
                            request.target, action)
            self._records.append(record)
            fault, rule, late_by = self._decide(record)
            record.fault = fault
            if fault == "late_delivery":
                record.late_by = late_by
                self._held.add(record.n)
        if fault is None:
            answer = self._forward(record, request)
            if answer is None:
                _send(client, _reply(502, b"upstream unreachable\n", False))
                return False
            record.answered = True
            _send(client, self._response(request, *answer))
            return request.keep_alive
        if fault == "503":
            record.answered = True
            _send(client, _reply(503, _BODY_503, request.keep_alive))
            return request.keep_alive
        if fault == "reset_before":
            return False
        if fault == "reset_after":
            self._forward(record, request)
            return False
        if fault == "late_answer":
            self._forward(record, request)
            record.client_gone = _wait_gone(client, self.hold)
            return False
        # late_delivery
        record.client_gone = _wait_gone(client, self.hold)
        assert rule is not None
        threading.Thread(
            target=self._deliver_late,
            args=(record, request, late_by, rule.after), daemon=True).start()
        return False

    def _decide(self, record: Record
                ) -> tuple[str | None, Rule | None, float]:
        """The fault for a request, its rule, and (late_delivery) how
        late it is delivered; under the lock, so the draws follow the
        requests' arrival order."""
        for rule in self.rules:
            if rule.usable() and rule.match.matches(
                    record.method, record.path, record.action):
                fault = rule.draw(self._rng, record)
                if fault is not None:
                    rule.used += 1
                late_by = self.late_by if rule.late_by is None \
                    else rule.late_by
                if isinstance(late_by, tuple):
                    late_by = self._rng.uniform(*late_by)
                return fault, rule, late_by
        return None, None, 0.0

    def _deliver_late(self, record: Record, request: _Request,
                      late_by: float, after: Match | None) -> None:
        try:
            if after is not None:
                def answered() -> bool:
                    return any(r.n > record.n and r.status is not None
                               and after.matches(r.method, r.path, r.action)
                               for r in self._records)

                with self._lock:
                    self._lock.wait_for(answered, self.hold)
            time.sleep(late_by)
            self._forward(record, request)
        finally:
            with self._lock:
                self._held.discard(record.n)
                self._lock.notify_all()

    def _forward(self, record: Record, request: _Request
                 ) -> tuple[int, str, list[tuple[str, str]], bytes] | None:
        """Send the request upstream; its answer (None if unreachable)."""
        headers = {k: v for k, v in request.headers
                   if k.lower() not in HOP_BY_HOP
                   and k.lower() != "content-length"}
        if request.body or request.method in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(request.body))
        conn = http.client.HTTPConnection(*self._target,
                                          timeout=self.upstream_timeout)
        record.forwarded = time.time()
        try:
            conn.request(request.method, request.target,
                         body=request.body or None, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            answer = (resp.status, resp.reason, resp.getheaders(), body)
        except (OSError, http.client.HTTPException) as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            return None
        finally:
            conn.close()
        with self._lock:
            record.status = answer[0]
            self._lock.notify_all()
        return answer

    def _response(self, request: _Request, status: int, reason: str,
                  headers: list[tuple[str, str]], body: bytes) -> bytes:
        body = self._rewrite_links(request, headers, body)
        kept = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP
                and k.lower() != "content-length"]
        if request.method != "HEAD":
            kept.append(("Content-Length", str(len(body))))
        else:
            length = next((v for k, v in headers
                           if k.lower() == "content-length"), None)
            if length is not None:
                kept.append(("Content-Length", length))
            body = b""
        if not request.keep_alive:
            kept.append(("Connection", "close"))
        return _head(status, reason, kept) + body

    def _rewrite_links(self, request: _Request,
                       headers: list[tuple[str, str]], body: bytes) -> bytes:
        """Point ``*_links`` hrefs naming the upstream at the proxy."""
        kind = next((v for k, v in headers if k.lower() == "content-type"),
                    "")
        if ("json" not in kind or b"_links" not in body
                or self._upstream_netloc.encode() not in body):
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        own = request.header("host") or f"127.0.0.1:{self.port}"
        if not _rewrite(doc, self._upstream_netloc, own):
            return body
        return json.dumps(doc).encode()


# -- HTTP, by hand ------------------------------------------------------------
def _read_request(reader: Any) -> _Request | None:
    """The next request on the connection; None at its end."""
    line = reader.readline(MAX_HEAD)
    while line in (b"\r\n", b"\n"):  # tolerated between requests
        line = reader.readline(MAX_HEAD)
    if not line:
        return None
    method, target, version = line.decode("latin-1").split()
    headers: list[tuple[str, str]] = []
    size = len(line)
    while True:
        line = reader.readline(MAX_HEAD)
        size += len(line)
        if not line:
            raise ValueError("connection closed in a request head")
        if size > MAX_HEAD:
            raise ValueError("request head too large")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    request = _Request(method, target, version, headers, b"")
    if "chunked" in (request.header("transfer-encoding") or "").lower():
        request.body = _read_chunked(reader)
    else:
        length = int(request.header("content-length") or 0)
        request.body = reader.read(length) if length else b""
        if len(request.body) != length:
            raise ValueError("connection closed in a request body")
    return request


def _read_chunked(reader: Any) -> bytes:
    chunks = []
    while True:
        size = int(reader.readline(MAX_HEAD).split(b";")[0].strip(), 16)
        if size == 0:
            while reader.readline(MAX_HEAD) not in (b"\r\n", b"\n", b""):
                pass  # trailers, dropped
            return b"".join(chunks)
        chunks.append(reader.read(size))
        reader.readline(MAX_HEAD)


def _action(request: _Request) -> str | None:
    """The server action a ``POST .../action`` body names."""
    if request.method != "POST" or not request.target.split("?")[0] \
            .endswith("/action"):
        return None
    try:
        body = json.loads(request.body)
    except ValueError:
        return None
    if isinstance(body, dict) and body:
        return str(next(iter(body)))
    return None


def _head(status: int, reason: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _reply(status: int, body: bytes, keep_alive: bool) -> bytes:
    headers = [("Content-Type", "text/html"),
               ("Content-Length", str(len(body)))]
    if not keep_alive:
        headers.append(("Connection", "close"))
    reason = http.client.responses.get(status, "")
    return _head(status, reason, headers) + body


def _rewrite(doc: Any, old: str, new: str) -> bool:
    """Rewrite ``old`` to ``new`` as the netloc of hrefs under keys
    ending in ``_links``; whether any changed."""
    changed = False
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key.endswith("_links") and isinstance(value, list):
                for link in value:
                    href = link.get("href") if isinstance(link, dict) \
                        else None
                    if isinstance(href, str):
                        parts = urllib.parse.urlsplit(href)
                        if parts.netloc == old:
                            link["href"] = urllib.parse.urlunsplit(
                                parts._replace(netloc=new))
                            changed = True
            else:
                changed |= _rewrite(value, old, new)
    elif isinstance(doc, list):
        for item in doc:
            changed |= _rewrite(item, old, new)
    return changed


# -- sockets ------------------------------------------------------------------
def _send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass  # the client went away; its loss


def _wait_gone(sock: socket.socket, limit: float) -> float | None:
    """Wait until the client closes its end (it gave up), at most
    ``limit`` seconds; when it did, or None."""
    deadline = time.monotonic() + limit
    while (left := deadline - time.monotonic()) > 0:
        try:
            readable, _, _ = select.select([sock], [], [], left)
        except (OSError, ValueError):
            return time.time()
        if not readable:
            continue
        try:
            data = sock.recv(1, socket.MSG_PEEK)
        except OSError:
            return time.time()
        if not data:
            return time.time()
        # The client sent more on a connection still owed an answer: it
        # did not give up; keep waiting without reading it.
        time.sleep(0.05)
    return None


def _reset(sock: socket.socket) -> None:
    """Close with a TCP RST (SO_LINGER 0) instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def _shutdown(sock: socket.socket) -> None:
    """Close ``sock`` and wake a thread blocked on it."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
