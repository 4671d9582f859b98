"""The Nova facade: one small method per Nova action the flows need.

Why microversion 2.94, on purpose:
- 2.53 addresses services by UUID and lets force-down and disable be set
  with ``PUT /os-services/{id}``;
- 2.59 adds ``changes-since`` and migration UUIDs to ``os-migrations``,
  which lets one poll confirm every evacuation of a host;
- 2.73 records a reason with a lock, so operators see why an instance is
  locked and a crashed run's locks can be told apart from anyone else's;
- 2.94 is the last version where an evacuated ACTIVE instance comes back
  ACTIVE. From 2.95 it ends SHUTOFF and must be started again: one more
  call, and more downtime, per instance. The flow still restores the
  original state whatever state the evacuation ends in, so it is correct
  under either semantics.
Nova has offered 2.94 since the Zed release (2022).

Retries: only calls that are safe to repeat are retried here (reads, and
writes that set an absolute state). ``evacuate`` is never retried here;
the flow sends it again only once Nova shows it did not act on it and the
first can no longer arrive (README, "Requests whose outcome is unknown").
keystoneauth1's own connection retries are off, because they would also
repeat a POST whose response was lost.
"""

import collections
import copy
import logging
import os
import urllib.parse
from collections.abc import Callable
from typing import Any
from typing import TypeVar

import requests
import urllib3
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import identity as ks_identity
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from novaclient import client as nova_client
from novaclient import exceptions as nova_exc
from oslo_config import cfg

from recovery import concurrency
from recovery import exception
from recovery import hostnames
from recovery.concurrency import Clock
from recovery.conf import masakari
from recovery.evacuable import ListedServer
from recovery.metrics import METRICS
from recovery.models import Aggregate
from recovery.models import ComputeService
from recovery.models import Migration
from recovery.models import Need
from recovery.models import Server
from recovery.ratelimit import RateLimiter

LOG = logging.getLogger(__name__)

MICROVERSION = "2.94"
# Placement's: provider summaries with every resource class (1.27).
PLACEMENT_MICROVERSION = "1.29"
PLACEMENT_RESOURCES = ("VCPU", "MEMORY_MB", "DISK_GB")
# One listing's reads of the images it does not know take this long at
# most in all, and none is retried: Glance is on the path to a
# recovery's start only for images never read before.
IMAGE_TIMEOUT = 5.0
# A read is started only with this much of IMAGE_TIMEOUT left.
IMAGE_READ_MIN = 1.0
# After Glance failed to answer, it is asked nothing for this long.
IMAGE_RETRY_AFTER = 60.0
# Images whose properties the process keeps (the oldest read go first).
IMAGE_CACHE_SIZE = 10000
# Instances per page of the whole cloud's listing: Nova's default
# [api] max_limit (a smaller max_limit only means more pages).
ALL_SERVERS_PAGE = 1000
GROUP = "nova"
T = TypeVar("T")


def load_nova(conf: cfg.ConfigOpts, clock: Clock, *,
              timeout: float | None = None,
              retries: int | None = None,
              rate: float | None = None,
              user_agent: str = "recovery") -> "Nova":
    """Build the facade from ``[nova]``: one keystoneauth1 session, whose
    every HTTP request waits its turn under one rate limiter.

    ``timeout``, ``retries`` and ``rate`` override ``[nova]`` for callers
    that must answer quickly (the API's host check). ``user_agent`` tells
    Nova's logs which process sent each request.
    """
    # A Masakari config's Nova user and catalog entry are [nova]'s
    # defaults: before the auth loads.
    masakari.adopt(conf)
    group = conf[GROUP]
    overrides = {} if timeout is None else {"timeout": timeout}
    limiter = RateLimiter(
        group.max_requests_per_second if rate is None else rate, clock)
    # Keep a connection for every task that may be in flight at once (and
    # each host's poller), instead of opening one per request.
    hosts = conf.engine.max_concurrent_host_recoveries
    pool_size = hosts * (conf.host_failure_recovery_threads + 1)
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, GROUP)
        session = _RateLimitedSessionLoader().load_from_conf_options(
            conf, GROUP, auth=auth, limiter=limiter, pool_size=pool_size,
            **overrides)
    except ks_exc.ClientException as exc:
        raise exception.ConfigError(
            f"[nova] auth options are invalid: {exc}. Set [nova] auth_type "
            f"and its options (see etc/recovery.conf)") from exc
    if auth is None and not group.endpoint_override:
        raise exception.ConfigError(
            "[nova] has no auth_type and no endpoint_override: set "
            "auth_type = password (with auth_url, username, ...) or "
            "endpoint_override for a standalone Nova")
    client = nova_client.Client(
        MICROVERSION, session=session,
        endpoint_override=group.endpoint_override,
        endpoint_type=group.valid_interfaces,
        region_name=group.region_name,
        service_type=group.service_type,
        service_name=group.service_name, user_agent=user_agent,
        connect_retries=0, status_code_retries=0)
    def adapter(service_type: str, override: str | None) -> Any:
        return ks_adapter.Adapter(
            session, service_type=service_type,
            interface=group.valid_interfaces, region_name=group.region_name,
            endpoint_override=override, user_agent=user_agent,
            connect_retries=0, status_code_retries=0)

    return Nova(client, clock=clock,
                placement=adapter("placement",
                                  group.placement_endpoint_override),
                images=Images(adapter("image", group.image_endpoint_override),
                              clock, missing=_no_glance(
                                  auth, group.image_endpoint_override)),
                retries=group.api_retries if retries is None else retries)


