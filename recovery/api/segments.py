"""Failover segments and their hosts over the API: Masakari's
``/v1/segments`` and ``/v1/segments/{segment_id}/hosts``.

A host's name is checked against Nova's nova-compute services before it
is stored: a host Nova does not know is never recovered, so a typo would
only show at its failure. When Nova cannot answer, nothing is stored
(503): unlike a notification, the edit can simply be made again.

Edits that would change a recovery in flight are refused by the store
(409, with the notification to wait for).
"""

import functools
import logging
from collections.abc import Callable
from typing import Any

import webob

from recovery import bus
from recovery import exception
from recovery.api import http
from recovery.api import validation
from recovery.api import views
from recovery.api.catalog import SegmentCatalog
from recovery.api.notifications import HostCheck
from recovery.bus import wire
from recovery.concurrency import Clock
from recovery.db.segments import HOST_SORT_KEYS
from recovery.db.segments import RECOVERY_METHODS
from recovery.db.segments import SEGMENT_SORT_KEYS
from recovery.db.segments import Host
from recovery.db.segments import Segment

LOG = logging.getLogger(__name__)

# Masakari's list filters that match a column as given.
SEGMENT_FILTERS = ("recovery_method", "service_type")
HOST_FILTERS = ("name", "type", "control_attributes")
HOST_FLAGS = ("reserved", "on_maintenance")


