"""Who may call the notification API (``[api] auth_strategy``); what
each caller may do is the policy's (recovery.api.policy), checked
against the credentials put here in the WSGI environ.

The version documents at ``/`` and ``/v1`` are public, as in every
OpenStack API: clients discover the version before they authenticate.
So is ``/healthcheck`` (recovery.api.health): health probes carry no
token.
"""

import hmac
import ipaddress
import logging
import socket
from typing import Any

import webob
import webob.dec

from recovery import exception
from recovery.api import health
from recovery.api import policy
from recovery.api.http import error
from recovery.policies import metrics

LOG = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"", "/", "/v1", "/v1/", health.PATH})
# Who a request with the static token is, for the record: whoever holds
# the token.
TOKEN_HOLDER = "operator (static API token)"


def _unauthorized(message: str) -> webob.Response:
    response = error(401, message)
    response.headers["WWW-Authenticate"] = 'Token realm="recovery"'
    return response


class Public:
    """Send ``paths`` (the version documents, and more) past
    authentication."""

    def __init__(self, app: Any, protected: Any, paths: frozenset[str]):
        self.app, self.protected, self.paths = app, protected, paths

    def __call__(self, environ: dict, start_response: Any) -> Any:
        target = (self.app if environ.get("PATH_INFO", "") in self.paths
                  else self.protected)
        return target(environ, start_response)


class StaticToken:
    """One shared token, compared in constant time."""

    def __init__(self, app: Any, token: str):
        self.app, self._token = app, token.encode()

    @webob.dec.wsgify
    def __call__(self, req: webob.Request) -> Any:
        sent = req.headers.get("X-Auth-Token")
        if not sent:
            return _unauthorized("X-Auth-Token is required")
        if not hmac.compare_digest(sent.encode(), self._token):
            LOG.warning("Refused a request with a wrong token from %s",
                        req.remote_addr)
            return _unauthorized("the token is not valid")
        # The token's holder is the operator: an admin.
        req.environ[policy.CREDENTIALS] = policy.OPERATOR
        req.environ[policy.CALLER] = TOKEN_HOLDER
        return req.get_response(self.app)


class KeystoneIdentity:
    """After keystonemiddleware: the caller's credentials, as its
    headers (which it set, dropping any the caller sent) say."""

    def __init__(self, app: Any):
        self.app = app

    @webob.dec.wsgify
    def __call__(self, req: webob.Request) -> Any:
        if req.headers.get("X-Identity-Status") != "Confirmed":
            return _unauthorized("a valid Keystone token is required")
        req.environ[policy.CREDENTIALS] = policy.keystone_credentials(
            req.environ)
        req.environ[policy.CALLER] = (req.headers.get("X-User-Name")
                                      or req.headers.get("X-User-Id"))
        return req.get_response(self.app)


class MetricsRule:
    """``/metrics`` served with the API: behind its policy rule."""

    def __init__(self, app: Any, conf: Any):
        self.app = app
        self.gate = policy.Gate(app, policy.from_conf(conf),
                                metrics.METRICS % "index")

    def __call__(self, environ: dict, start_response: Any) -> Any:
        target = (self.gate if environ.get("PATH_INFO") == metrics.PATH
                  else self.app)
        return target(environ, start_response)


def is_loopback(host: str) -> bool:
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(
        ipaddress.ip_address(a.split("%")[0]).is_loopback
        for a in addresses)


def read_token(path: str | None) -> str:
    if not path:
        raise exception.ConfigError(
            "[api] auth_strategy = token needs [api] token_file")
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError as exc:
        raise exception.ConfigError(
            f"[api] token_file {path} cannot be read: {exc.strerror}"
        ) from exc
    if len(token) < 16:
        raise exception.ConfigError(
            f"[api] token_file {path} holds a token shorter than 16 "
            f"characters; use a long random one (e.g. openssl rand -hex "
            f"32)")
    return token


def protect(app: Any, conf: Any,
            public: frozenset[str] = frozenset()) -> Any:
    """Wrap ``app`` per ``[api] auth_strategy``, the version documents
    and ``public`` paths left open; refuse a config that would expose an
    unauthenticated API beyond loopback."""
    if conf.api.auth_strategy == "noauth":
        if not is_loopback(conf.api.host):
            raise exception.ConfigError(
                f"[api] auth_strategy = noauth is allowed only with a "
                f"loopback [api] host, not {conf.api.host}: use keystone "
                f"or token")
        return app
    return Public(app, _authenticated(MetricsRule(app, conf), conf),
                  PUBLIC_PATHS | public)


def guard(app: Any, conf: Any, host: str) -> Any:
    """The metrics ``app`` served on its own ``host``: open on loopback,
    otherwise behind the API's auth and the metrics rule (refused if the
    API has no auth)."""
    if is_loopback(host):
        return app
    if conf.api.auth_strategy == "noauth":
        raise exception.ConfigError(
            f"{host} is not a loopback address: it needs the API's auth, "
            f"and [api] auth_strategy is noauth; use keystone or token")
    return _authenticated(policy.Gate(app, policy.from_conf(conf),
                                      metrics.METRICS % "index"), conf)


def _authenticated(app: Any, conf: Any) -> Any:
    if conf.api.auth_strategy == "token":
        return StaticToken(app, read_token(conf.api.token_file))
    from keystonemiddleware import auth_token

    return auth_token.AuthProtocol(
        KeystoneIdentity(app),
        {"oslo_config_config": conf, "delay_auth_decision": False})