def _no_glance(auth: Any, override: str | None) -> str | None:
    """Why there is no Glance to ask, or None: only an auth with a
    catalog (Keystone's) finds it there; another (admin_token, none)
    gives one URL, Nova's, for every service."""
    if override or isinstance(auth, ks_identity.BaseIdentityPlugin):
        return None
    return ("[nova] auth has no service catalog and [nova] "
            "image_endpoint_override is not set")


def _no_guard() -> None:
    pass


# The guard of the Nova call the running task is making, if any.
_GUARD = concurrency.TaskLocal()


def _check_guard() -> None:
    guard = _GUARD.get()
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
        _check_guard()
        super().send(data)


class _GuardedHTTPSConnection(urllib3.connection.HTTPSConnection):
    __doc__ = _GuardedHTTPConnection.__doc__

    def send(self, data: Any) -> None:
        _check_guard()
        super().send(data)


class _GuardedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class _GuardedAdapter(ks_session.TCPKeepAliveAdapter):
    """keystoneauth1's adapter (TCP keepalive), whose direct connections
    check the guard just before they write (behind a proxy, the session's
    check is the last one)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}


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
    up to ``pool_size`` connections kept open."""

    def __init__(self, *, limiter: RateLimiter, pool_size: int,
                 **kwargs: Any) -> None:
        kwargs.setdefault("session", _ProxiesReadOnce())
        super().__init__(**kwargs)
        self._limiter = limiter
        adapter = _GuardedAdapter(
            pool_maxsize=pool_size, tls_ciphers=kwargs.get("tls_ciphers"),
            tls_min_version=kwargs.get("tls_min_version"))
        for scheme in list(self.session.adapters):
            self.session.mount(scheme, adapter)

    def request(self, url: str, method: str, **kwargs: Any) -> Any:
        self._limiter.acquire()
        # A run's lease may have been lost while this request queued (the
        # process froze, say): it is not sent then.
        _check_guard()
        return super().request(url, method, **kwargs)


class _RateLimitedSessionLoader(ks_loading.session.Session):
    """keystoneauth1's own session loader (the ``[nova]`` TLS and timeout
    options), building a ``RateLimitedSession``."""

    @property
    def plugin_class(self) -> type[ks_session.Session]:
        return RateLimitedSession


def _translate(what: str, exc: Exception) -> exception.RecoveryError:
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
        not_sent = _never_sent(exc)
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


def _never_sent(exc: BaseException) -> bool:
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