class SegmentAPI:
    """The handlers under ``/v1/segments``."""

    def __init__(self, store: SegmentCatalog, check_host: HostCheck,
                 clock: Clock, *, max_body: int):
        self.store = store
        self.check_host = check_host
        self.clock = clock
        self.max_body = max_body

    def route(self, req: webob.Request,
              parts: list[str]) -> http.Handlers | None:
        """The handlers by method for ``parts``, the path after
        ``/v1/segments``; None if there is no such resource."""
        if not parts:
            return {"GET": lambda: self.index(req),
                    "POST": lambda: self.create(req)}
        segment_id, rest = parts[0], parts[1:]
        if not rest:
            return {"GET": lambda: self.show(segment_id),
                    "PUT": lambda: self.update(req, segment_id),
                    "DELETE": lambda: self.delete(segment_id)}
        if rest == ["hosts"]:
            return {"GET": lambda: self.host_index(req, segment_id),
                    "POST": lambda: self.host_create(req, segment_id)}
        if rest[0] == "hosts" and len(rest) == 2:
            host_id = rest[1]
            return {"GET": lambda: self.host_show(segment_id, host_id),
                    "PUT": lambda: self.host_update(req, segment_id,
                                                    host_id),
                    "DELETE": lambda: self.host_delete(segment_id,
                                                       host_id)}
        return None

    def _segment_fields(self, req: webob.Request, *,
                        create: bool) -> dict[str, Any]:
        # ``enabled`` came with microversion 1.2: before it, Masakari's
        # schema refuses it as an unknown field.
        return validation.segment(http.read_json(req, self.max_body),
                                  create=create,
                                  enabled=http.at_least(req, "1.2"))

    # -- segments ------------------------------------------------------------
    def index(self, req: webob.Request) -> webob.Response:
        params = req.GET
        filters: dict[str, Any] = {k: params[k] for k in SEGMENT_FILTERS
                                   if k in params}
        method = filters.get("recovery_method")
        if method is not None and method not in RECOVERY_METHODS:
            raise validation.Invalid(
                f"recovery_method: {method!r} is not one of "
                f"{list(RECOVERY_METHODS)}")
        # openstacksdk sends ``enabled``; Masakari reads ``is_enabled``.
        for key in ("enabled", "is_enabled"):
            if key in params:
                filters["enabled"] = validation.flag(params[key], key)
        items = _listed(self.store.list_segments, filters, params,
                        SEGMENT_SORT_KEYS)
        return http.respond(200, {"segments": [views.segment(s)
                                               for s in items]})

    def show(self, segment_id: str) -> webob.Response:
        return http.respond(200, {"segment": views.segment(
            self.store.get_segment(segment_id))})

    def create(self, req: webob.Request) -> webob.Response:
        data = self._segment_fields(req, create=True)
        segment = self.store.create_segment(now=self.clock.now(), **data)
        _told("segment.create", segment)
        LOG.info("Created failover segment %s (%s, %s)", segment.name,
                 segment.uuid, segment.recovery_method)
        return http.respond(201, {"segment": views.segment(segment)})

    def update(self, req: webob.Request,
               segment_id: str) -> webob.Response:
        changes = self._segment_fields(req, create=False)
        segment = self.store.update_segment(segment_id, changes,
                                            self.clock.now())
        _told("segment.update", segment)
        LOG.info("Updated failover segment %s (%s): %s", segment.name,
                 segment.uuid, ", ".join(sorted(changes)))
        return http.respond(200, {"segment": views.segment(segment)})

    def delete(self, segment_id: str) -> webob.Response:
        segment = self.store.get_segment(segment_id)
        self.store.delete_segment(segment.uuid)
        _told("segment.delete", segment)
        LOG.info("Deleted failover segment %s (%s) and its hosts",
                 segment.name, segment.uuid)
        return webob.Response(status=204, content_type=None)

    # -- hosts ---------------------------------------------------------------
    def host_index(self, req: webob.Request,
                   segment_id: str) -> webob.Response:
        segment = self.store.get_segment(segment_id)
        params = req.GET
        filters: dict[str, Any] = {k: params[k] for k in HOST_FILTERS
                                   if k in params}
        for key in HOST_FLAGS:
            if key in params:
                filters[key] = validation.flag(params[key], key)
        items = _listed(functools.partial(self.store.list_hosts,
                                          segment.uuid), filters, params,
                        HOST_SORT_KEYS)
        return http.respond(200, {"hosts": [views.host(h, segment)
                                       for h in items]})

    def host_show(self, segment_id: str, host_id: str) -> webob.Response:
        segment = self.store.get_segment(segment_id)
        host = self.store.get_host(segment.uuid, host_id)
        return http.respond(200, {"host": views.host(host, segment)})

    def host_create(self, req: webob.Request,
                    segment_id: str) -> webob.Response:
        data = validation.host(http.read_json(req, self.max_body),
                               create=True)
        segment = self.store.get_segment(segment_id)
        self._known_to_nova(data["name"])
        host = self.store.create_host(segment.uuid, now=self.clock.now(),
                                      **data)
        _told("host.create", segment, host)
        LOG.info("Added host %s to failover segment %s (reserved %s, on "
                 "maintenance %s)", host.name, segment.name, host.reserved,
                 host.on_maintenance)
        return http.respond(201, {"host": views.host(host, segment)})

    def host_update(self, req: webob.Request, segment_id: str,
                    host_id: str) -> webob.Response:
        changes = validation.host(http.read_json(req, self.max_body),
                                  create=False)
        segment = self.store.get_segment(segment_id)
        current = self.store.get_host(segment.uuid, host_id)
        if changes.get("name", current.name) != current.name:
            self._known_to_nova(changes["name"])
        host = self.store.update_host(segment.uuid, current.uuid, changes,
                                      self.clock.now())
        _told("host.update", segment, host)
        LOG.info("Updated host %s of failover segment %s: %s", host.name,
                 segment.name, ", ".join(sorted(changes)))
        return http.respond(200, {"host": views.host(host, segment)})

    def host_delete(self, segment_id: str,
                    host_id: str) -> webob.Response:
        segment = self.store.get_segment(segment_id)
        host = self.store.get_host(segment.uuid, host_id)
        self.store.delete_host(segment.uuid, host.uuid)
        _told("host.delete", segment, host)
        LOG.info("Removed host %s from failover segment %s", host.name,
                 segment.name)
        return webob.Response(status=204, content_type=None)

    def _known_to_nova(self, name: str) -> None:
        try:
            found = self.check_host(name)
        except exception.UnknownHost as exc:
            raise http.Refused(400, f"host.name: {exc}") from exc
        except exception.RecoveryError as exc:
            LOG.warning("Could not check host %s with Nova (%s); refused "
                        "to store it unchecked", name, exc)
            raise http.Refused(503, f"could not check host {name} with Nova "
                                f"({exc}); nothing was stored: try again "
                                f"when Nova answers") from exc
        if found.host != name:
            # A segment names hosts as Nova does: the detector and the
            # recovery methods look them up by that name.
            raise http.Refused(400, f"host.name: {name!r} is not Nova's name "
                                f"for it: use {found.host!r}")


def _told(action: str, segment: Segment, host: Host | None = None) -> None:
    """Masakari's start and end of ``action``, both once it is done."""
    for phase in ("start", "end"):
        bus.publish(wire.segment_event(segment, action, phase)
                    if host is None
                    else wire.host_event(host, segment, action, phase))


def _listed(lister: Callable[..., list[Any]], filters: dict[str, Any],
            params: Any, sort_keys: frozenset[str]) -> list[Any]:
    """``lister``'s page per the request's ``limit``, ``marker``,
    ``sort_key`` and ``sort_dir``; an unknown marker is the request's
    fault (400), not a missing page."""
    sort_key, sort_dir = http.sort(params, sort_keys)
    try:
        return lister(filters, limit=http.limit(params),
                      marker=params.get("marker"), sort_key=sort_key,
                      sort_dir=sort_dir)
    except exception.NotFound as exc:
        raise http.Refused(400, f"marker: {exc}") from exc
