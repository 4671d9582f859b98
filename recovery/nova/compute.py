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

import copy
import logging
import urllib.parse
from collections.abc import Callable
from typing import Any
from typing import TypeVar

from keystoneauth1 import exceptions as ks_exc
from novaclient import exceptions as nova_exc

from recovery import exception
from recovery import hostnames
from recovery.concurrency import Clock
from recovery.evacuable import ListedServer
from recovery.metrics import METRICS
from recovery.models import Aggregate
from recovery.models import ComputeService
from recovery.models import Migration
from recovery.models import Need
from recovery.models import Server
from recovery.models import VmState
from recovery.nova.images import Images
from recovery.nova.placement import Placement
from recovery.nova.transport import GUARD
from recovery.nova.transport import no_guard
from recovery.nova.transport import translate

LOG = logging.getLogger(__name__)

MICROVERSION = "2.94"
# Instances per page of the whole cloud's listing: Nova's default
# [api] max_limit (a smaller max_limit only means more pages).
ALL_SERVERS_PAGE = 1000
T = TypeVar("T")


class Nova:
    """Every Nova call of the project, with timeouts and error translation.

    Timeouts and the rate limit come from the keystoneauth1 session
    (``[nova] timeout``, ``max_requests_per_second``).
    """

    def __init__(self, client: Any, *, retries: int, clock: Clock,
                 placement: Placement | None = None,
                 images: Images | None = None):
        """``placement``: Placement, which ``free_room`` reads;
        ``images``: the images' properties, which every listed server
        gets (none without)."""
        self._client = client
        self._placement = placement
        self._images = images
        self._retries = retries
        self._clock = clock
        self._guard: Callable[[], None] = no_guard

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
    def evacuated_active_vm_state(self) -> VmState:
        """The vm_state an instance evacuated ACTIVE ends in: under
        ``MICROVERSION`` (2.94), active."""
        return VmState.ACTIVE

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
            GUARD.set(self._guard)
            try:
                with METRICS.nova_call(kind):
                    return fn(*args, **kwargs)
            except (nova_exc.ClientException, ks_exc.ClientException) as exc:
                error = translate(what, exc)
                if in_flight is not None and error.in_flight:
                    in_flight(error)
                if not (safe and isinstance(error, exception.NovaError)
                        and error.uncertain and attempt < self._retries):
                    raise error from exc
            finally:
                GUARD.set(None)
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

    def live_migrate(self, uuid: str, host: str | None,
                     block_migration: bool | str) -> None:
        """Live-migrate once, to ``host`` (which the scheduler validates)
        or to where the scheduler picks; ``block_migration``: True, False
        or "auto" (Nova decides by whether the storage is shared)."""
        where = f" to {host}" if host else ""
        self._call(f"live-migrate instance {uuid}{where}",
                   self._client.servers.live_migrate, uuid, host,
                   block_migration, safe=False)

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
        """What each compute node has free, as Placement counts it (see
        ``Placement.free_room``)."""
        if self._placement is None:
            raise exception.ConfigError("no Placement endpoint configured")
        return self._placement.free_room(self._call)

    # -- migrations ----------------------------------------------------------
    def list_migrations(self, instance_uuid: str) -> list[Migration]:
        """Every migration of one instance, of any type, oldest first."""
        found = [Migration.from_nova(m) for m in self._pages(
            f"list the migrations of instance {instance_uuid}",
            "/os-migrations", {"instance_uuid": instance_uuid},
            "migrations", kind="migration.list")]
        return sorted(found, key=lambda m: m.id)

    def list_live_migrations(self, source_host: str | None = None,
                             instance_uuid: str | None = None
                             ) -> list[Migration]:
        """Every live migration (from ``source_host``; of one instance),
        as ``list_evacuations`` reads them."""
        return self._migrations("live-migration", "live migrations",
                                source_host, instance_uuid)

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
        return self._migrations("evacuation", "evacuations", source_host,
                                instance_uuid, changes_since)

    def _migrations(self, type: str, named: str, source_host: str | None,
                    instance_uuid: str | None,
                    changes_since: str | None = None) -> list[Migration]:
        query = {"migration_type": type}
        if source_host is not None:
            query["source_compute"] = source_host
        if changes_since is not None:
            query["changes-since"] = changes_since
        if instance_uuid is not None:
            query["instance_uuid"] = instance_uuid
        what = (f"list the {named}" if source_host is None
                else f"list the {named} from {source_host}")
        if instance_uuid is not None:
            what = f"list the {named} of instance {instance_uuid}"
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