class Images:
    """The properties of the images instances boot from, read from Glance
    once per image and kept for the process (the ``IMAGE_CACHE_SIZE``
    images used last; the ``hw_*`` properties only: what
    ``recovery.evacuable``'s rules read).

    Glance never fails a recovery nor holds it up for long: one call reads
    the images it does not know for ``IMAGE_TIMEOUT`` at most in all,
    with no retry; after Glance failed to answer, it is asked nothing
    for ``IMAGE_RETRY_AFTER``; an image not read has no properties, and
    Nova judges its instances."""

    def __init__(self, adapter: Any, clock: Clock, *,
                 missing: str | None = None):
        """``adapter``: a keystoneauth1 adapter for Glance; ``missing``:
        why there is no Glance to ask (an auth with no catalog and no
        ``image_endpoint_override``), or None."""
        self._adapter = adapter
        self._clock = clock
        self._missing = missing
        self._lock = concurrency.Lock()
        self._known: collections.OrderedDict[str, dict[str, str]] = (
            collections.OrderedDict())
        self._retry_at: float | None = None
        # Whether the log said that there is no image service.
        self._said = False

    def properties(self, image_ids: set[str], call: Callable[..., Any], *,
                   read: bool = True) -> dict[str, dict[str, str]]:
        """The properties of each image of ``image_ids`` that is known;
        with ``read``, the others are read through ``call`` (the facade's
        ``_call``) first, as far as Glance and the time allow."""
        found = {}
        with self._lock:
            for image_id in image_ids & self._known.keys():
                self._known.move_to_end(image_id)
                found[image_id] = self._known[image_id]
        unknown = sorted(image_ids - found.keys())
        if not unknown or not read:
            return found
        if self._missing is not None:
            self._say_missing()
            return found
        if not self._askable():
            return found
        deadline = self._clock.monotonic() + IMAGE_TIMEOUT
        for image_id in unknown:
            left = deadline - self._clock.monotonic()
            if left < IMAGE_READ_MIN:
                break
            try:
                found[image_id] = self._read(image_id, call, left)
            except exception.Interrupted:
                raise
            except exception.RecoveryError as exc:
                status = getattr(exc.__cause__, "http_status", None)
                if status == 404:
                    # Deleted, or not shown to recovery's user: Nova kept
                    # what it saved at boot.
                    found[image_id] = {}
                elif status is not None and status < 500:
                    LOG.warning("Image %s's properties not read: %s",
                                image_id, exc)
                    continue
                elif isinstance(exc, exception.ConfigError):
                    # No image service in the catalog: a setting.
                    self._missing = str(exc)
                    self._say_missing()
                    break
                else:
                    # Glance is not answering: none of the others either.
                    self._failed(exc)
                    break
            self._keep(image_id, found[image_id])
        return found

    def _say_missing(self) -> None:
        """Log, once, why there is no Glance to ask."""
        with self._lock:
            first, self._said = not self._said, True
        if first:
            LOG.info("Images' properties are not read: %s. An instance "
                     "whose image asks for a vTPM is tried, and Nova "
                     "refuses it", self._missing)

    def _askable(self) -> bool:
        """Whether Glance may be asked now, after its last failure."""
        with self._lock:
            return (self._retry_at is None
                    or self._clock.monotonic() >= self._retry_at)

    def _read(self, image_id: str, call: Callable[..., Any],
              timeout: float) -> dict[str, str]:
        what = f"show image {image_id}"
        path = f"/v2/images/{urllib.parse.quote(image_id, safe='')}"
        response = call(what, self._adapter.get, path, kind="image.show",
                        safe=False, timeout=timeout)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise exception.NovaError(
                f"failed to {what}: the answer is not an image (is "
                f"[nova] image_endpoint_override Glance's URL?)")
        return {key: str(value) for key, value in body.items()
                if key.startswith("hw_")
                and isinstance(value, (str, int, float))}

    def _keep(self, image_id: str, properties: dict[str, str]) -> None:
        with self._lock:
            self._known[image_id] = properties
            self._known.move_to_end(image_id)
            while len(self._known) > IMAGE_CACHE_SIZE:
                self._known.popitem(last=False)

    def _failed(self, exc: exception.RecoveryError) -> None:
        with self._lock:
            self._retry_at = self._clock.monotonic() + IMAGE_RETRY_AFTER
        LOG.warning("Images' properties not read for %.0fs: %s. An "
                    "instance whose image asks for a vTPM is tried, and "
                    "Nova refuses it", IMAGE_RETRY_AFTER, exc)


