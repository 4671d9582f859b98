"""Nova's transport: the HTTP session every call goes through, and the
one place where its errors become recovery's.

- The session waits its turn under the rate limiter before each request,
  keeps a pool of connections sized from the config at use time, and
  checks the running task's guard at the last moment a request can still
  be kept from Nova (before each write to the socket).
- ``translate`` turns novaclient's and keystoneauth's errors into
  ``recovery.exception``'s, telling a request that was never sent
  (``never_sent``) from one whose outcome is unknown.
"""

import logging
import os
import urllib.parse
from collections.abc import Callable
from typing import Any

import requests
import urllib3
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from novaclient import exceptions as nova_exc

from recovery import concurrency
from recovery import exception
from recovery.ratelimit import RateLimiter

LOG = logging.getLogger(__name__)


def no_guard() -> None:
    pass


# The guard of the Nova call the running task is making, if any.
GUARD = concurrency.TaskLocal()


def check_guard() -> None:
    guard = GUARD.get()
    if guard is not None:
        guard()


class _GuardedHTTPConnection(urllib3.connection.HTTPConnection):
    """Checks the running task's guard before each write to the socket:
    the last moment a request can still be kept from Nova. A process that
    froze anywhere between its turn in the queue and this write (in
    keystoneauth, requests, urllib3) sends nothing when it wakes up past
    its lease; if it froze between two writes of one request, the rest is
    not written and Nova never gets a whole request."""

    def send(self, data: Any) -> None:
        check_guard()
        super().send(data)


class _GuardedHTTPSConnection(urllib3.connection.HTTPSConnection):
    __doc__ = _GuardedHTTPConnection.__doc__

    def send(self, data: Any) -> None:
        check_guard()
        super().send(data)


class _GuardedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class _GuardedAdapter(ks_session.TCPKeepAliveAdapter):
    """keystoneauth1's adapter (TCP keepalive), whose direct connections
    check the guard just before they write (behind a proxy, the session's
    check is the last one).

    It keeps ``pool_size()`` connections per host, read before each
    request: the size follows the options it comes from when a reload
    changes them, as every other mutable option does."""

    def __init__(self, pool_size: Callable[[], int], **kwargs: Any):
        self._pool_size = pool_size
        self._resizing = concurrency.Lock()
        super().__init__(pool_maxsize=pool_size(), **kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}

    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self._fit_pool()
        return super().send(request, *args, **kwargs)

    def _fit_pool(self) -> None:
        """A new pool of the size asked for, once it changed. Requests
        in flight finish on the old one, which closes each connection
        given back to it."""
        size = self._pool_size()
        if size == self._pool_maxsize:
            return
        with self._resizing:
            if size == self._pool_maxsize:
                return
            LOG.info("Nova's connection pool keeps %d connections per "
                     "host (was %d)", size, self._pool_maxsize)
            old = self.poolmanager
            self.init_poolmanager(self._pool_connections, size,
                                  block=self._pool_block)
            self.proxy_manager = {}
            old.clear()


class _ProxiesReadOnce(requests.Session):
    """A requests session that looks up the environment's proxy variables
    once per host, not once per request: each lookup scans the whole
    environment twice, the largest CPU cost requests adds to a call. The
    environment stays as it is while recovery runs; everything else is
    merged as requests does."""

    def __init__(self) -> None:
        super().__init__()
        self._environ_proxies: dict[tuple[str, str, str | None],
                                    dict[str, str]] = {}

    def merge_environment_settings(self, url: str, proxies: Any,
                                   stream: Any, verify: Any,
                                   cert: Any) -> dict[str, Any]:
        if not self.trust_env:
            return super().merge_environment_settings(
                url, proxies, stream, verify, cert)
        proxies = {} if proxies is None else proxies
        no_proxy = proxies.get("no_proxy")
        parts = urllib.parse.urlsplit(url)
        key = (parts.scheme, parts.netloc, no_proxy)
        found = self._environ_proxies.get(key)
        if found is None:
            found = requests.utils.get_environ_proxies(url,
                                                       no_proxy=no_proxy)
            self._environ_proxies[key] = found
        for name, value in found.items():
            proxies.setdefault(name, value)
        if verify is True or verify is None:
            verify = (os.environ.get("REQUESTS_CA_BUNDLE")
                      or os.environ.get("CURL_CA_BUNDLE") or verify)
        merge = requests.sessions.merge_setting
        return {"proxies": merge(proxies, self.proxies),
                "stream": merge(stream, self.stream),
                "verify": merge(verify, self.verify),
                "cert": merge(cert, self.cert)}


