"""A minimal Keystone v3 token API over real HTTP, for auth tests.

It answers ``POST /v3/auth/tokens`` with a token and a service catalog,
``GET /v3/auth/tokens`` (``X-Subject-Token``) to validate a token it
issued, as keystonemiddleware does, and records every request it gets.

By default anyone gets ``TOKEN`` (the password and application credential
methods), as the admin of project ``admin``, and the catalog has the
compute endpoint given. With ``users``, only their passwords are
accepted and each gets its own token: for ``nova_user``'s users, the
``user:project:roles`` form that the test Novas (``tests.fakenova``,
``tests.integration.realnova``) take their request context from.
``app_credential`` makes a user who authenticates with an application
credential's id and secret: its token says so (the
``application_credential`` method and section, with the credential's
access rules if it has any), with the credential's roles.
``endpoints`` adds services to the catalog; as in Keystone's catalog
templates, ``$(project_id)s`` in a URL is the token's project. A project
is named as given; its id has the form Keystone gives ids (32 hex
digits), as a service that reads ids from URLs expects.
"""

import dataclasses
import json
import threading
import uuid
import wsgiref.simple_server
from socketserver import ThreadingMixIn

TOKEN = "fake-keystone-token"


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    password: str | None    # None: any credentials, any method
    project: str            # the project's name
    roles: tuple[str, ...]
    token: str
    #: An application credential's id and secret, its only way in.
    credential: tuple[str, str] | None = None
    access_rules: tuple[dict, ...] | None = None

    @property
    def project_id(self) -> str:
        """The project's id: 32 hex digits, the same in every run."""
        return uuid.uuid5(uuid.NAMESPACE_URL,
                          f"fakekeystone:project:{self.project}").hex


def nova_user(name: str, password: str, project: str,
              roles: tuple[str, ...]) -> User:
    """A user whose token is ``name:project:roles``."""
    return User(name, password, project, roles,
                f"{name}:{project}:{','.join(roles)}")


def app_credential(user: str, credential: str, secret: str, project: str,
                   roles: tuple[str, ...],
                   access_rules: tuple[dict, ...] | None = None) -> User:
    """``user``'s application credential ``credential`` (its id)."""
    return User(user, None, project, roles, f"app-cred:{credential}",
                (credential, secret), access_rules)


ANYONE = User("recovery", None, "admin", ("admin",), TOKEN)


class _Server(ThreadingMixIn, wsgiref.simple_server.WSGIServer):
    daemon_threads = True


class _QuietHandler(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class FakeKeystone:
    def __init__(self, compute_endpoint: str, region: str = "RegionOne",
                 users: tuple[User, ...] = (ANYONE,),
                 endpoints: dict[str, str] | None = None):
        self.region = region
        self._users = users
        self._tokens = {user.token: user for user in users}
        #: Service type -> URL; may be changed while serving.
        self.endpoints = {"compute": compute_endpoint, **(endpoints or {})}
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
        method = environ["REQUEST_METHOD"]
        self.requests.append({"method": method,
                              "path": environ["PATH_INFO"], "body": body})
        path = environ["PATH_INFO"].rstrip("/")
        if path == "/v3":
            return _reply(start_response, "200 OK", {"version": {
                "id": "v3.14", "status": "stable",
                "links": [{"rel": "self", "href": self.url + "/"}],
                "media-types": []}})
        if path != "/v3/auth/tokens":
            return _reply(start_response, "404 Not Found", None)
        if method == "POST":
            user = self._authenticate(body)
            if user is None:
                return _reply(start_response, "401 Unauthorized", None)
            return _reply(start_response, "201 Created",
                          {"token": self._token(user)}, user.token)
        # Validation: the caller's token must be valid, then the subject.
        if environ.get("HTTP_X_AUTH_TOKEN") not in self._tokens:
            return _reply(start_response, "401 Unauthorized", None)
        subject = environ.get("HTTP_X_SUBJECT_TOKEN", "")
        if subject not in self._tokens:
            return _reply(start_response, "404 Not Found", None)
        return _reply(start_response, "200 OK",
                      {"token": self._token(self._tokens[subject])}, subject)

    def _authenticate(self, body: dict) -> User | None:
        identity = body.get("auth", {}).get("identity", {})
        if "application_credential" in identity:
            sent = identity["application_credential"]
            for user in self._users:
                if user.credential == (sent.get("id"), sent.get("secret")):
                    return user
        sent = identity.get("password", {}).get("user", {})
        for user in self._users:
            if user.credential is not None:
                continue
            if user.password is None or (
                    user.name in (sent.get("name"), sent.get("id"))
                    and user.password == sent.get("password")):
                return user
        return None

    def _token(self, user: User) -> dict:
        catalog = [{"type": "identity", "name": "keystone", "id": "s0",
                    "endpoints": self._endpoints(self.url, user)}]
        catalog += [{"type": kind, "name": kind, "id": f"s{n}",
                     "endpoints": self._endpoints(url, user)}
                    for n, (kind, url) in enumerate(
                        self.endpoints.items(), start=1)]
        token = {
            "methods": ["password"],
            "expires_at": "2999-01-01T00:00:00.000000Z",
            "issued_at": "2026-01-01T00:00:00.000000Z",
            "user": {"id": user.name, "name": user.name,
                     "domain": {"id": "default", "name": "Default"}},
            "project": {"id": user.project_id, "name": user.project,
                        "domain": {"id": "default", "name": "Default"}},
            "roles": [{"id": role, "name": role} for role in user.roles],
            "catalog": catalog,
        }
        if user.credential is not None:
            token["methods"] = ["application_credential"]
            token["application_credential"] = {
                "id": user.credential[0], "name": user.credential[0],
                "restricted": True}
            if user.access_rules is not None:
                token["application_credential"]["access_rules"] = list(
                    user.access_rules)
        return token

    def _endpoints(self, url: str, user: User) -> list[dict]:
        url = url.replace("$(project_id)s", user.project_id)
        return [{"id": iface, "interface": iface, "region": self.region,
                 "region_id": self.region, "url": url}
                for iface in ("admin", "internal", "public")]


def _reply(start_response, status: str, body: dict | None,
           subject: str | None = None):
    headers = [("Content-Type", "application/json")]
    if subject is not None:
        headers.append(("X-Subject-Token", subject))
    start_response(status, headers)
    return [json.dumps(body).encode() if body is not None else b""]
