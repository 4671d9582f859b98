"""WSGI application: parsing, microversions, auth, fault injection."""

from __future__ import annotations

import http
import json
import re
import socket
import struct
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

from tests.fakenova import errors
from tests.fakenova import glance
from tests.fakenova import handlers
from tests.fakenova import placement
from tests.fakenova import views
from tests.fakenova.state import Injection
from tests.fakenova.state import State

Response = tuple[int, Any, list[tuple[str, str]]]
_ACTION_PATH = re.compile(r"^/v2\.1/servers/[^/]+/action$")
_VERSION_PATH = re.compile(r"^/v2\.1/?$")
_MALFORMED = object()


class NovaApp:
    """The compute API under /v2.1, answering like nova-api."""

    def __init__(self, state: State) -> None:
        self.state = state

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.time()
        req = self._parse(environ)
        action = None
        if req.method == "POST" and _ACTION_PATH.match(req.path):
            action = handlers.action_name(req.body)
        rule = self.state.take_injection(req.method, req.path, action)
        # Random latency, if set: outside the lock, as a busy API's.
        delay = self.state.request_delay()
        if delay:
            self.state.stopping.wait(delay)
        status, body, headers = self._respond(environ, req, rule)
        with self.state.lock:
            self.state.requests.append({
                "method": req.method, "path": req.path,
                "query": dict(req.query), "action": action,
                "status": status, "time": started,
                # Which client sent it: each engine names itself there.
                "user_agent": environ.get("HTTP_USER_AGENT", "")})
        payload = b"" if body is None else json.dumps(body).encode()
        request_id = f"req-{uuid.uuid4()}"
        headers = headers + [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(payload))),
            ("x-openstack-request-id", request_id),
            ("x-compute-request-id", request_id)]
        phrase = http.HTTPStatus(status).phrase
        start_response(f"{status} {phrase}", headers)
        return [payload]

    # -- request parsing -------------------------------------------------
    def _parse(self, environ: dict[str, Any]) -> handlers.Request:
        host = environ.get("HTTP_HOST") or (
            f"{environ['SERVER_NAME']}:{environ['SERVER_PORT']}")
        root = f"http://{host}"
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""),
                               keep_blank_values=True))
        return handlers.Request(
            method=environ["REQUEST_METHOD"].upper(),
            path=environ.get("PATH_INFO", "") or "/", query=query,
            body=self._read_body(environ), base=f"{root}/v2.1", root=root)

    @staticmethod
    def _read_body(environ: dict[str, Any]) -> Any:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        raw = environ["wsgi.input"].read(length) if length > 0 else b""
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return _MALFORMED

    # -- answering -------------------------------------------------------
    def _respond(self, environ: dict[str, Any], req: handlers.Request,
                 rule: Injection | None) -> Response:
        if rule is not None and not rule.after:
            self.state.stopping.wait(rule.delay)
            if rule.reset:
                return self._drop(environ)
            if rule.status:
                return self._injected(environ, rule.status)
        response = self._dispatch(environ, req)
        if rule is not None and rule.after:
            self.state.stopping.wait(rule.delay)
            if rule.reset:
                return self._drop(environ)
            if rule.status:
                return self._injected(environ, rule.status)
        return response

    @staticmethod
    def _drop(environ: dict[str, Any]) -> Response:
        """Close the client's connection with a reset, unanswered. What
        the WSGI server then writes goes nowhere (it ignores the broken
        pipe); the requests record says 502."""
        sock = environ["fakenova.socket"]
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
        return 502, None, []

    def _injected(self, environ: dict[str, Any], status: int) -> Response:
        try:
            headers = self._version_headers(self._version(environ))
        except errors.ApiError:
            headers = []
        return status, errors.fault_body(status), headers

    def _version(self, environ: dict[str, Any]) -> tuple[int, int]:
        return errors.requested_version(
            environ.get("HTTP_OPENSTACK_API_VERSION"),
            environ.get("HTTP_X_OPENSTACK_NOVA_API_VERSION"),
            self.state.microversion_max)

    @staticmethod
    def _version_headers(version: tuple[int, int]) -> list[tuple[str, str]]:
        text = errors.format_version(version)
        return [("OpenStack-API-Version", f"compute {text}"),
                ("X-OpenStack-Nova-API-Version", text),
                ("Vary", "OpenStack-API-Version, "
                         "X-OpenStack-Nova-API-Version")]

    def _dispatch(self, environ: dict[str, Any],
                  req: handlers.Request) -> Response:
        max_version = self.state.microversion_max
        if req.path == "/" and req.method == "GET":
            return 200, views.versions_doc(req.root, max_version), []
        if req.path.startswith(placement.PREFIX):
            status, body = placement.respond(self.state, req.method,
                                             req.path, req.query)
            return status, body, []
        if req.path.startswith(glance.PREFIX + "/"):
            status, body = glance.respond(self.state, req.method, req.path)
            return status, body, []
        if not req.path.startswith("/v2.1"):
            return 404, errors.not_found(
                "The resource could not be found.").body(), []
        try:
            version = self._version(environ)
        except errors.ApiError as exc:
            return exc.status, exc.body(), []
        headers = self._version_headers(version)
        if _VERSION_PATH.match(req.path) and req.method == "GET":
            return 200, {"version": views.version_doc(
                req.root, max_version)}, headers
        ctx = errors.context_from_token(environ.get("HTTP_X_AUTH_TOKEN"),
                                        version)
        try:
            status, body = self._call_handler(ctx, req)
        except errors.ApiError as exc:
            status, body = exc.status, exc.body()
        return status, body, headers

    def _call_handler(self, ctx: errors.RequestContext,
                      req: handlers.Request) -> tuple[int, Any]:
        if req.body is _MALFORMED:
            raise errors.bad_request("Malformed request body")
        handler, params = handlers.route(req.method, req.path[len("/v2.1"):])
        try:
            with self.state.lock:
                return handler(self.state, ctx, req, **params)
        except errors.ApiError:
            raise
        except Exception:  # a bug in the fake: answer like nova-api
            traceback.print_exc(file=sys.stderr)
            return 500, errors.fault_body(500)
