"""HTTP handlers of the compute API: ``(state, ctx, req, **ids)``.

Each returns ``(status, body or None)`` and runs under ``state.lock``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from tests.fakenova import admin
from tests.fakenova import compute
from tests.fakenova import errors
from tests.fakenova import live_migration
from tests.fakenova import views
from tests.fakenova.errors import RequestContext
from tests.fakenova.state import State

Result = tuple[int, Any]
_FALSE_WORDS = ("0", "f", "false", "off", "n", "no")
_TRUE_WORDS = ("1", "t", "true", "on", "y", "yes")


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    base: str
    root: str


# -- pagination ------------------------------------------------------------
def _limit(req: Request, max_limit: int) -> int:
    text = req.query.get("limit")
    if text is None:
        return max_limit
    if not text.strip().isdigit():
        raise errors.bad_request("limit must be an integer")
    return min(max_limit, int(text))


def _page(items: list, key: Callable[[Any], Any], marker: Any,
          limit: int) -> list:
    """items are sorted by key, newest first; marker is an item."""
    if marker is not None:
        items = [item for item in items if key(item) < key(marker)]
    return items[:limit]


def _next_links(req: Request, page: list, limit: int, last_id: str,
                collection: str) -> list[dict[str, str]]:
    """A "next" link when the page is full (Nova's collection links)."""
    if not page or limit != len(page):
        return []
    params = dict(sorted(req.query.items()))
    params["marker"] = last_id
    return [{"rel": "next",
             "href": f"{req.base}/{collection}?{urlencode(params)}"}]


# -- servers ---------------------------------------------------------------
def _all_tenants(ctx: RequestContext, req: Request, detail: bool) -> bool:
    if "all_tenants" not in req.query:
        return False
    text = req.query["all_tenants"].strip().lower()
    if text in _FALSE_WORDS:
        return False
    if text and text not in _TRUE_WORDS:
        raise errors.bad_request(f"Invalid all_tenants value: {text}")
    if not ctx.is_admin:
        kind = "detail" if detail else "index"
        raise errors.policy_denied(
            f"os_compute_api:servers:{kind}:get_all_tenants")
    return True


def _visible_servers(state: State, ctx: RequestContext, req: Request,
                     detail: bool) -> list:
    everyone = _all_tenants(ctx, req, detail)
    project = req.query.get("project_id") or req.query.get("tenant_id")
    found = []
    for server in state.servers.values():
        if not everyone and server.project_id != ctx.project_id:
            continue
        if everyone and project and server.project_id != project:
            continue
        # non-admins' host filter is silently dropped, as in Nova
        if ctx.is_admin and "host" in req.query \
                and server.host != req.query["host"]:
            continue
        status = req.query.get("status")
        if status and views.server_status(server) != status.upper():
            continue
        if (ctx.at_least("2.73") and "locked" in req.query
                and server.locked != _locked_filter(req.query["locked"])):
            continue
        # Nova lists a soft-deleted server only when asked for deleted
        # ones (db.instance_get_all_by_filters, soft_deleted).
        if server.vm_state == "soft-delete" and not status:
            continue
        found.append(server)
    return sorted(found, key=_server_key, reverse=True)


def _locked_filter(text: str) -> bool:
    """The ``locked`` filter of 2.73: a boolean, as Nova parses it."""
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise errors.bad_request(
        f"Invalid input for query parameters locked. Value: {text}.")


def _server_key(server: Any) -> tuple:
    return (server.created_at, server.seq)


def servers_list(state: State, ctx: RequestContext, req: Request,
                 detail: bool) -> Result:
    servers = _visible_servers(state, ctx, req, detail)
    limit = _limit(req, state.max_limit)
    marker = None
    if "marker" in req.query:
        marker = state.servers.get(req.query["marker"])
        if marker is None:
            raise errors.bad_request(
                f"marker [{req.query['marker']}] not found")
    page = _page(servers, _server_key, marker, limit)
    if detail:
        body = [views.server_detail(state, ctx, s, req.base, req.root)
                for s in page]
    else:
        body = [views.server_summary(s, req.base, req.root) for s in page]
    result: dict[str, Any] = {"servers": body}
    collection = "servers/detail" if detail else "servers"
    last = page[-1].uuid if page else ""
    next_links = _next_links(req, page, limit, last, collection)
    if next_links:
        result["servers_links"] = next_links
    return 200, result


def server_show(state: State, ctx: RequestContext, req: Request,
                server_id: str) -> Result:
    server = compute.get_instance(state, ctx, server_id)
    return 200, {"server": views.server_detail(state, ctx, server,
                                               req.base, req.root)}


def server_delete(state: State, ctx: RequestContext, req: Request,
                  server_id: str) -> Result:
    """Gone at once (Nova deletes in the background; its fake driver
    almost at once). A locked server is refused to its owner alone."""
    server = compute.get_instance(state, ctx, server_id)
    if server.locked and not ctx.is_admin:
        raise errors.conflict(f"Instance {server.uuid} is locked")
    del state.servers[server.uuid]
    return 204, None


def _no_body(ctx: RequestContext, body: Any) -> Any:
    return body


def _ignore_body(func: Callable[..., None]) -> Callable[..., None]:
    return lambda state, ctx, server, body: func(state, ctx, server)


# action -> (status, body validation (before lookup, as Nova's schema
# decorators), handler(state, ctx, server, body) -> response body or None)
_ACTIONS: dict[str, tuple[int, Callable[..., Any], Callable[..., Any]]] = {
    "lock": (202, compute.validate_lock_body, compute.lock),
    "unlock": (202, _no_body, _ignore_body(compute.unlock)),
    "evacuate": (200, compute.validate_evacuate_body, compute.evacuate),
    "os-migrateLive": (202, live_migration.validate_body,
                       live_migration.migrate_live),
    "os-resetState": (202, compute.validate_reset_state_body,
                      compute.reset_state),
    "os-stop": (202, _no_body, _ignore_body(compute.stop)),
    "os-start": (202, _no_body, _ignore_body(compute.start)),
    "pause": (202, _no_body, _ignore_body(compute.pause)),
    "suspend": (202, _no_body, _ignore_body(compute.suspend)),
    "confirmResize": (204, _no_body, _ignore_body(compute.confirm_resize)),
}


def action_name(body: Any) -> str | None:
    if isinstance(body, dict) and len(body) == 1:
        return str(next(iter(body)))
    return None


def server_action(state: State, ctx: RequestContext, req: Request,
                  server_id: str) -> Result:
    name = action_name(req.body)
    if name is None:
        raise errors.bad_request("Malformed request body")
    if name not in _ACTIONS:
        raise errors.bad_request(f"There is no such action: {name}")
    status, validate, handler = _ACTIONS[name]
    body = validate(ctx, req.body[name])
    server = compute.get_instance(state, ctx, server_id)
    return status, handler(state, ctx, server, body)


# -- services --------------------------------------------------------------
def services_index(state: State, ctx: RequestContext,
                   req: Request) -> Result:
    found = admin.list_services(state, ctx, req.query.get("host"),
                                req.query.get("binary"))
    return 200, {"services": [views.service_view(state, ctx, s)
                              for s in found]}


def services_update(state: State, ctx: RequestContext, req: Request,
                    service_id: str) -> Result:
    if not ctx.at_least("2.53"):
        return 200, {"service": admin.update_service_legacy(
            state, ctx, service_id, req.body)}
    service = admin.update_service(state, ctx, service_id, req.body)
    return 200, {"service": views.service_view(state, ctx, service)}


# -- migrations ------------------------------------------------------------
def _migration_key(migration: Any) -> tuple:
    return (migration.created_at, migration.id)


def migrations_index(state: State, ctx: RequestContext,
                     req: Request) -> Result:
    found = admin.list_migrations(state, ctx, req.query)
    if not ctx.at_least("2.59"):
        return 200, {"migrations": [views.migration_view(ctx, m)
                                    for m in found]}
    limit = _limit(req, state.max_limit)
    marker = None
    if "marker" in req.query:
        marker = next((m for m in state.migrations
                       if m.uuid == req.query["marker"]), None)
        if marker is None:
            raise errors.bad_request(
                f"Marker {req.query['marker']} could not be found.")
    page = _page(found, _migration_key, marker, limit)
    result: dict[str, Any] = {
        "migrations": [views.migration_view(ctx, m) for m in page]}
    last = page[-1].uuid if page else ""
    next_links = _next_links(req, page, limit, last, "os-migrations")
    if next_links:
        result["migrations_links"] = next_links
    return 200, result


def _server_for_migrations(state: State, ctx: RequestContext,
                           server_id: str, rule: str) -> Any:
    if not ctx.at_least("2.23"):
        raise errors.not_found("The resource could not be found.")
    server = compute.get_instance(state, ctx, server_id)
    compute.require_admin(ctx, f"os_compute_api:servers:migrations:{rule}")
    return server


def server_migrations_index(state: State, ctx: RequestContext,
                            req: Request, server_id: str) -> Result:
    """The server's live migrations in progress."""
    server = _server_for_migrations(state, ctx, server_id, "index")
    return 200, {"migrations": [
        views.server_migration_view(ctx, m) for m in state.migrations
        if m.instance_uuid == server.uuid
        and m.migration_type == "live-migration"
        and m.status in live_migration.IN_PROGRESS]}


def server_migration_show(state: State, ctx: RequestContext, req: Request,
                          server_id: str, migration_id: str) -> Result:
    server = _server_for_migrations(state, ctx, server_id, "show")
    migration = next((m for m in state.migrations
                      if str(m.id) == migration_id
                      and m.instance_uuid == server.uuid), None)
    where = f"{migration_id} for server {server.uuid}"
    if migration is None:
        raise errors.not_found(f"In-progress live migration {migration_id} "
                               f"is not found for server {server.uuid}.")
    if migration.migration_type != "live-migration":
        raise errors.not_found(f"Migration {where} is not live-migration.")
    if migration.status not in live_migration.IN_PROGRESS:
        raise errors.not_found(f"Live migration {where} is not in progress.")
    return 200, {"migration": views.server_migration_view(ctx, migration)}


# -- aggregates ------------------------------------------------------------
def aggregates_index(state: State, ctx: RequestContext,
                     req: Request) -> Result:
    if not ctx.is_admin:
        raise errors.policy_denied("os_compute_api:os-aggregates:index")
    return 200, {"aggregates": [views.aggregate_view(ctx, a)
                                for a in state.aggregates.values()]}


def aggregate_show(state: State, ctx: RequestContext, req: Request,
                   aggregate_id: str) -> Result:
    aggregate = admin.get_aggregate(state, ctx, aggregate_id, "show")
    return 200, {"aggregate": views.aggregate_view(ctx, aggregate)}


def aggregate_create(state: State, ctx: RequestContext,
                     req: Request) -> Result:
    aggregate = admin.create_aggregate(state, ctx, req.body)
    return 200, {"aggregate": views.aggregate_view(ctx, aggregate)}


def aggregate_action(state: State, ctx: RequestContext, req: Request,
                     aggregate_id: str) -> Result:
    aggregate = admin.aggregate_action(state, ctx, aggregate_id, req.body)
    return 200, {"aggregate": views.aggregate_view(ctx, aggregate)}


# -- routing ---------------------------------------------------------------
_ID = r"(?P<{}>[^/]+)"
ROUTES: list[tuple[str, re.Pattern[str], Callable[..., Result]]] = [
    ("GET", re.compile(r"^/servers/detail$"),
     lambda st, ctx, req: servers_list(st, ctx, req, detail=True)),
    ("GET", re.compile(r"^/servers$"),
     lambda st, ctx, req: servers_list(st, ctx, req, detail=False)),
    ("GET", re.compile(r"^/servers/" + _ID.format("server_id") + "$"),
     server_show),
    ("DELETE", re.compile(r"^/servers/" + _ID.format("server_id") + "$"),
     server_delete),
    ("POST", re.compile(r"^/servers/" + _ID.format("server_id")
                        + "/action$"), server_action),
    ("GET", re.compile(r"^/servers/" + _ID.format("server_id")
                       + "/migrations$"), server_migrations_index),
    ("GET", re.compile(r"^/servers/" + _ID.format("server_id")
                       + "/migrations/" + _ID.format("migration_id") + "$"),
     server_migration_show),
    ("GET", re.compile(r"^/os-services$"), services_index),
    ("PUT", re.compile(r"^/os-services/" + _ID.format("service_id") + "$"),
     services_update),
    ("GET", re.compile(r"^/os-migrations$"), migrations_index),
    ("GET", re.compile(r"^/os-aggregates$"), aggregates_index),
    ("POST", re.compile(r"^/os-aggregates$"), aggregate_create),
    ("GET", re.compile(r"^/os-aggregates/" + _ID.format("aggregate_id")
                       + "$"), aggregate_show),
    ("POST", re.compile(r"^/os-aggregates/" + _ID.format("aggregate_id")
                        + "/action$"), aggregate_action),
]


def route(method: str, path: str) -> tuple[Callable[..., Result],
                                           dict[str, str]]:
    """Find the handler of a path below /v2.1: 404, or 405 on method."""
    path_known = False
    for route_method, pattern, handler in ROUTES:
        match = pattern.match(path)
        if match is None:
            continue
        path_known = True
        if route_method == method:
            return handler, match.groupdict()
    if path_known:
        raise errors.ApiError(405, "The method specified is not allowed "
                                   "for this resource.")
    raise errors.not_found("The resource could not be found.")