class Nova:
    """Every Nova call of the project, with timeouts and error translation.

    Timeouts and the rate limit come from the keystoneauth1 session
    (``[nova] timeout``, ``max_requests_per_second``).
    """

    def __init__(self, client: Any, *, retries: int, clock: Clock,
                 placement: Any = None, images: Images | None = None):
        """``placement``: a keystoneauth1 adapter for Placement, which
        ``free_room`` reads; ``images``: the images' properties, which
        every listed server gets (none without)."""
        self._client = client
        self._placement = placement
        self._images = images
        self._retries = retries
        self._clock = clock
        self._guard: Callable[[], None] = _no_guard

    def guarded(self, guard: Callable[[], None]) -> "Nova":
        """The same facade (session, rate limit), calling ``guard`` before
        every request it sends: a run's Nova, which stops the moment the
        run's lease is lost (``guard`` raises)."""
        clone = copy.copy(self)
        clone._guard = guard
        return clone

    def check(self) -> None:
        """Raise if this facade's run may no longer act (its guard: a
        lost lease raises ``LeaseLost``)."""
        self._guard()

    @property
    def evacuated_active_vm_state(self) -> str:
        """The vm_state an instance evacuated ACTIVE ends in: under
        ``MICROVERSION`` (2.94), active."""
        return "active"

    @property
    def retries(self) -> int:
        """How often a call that is safe to repeat is retried."""
        return self._retries

    def _call(self, what: str, fn: Callable[..., T], *args: Any,
              safe: bool = True, kind: str | None = None,
              in_flight: Callable[[exception.NovaError], None] | None = None,
              **kwargs: Any) -> T:
        """``fn`` (a novaclient call), retried if ``safe`` and the error
        leaves it uncertain; ``kind`` names it in the metrics (default:
        its manager and method, e.g. ``server.evacuate``). ``in_flight``
        is told of each attempt that may still reach Nova late, before
        any retry."""
        if kind is None:
            manager = type(fn.__self__).__name__.removesuffix("Manager")
            kind = f"{manager.lower()}.{fn.__name__}"
        attempt = 0
        while True:
            self._guard()
            # Checked again by the session once the request has waited
            # its turn, and by the connection before each write.
            _GUARD.set(self._guard)
            try:
                with METRICS.nova_call(kind):
                    return fn(*args, **kwargs)
            except (nova_exc.ClientException, ks_exc.ClientException) as exc:
                error = _translate(what, exc)
                if in_flight is not None and error.in_flight:
                    in_flight(error)
                if not (safe and isinstance(error, exception.NovaError)
                        and error.uncertain and attempt < self._retries):
                    raise error from exc
            finally:
                _GUARD.set(None)
            attempt += 1
            delay = min(0.5 * 2 ** attempt, 5.0)
            LOG.warning("Retrying in %.1fs (%d/%d): %s", delay, attempt,
                        self._retries, error)
            self._clock.sleep(delay)

    # -- compute services ------------------------------------------------
    def get_compute_service(self, host: str) -> ComputeService:
        found = self._call(f"list the compute service of {host}",
                           self._client.services.list,
                           host=host, binary="nova-compute")
        if not found:
            raise hostnames.unknown_host(host)
        return ComputeService.from_nova(found[0].to_dict())

    def match_compute_host(self, name: str) -> hostnames.HostMatch:
        """The compute host a monitor means by ``name``: Nova's exact
        name, or else the one host with its short name (a second
        request, for every compute service). Raises ``UnknownHost``."""
        try:
            service = self.get_compute_service(name)
        except exception.UnknownHost:
            found = self._call("list the compute services",
                               self._client.services.list,
                               binary="nova-compute")
            return hostnames.match(name, {s.host for s in found})
        return hostnames.HostMatch(service.host, hostnames.EXACT)

    def list_services(self) -> list[ComputeService]:
        """Every Nova service, of every binary: the control plane's
        heartbeats tell Nova's time, the computes' tell which are up."""
        found = self._call("list the Nova services",
                           self._client.services.list)
        return [ComputeService.from_nova(s.to_dict()) for s in found]

    def force_down(self, service: ComputeService,
                   forced: bool) -> ComputeService:
        """The service as Nova answers once forced_down is set (its state
        included: a forced-down service is down at once)."""
        found = self._call(f"set forced_down={forced} on {service.host}",
                           self._client.services.force_down, service.id,
                           forced)
        return ComputeService.from_nova(found.to_dict())

    def isolate(self, service: ComputeService,
                reason: str | None) -> ComputeService:
        """Force the service down and, unless ``reason`` is None, disable
        it with ``reason``: one ``PUT /os-services/{id}`` (2.53 takes
        both fields together), answered with the service as Nova saved
        it. Nova saves forced_down before it decides whether to ask the
        compute about the disable, so a forced-down host is not waited
        on, as when the two are sent one after the other."""
        body: dict[str, Any] = {"forced_down": True}
        if reason is not None:
            body.update(status="disabled", disabled_reason=reason)
        what = ("force down and disable" if reason is not None
                else "force down")
        _, found = self._call(f"{what} the compute service of {service.host}",
                              self._client.client.put,
                              f"/os-services/{service.id}", body=body,
                              kind="service.isolate")
        return ComputeService.from_nova(found["service"])

    def disable(self, service: ComputeService, reason: str) -> None:
        self._call(f"disable the compute service of {service.host}",
                   self._client.services.disable_log_reason,
                   service.id, reason)

    def enable(self, service: ComputeService) -> None:
        self._call(f"enable the compute service of {service.host}",
                   self._client.services.enable, service.id)

    # -- servers -----------------------------------------------------------
    def list_servers(self, host: str) -> list[Server]:
        """Every instance on ``host``, in one request per page (Nova links
        a next page only when a page is full; novaclient's ``limit=-1``
        would always ask once more, for an empty page)."""
        query = {"host": host, "all_tenants": "1"}
        return self._servers(self._pages(
            f"list the instances of {host}", "/servers/detail", query,
            "servers", kind="server.list"))

    def list_all_servers(self) -> list[Server]:
        """Every instance of the cloud, in all projects: one request per
        page of ``ALL_SERVERS_PAGE`` (Nova's default max_limit), whatever
        the number of hosts. The capacity view's one listing."""
        query = {"all_tenants": "1", "limit": str(ALL_SERVERS_PAGE)}
        return self._servers(self._pages(
            "list every instance", "/servers/detail", query, "servers",
            kind="server.list"))

    def get_server(self, uuid: str) -> Server:
        found = self._call(f"show instance {uuid}",
                           self._client.servers.get, uuid)
        [server] = self._servers([found.to_dict()], read_images=False)
        return server

    def _servers(self, items: list[dict[str, Any]], *,
                 read_images: bool = True) -> list[Server]:
        """Nova's servers, with their images' properties where known
        (with ``read_images``, read now for the images not known yet;
        a show, which the instances' polls make, only looks them up)."""
        servers = [ListedServer.from_nova(item) for item in items]
        if self._images is None:
            return servers
        known = self._images.properties(
            {s.specs.image_id for s in servers if s.specs.image_id},
            self._call, read=read_images)
        return [s.with_image(known[s.specs.image_id])
                if known.get(s.specs.image_id) else s for s in servers]

    def lock(self, uuid: str, reason: str,
             in_flight: Callable[[exception.NovaError], None] | None = None
             ) -> None:
        """Lock with ``reason``, retried: a repeated lock is harmless.
        ``in_flight`` is told of each attempt that may still reach Nova
        late, even after the unlock."""
        self._call(f"lock instance {uuid}", self._client.servers.lock,
                   uuid, reason=reason, in_flight=in_flight)

    def list_locked_servers(self) -> list[Server]:
        """Every locked instance, in all projects (the ``locked`` filter
        of 2.73): one request per page."""
        query = {"locked": "true", "all_tenants": "1"}
        return [Server.from_nova(s) for s in self._pages(
            "list the locked instances", "/servers/detail", query,
            "servers", kind="server.list")]

    def unlock(self, uuid: str) -> None:
        self._call(f"unlock instance {uuid}", self._client.servers.unlock,
                   uuid)

    def reset_state(self, uuid: str, state: str) -> None:
        self._call(f"reset instance {uuid} to {state}",
                   self._client.servers.reset_state, uuid, state)

    def stop(self, uuid: str) -> None:
        # A repeated stop answers 409, so it is not retried blindly; the
        # flow waits on the state instead.
        self._call(f"stop instance {uuid}", self._client.servers.stop,
                   uuid, safe=False)

    def start(self, uuid: str) -> None:
        self._call(f"start instance {uuid}", self._client.servers.start,
                   uuid, safe=False)

    def pause(self, uuid: str) -> None:
        # Like stop: a repeated pause answers 409; the flow waits on the
        # state instead.
        self._call(f"pause instance {uuid}", self._client.servers.pause,
                   uuid, safe=False)

    def suspend(self, uuid: str) -> None:
        self._call(f"suspend instance {uuid}", self._client.servers.suspend,
                   uuid, safe=False)

    def confirm_resize(self, uuid: str) -> None:
        # Run by the resize's source host; a repeated confirm answers 409.
        self._call(f"confirm the resize of instance {uuid}",
                   self._client.servers.confirm_resize, uuid, safe=False)

    def evacuate(self, uuid: str, host: str | None = None) -> None:
        """Evacuate once, to ``host`` (which the scheduler validates) or
        to where the scheduler picks."""
        where = f" to {host}" if host else ""
        self._call(f"evacuate instance {uuid}{where}",
                   self._client.servers.evacuate, uuid, host=host,
                   safe=False)

    # -- aggregates --------------------------------------------------------
    def list_aggregates(self) -> list[Aggregate]:
        """Every host aggregate, with its hosts and metadata: one
        request."""
        found = self._call("list the host aggregates",
                           self._client.aggregates.list)
        return [Aggregate(id=a.id, name=a.name, hosts=tuple(a.hosts or ()),
                          metadata=tuple(sorted(
                              (str(k), str(v))
                              for k, v in (a.metadata or {}).items())))
                for a in found]

    def aggregates_of(self, host: str) -> list[Aggregate]:
        return [a for a in self.list_aggregates() if host in a.hosts]

    def add_to_aggregate(self, aggregate: Aggregate, host: str) -> None:
        """Add ``host`` to ``aggregate``; already in it is done."""
        try:
            self._call(f"add {host} to aggregate {aggregate.name}",
                       self._client.aggregates.add_host, aggregate.id, host)
        except exception.NovaConflict as exc:
            if exc.status != 409:
                raise

    # -- Placement -----------------------------------------------------------
    def free_room(self) -> dict[str, Need]:
        """What each compute node has free of VCPU, MEMORY_MB and
        DISK_GB, by its resource provider's name (its hypervisor host
        name), as Placement counts it: allocation ratios and reserved
        amounts applied. Two requests, whatever the number of hosts."""
        if self._placement is None:
            raise exception.ConfigError("no Placement endpoint configured")
        version = {"microversion": PLACEMENT_MICROVERSION}
        names = self._placement_get(
            "list Placement's resource providers", "/resource_providers",
            "placement.resource_providers", version)
        # Every provider with room for the least of each class reports
        # its capacity and use: one request for all of them.
        query = ",".join(f"{rc}:1" for rc in PLACEMENT_RESOURCES)
        body = self._placement_get(
            "ask Placement for the hosts with room",
            f"/allocation_candidates?resources={query}",
            "placement.allocation_candidates", version)
        name = {p["uuid"]: p["name"] for p in names["resource_providers"]}
        room = {}
        for uuid, summary in body["provider_summaries"].items():
            free = {rc: max(0, int(r["capacity"]) - int(r["used"]))
                    for rc, r in summary["resources"].items()}
            if uuid in name:
                room[name[uuid]] = Need(*(free.get(rc, 0)
                                          for rc in PLACEMENT_RESOURCES))
        return room

    def _placement_get(self, what: str, path: str, kind: str,
                       version: dict[str, str]) -> Any:
        return self._call(what, self._placement.get, path, kind=kind,
                          **version).json()

    # -- migrations ----------------------------------------------------------
    def list_evacuations(self, source_host: str | None = None,
                         changes_since: str | None = None,
                         instance_uuid: str | None = None
                         ) -> list[Migration]:
        """Every evacuation (from ``source_host``; changed since a time;
        of one instance).

        One request per page: Nova links a next page only when a page is
        full (``migrations_links``), whatever its page size, so a poll
        with fewer migrations than a page costs one request.

        ``changes-since`` filters on ``updated_at``, which a migration
        Nova has just accepted does not have yet: only a query without it
        (by ``instance_uuid``) proves an evacuate was not accepted.
        """
        query = {"migration_type": "evacuation"}
        if source_host is not None:
            query["source_compute"] = source_host
        if changes_since is not None:
            query["changes-since"] = changes_since
        if instance_uuid is not None:
            query["instance_uuid"] = instance_uuid
        what = ("list the evacuations" if source_host is None
                else f"list the evacuations from {source_host}")
        if instance_uuid is not None:
            what = f"list the evacuations of instance {instance_uuid}"
        return [Migration.from_nova(m) for m in self._pages(
            what, "/os-migrations", query, "migrations",
            kind="migration.list")]

    def _pages(self, what: str, path: str, query: dict[str, str],
               key: str, kind: str) -> list[dict[str, Any]]:
        """Every item of a collection, following its "next" links."""
        items: list[dict[str, Any]] = []
        query = dict(query)
        while True:
            _, body = self._call(
                what, self._client.client.get,
                f"{path}?{urllib.parse.urlencode(query)}", kind=kind)
            items.extend(body[key])
            marker = _next_marker(body.get(f"{key}_links", []))
            if marker is None:
                return items
            query["marker"] = marker


def _next_marker(links: list[dict[str, Any]]) -> str | None:
    """The marker of a collection's "next" link, if it has one."""
    for link in links:
        if link.get("rel") == "next":
            query = urllib.parse.urlsplit(link["href"]).query
            return urllib.parse.parse_qs(query)["marker"][0]
    return None
