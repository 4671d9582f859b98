"""A minimal Keystone v3 token API over real HTTP, for auth tests.

It answers ``POST /v3/auth/tokens`` for the password and application
credential methods with a token and a service catalog whose compute
endpoint is the one given, and records every request it gets.
"""

import json
import threading
import wsgiref.simple_server
from socketserver import ThreadingMixIn

TOKEN = "fake-keystone-token"


class _Server(ThreadingMixIn, wsgiref.simple_server.WSGIServer):
    daemon_threads = True


class _QuietHandler(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class FakeKeystone:
    def __init__(self, compute_endpoint: str, region: str = "RegionOne"):
        self.compute_endpoint = compute_endpoint
        self.region = region
        self.requests: list[dict] = []
        self._server = wsgiref.simple_server.make_server(
            "127.0.0.1", 0, self._app, server_class=_Server,
            handler_class=_QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}/v3"

    def __enter__(self) -> "FakeKeystone":
        threading.Thread(target=self._server.serve_forever,
                         daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _app(self, environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = json.loads(environ["wsgi.input"].read(length) or b"{}")
        self.requests.append({"method": environ["REQUEST_METHOD"],
                              "path": environ["PATH_INFO"], "body": body})
        path = environ["PATH_INFO"].rstrip("/")
        if path == "/v3":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps({"version": {
                "id": "v3.14", "status": "stable",
                "links": [{"rel": "self", "href": self.url + "/"}],
                "media-types": []}}).encode()]
        if path != "/v3/auth/tokens":
            start_response("404 Not Found", [])
            return [b""]
        start_response("201 Created", [("Content-Type", "application/json"),
                                       ("X-Subject-Token", TOKEN)])
        return [json.dumps({"token": self._token()}).encode()]

    def _token(self) -> dict:
        endpoints = [{"id": iface, "interface": iface, "region": self.region,
                      "region_id": self.region, "url": self.compute_endpoint}
                     for iface in ("internal", "public")]
        return {
            "methods": ["password"],
            "expires_at": "2999-01-01T00:00:00.000000Z",
            "issued_at": "2026-01-01T00:00:00.000000Z",
            "user": {"id": "u1", "name": "recovery",
                     "domain": {"id": "default", "name": "Default"}},
            "project": {"id": "admin", "name": "admin",
                        "domain": {"id": "default", "name": "Default"}},
            "roles": [{"id": "r1", "name": "admin"}],
            "catalog": [{"type": "compute", "name": "nova", "id": "s1",
                         "endpoints": endpoints}],
        }