class RateLimitedSession(ks_session.Session):
    """A keystoneauth1 session whose every request (each page of a
    listing, each retry) first waits for its turn under ``limiter``, with
    up to ``pool_size()`` connections kept open."""

    def __init__(self, *, limiter: RateLimiter,
                 pool_size: Callable[[], int], **kwargs: Any) -> None:
        kwargs.setdefault("session", _ProxiesReadOnce())
        super().__init__(**kwargs)
        self._limiter = limiter
        adapter = _GuardedAdapter(
            pool_size, tls_ciphers=kwargs.get("tls_ciphers"),
            tls_min_version=kwargs.get("tls_min_version"))
        for scheme in list(self.session.adapters):
            self.session.mount(scheme, adapter)

    def request(self, url: str, method: str, **kwargs: Any) -> Any:
        self._limiter.acquire()
        # A run's lease may have been lost while this request queued (the
        # process froze, say): it is not sent then.
        check_guard()
        return super().request(url, method, **kwargs)


class RateLimitedSessionLoader(ks_loading.session.Session):
    """keystoneauth1's own session loader (the ``[nova]`` TLS and timeout
    options), building a ``RateLimitedSession``."""

    @property
    def plugin_class(self) -> type[ks_session.Session]:
        return RateLimitedSession


def translate(what: str, exc: Exception) -> exception.RecoveryError:
    if isinstance(exc, nova_exc.ClientException):
        kinds = {404: exception.NovaNotFound, 400: exception.NovaConflict,
                 409: exception.NovaConflict, 401: exception.NovaForbidden,
                 403: exception.NovaForbidden}
        kind = kinds.get(exc.code, exception.NovaError)
        return kind(f"Nova refused to {what}: {exc.message} "
                    f"(HTTP {exc.code})", status=exc.code,
                    request_id=exc.request_id)
    # No catalog entry, or no catalog at all (no auth, only Nova's URL).
    if isinstance(exc, (ks_exc.EndpointNotFound, ks_exc.MissingAuthPlugin)):
        return exception.ConfigError(
            f"no endpoint to {what}: {exc}. Check [nova] region_name and "
            f"valid_interfaces, or set endpoint_override (Nova), "
            f"placement_endpoint_override (Placement) or "
            f"image_endpoint_override (Glance)")
    if isinstance(exc, ks_exc.ConnectionError):
        not_sent = never_sent(exc)
        how = " (the request was never sent)" if not_sent else ""
        return exception.NovaUnreachable(
            f"could not reach Nova to {what}: {exc}{how}",
            not_sent=not_sent)
    if isinstance(exc, ks_exc.HttpError) and exc.http_status == 401:
        return exception.NovaForbidden(
            f"Keystone refused the [nova] credentials: {exc}",
            status=401, request_id=exc.request_id)
    return exception.NovaError(f"failed to {what}: {exc}")


# Errors that prove a request was never written to its socket: the
# connection was refused, or not made in time. urllib3's NewConnectionError
# is a ConnectTimeoutError; requests' ConnectTimeout is raised only while
# connecting.
_NOT_SENT = (urllib3.exceptions.ConnectTimeoutError,
             requests.exceptions.ConnectTimeout)


def never_sent(exc: BaseException) -> bool:
    """Whether the connection error ``exc`` (keystoneauth's, raised while
    handling requests' and urllib3's) proves the request never left.
    Anything else, a read timeout or a connection reset after the request
    was written, leaves its outcome unknown."""
    seen = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, _NOT_SENT):
            return True
        if isinstance(cause, urllib3.exceptions.MaxRetryError):
            cause = cause.reason
            continue
        inner = cause.args[0] if cause.args else None
        cause = (cause.__cause__ or cause.__context__
                 or (inner if isinstance(inner, BaseException) else None))
    return False

