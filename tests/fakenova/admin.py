"""Admin APIs: compute services, migrations and aggregates.

Callers hold ``state.lock``.
"""

from __future__ import annotations

import datetime
from typing import Any

from tests.fakenova import errors
from tests.fakenova.errors import RequestContext
from tests.fakenova.state import Aggregate
from tests.fakenova.state import Migration
from tests.fakenova.state import Service
from tests.fakenova.state import State
from tests.fakenova.state import utcnow

_TRUE = ("1", "t", "true", "on", "y", "yes")
_FALSE = ("0", "f", "false", "off", "n", "no")


def parse_bool(value: Any, name: str) -> bool:
    """oslo strutils.bool_from_string(strict=True)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise errors.bad_request(
        f"Invalid input for field/attribute {name}. Value: {value}.")


# -- services --------------------------------------------------------------
def list_services(state: State, ctx: RequestContext, host: str | None,
                  binary: str | None) -> list[Service]:
    if not ctx.is_admin:
        raise errors.policy_denied("os_compute_api:os-services:list")
    return [s for s in state.all_services()
            if (not host or s.host == host)
            and (not binary or s.binary == binary)]


def update_service(state: State, ctx: RequestContext, service_id: str,
                   body: Any) -> Service:
    """PUT /os-services/{uuid} at 2.53+ (services.py _update_v253)."""
    if not _looks_like_uuid(service_id):
        raise errors.bad_request(f"Invalid uuid {service_id}")
    if not ctx.is_admin:
        raise errors.policy_denied("os_compute_api:os-services:update")
    service = state.service_by_id(service_id)
    if service is None or service.uuid != service_id:
        raise errors.not_found(f"Service {service_id} could not be found.")
    body = _validate_update_body(body)
    if service.binary != "nova-compute":
        raise errors.bad_request(
            f"Updating a {service.binary} service is not supported. Only "
            "nova-compute services can be updated.")
    if "status" not in body and "forced_down" not in body:
        raise errors.bad_request(
            "No updates were requested. Fields 'status' or 'forced_down' "
            "should be specified.")
    if body.get("status") == "enabled" and body.get("disabled_reason"):
        raise errors.bad_request("Specifying 'disabled_reason' with status "
                                 "'enabled' is invalid.")
    forced_down = service.forced_down
    if "forced_down" in body:
        forced_down = parse_bool(body["forced_down"], "forced_down")
        if not forced_down:
            _check_for_evacuations(state, service.host)
    service.forced_down = forced_down
    if "status" in body:
        disabled = body["status"] == "disabled"
        reason = body.get("disabled_reason") if disabled else None
        set_status(service, disabled, reason)
    return service


def _validate_update_body(body: Any) -> dict:
    allowed = {"status", "disabled_reason", "forced_down"}
    if not isinstance(body, dict) or set(body) - allowed:
        raise errors.bad_request(
            f"Invalid input for field/attribute request body. Value: {body}."
            " Additional properties are not allowed")
    if "status" in body and body["status"] not in ("enabled", "disabled"):
        raise errors.bad_request(
            "Invalid input for field/attribute status. Value: "
            f"{body['status']}. {body['status']!r} is not one of "
            "['enabled', 'disabled']")
    return body


def set_status(service: Service, disabled: bool,
               reason: str | None) -> None:
    """The COMPUTE_STATUS_DISABLED trait only follows while it is up."""
    service.disabled = disabled
    service.disabled_reason = reason
    if service.up:
        service.trait_disabled = disabled


def _check_for_evacuations(state: State, host: str) -> None:
    for migration in state.migrations:
        if (migration.source_compute == host and migration.status == "done"
                and migration.migration_type == "evacuation"):
            raise errors.bad_request(
                f"Unable to force up host {host} as `done` evacuation "
                "migration records remain associated with the host. Ensure "
                "the compute service has been restarted, allowing these "
                "records to move to `completed` before retrying this "
                "request.")


def update_service_legacy(state: State, ctx: RequestContext, action: str,
                          body: Any) -> dict:
    """PUT /os-services/{enable,disable,...} before 2.53."""
    if not ctx.is_admin:
        raise errors.policy_denied("os_compute_api:os-services:update")
    actions = ["enable", "disable", "disable-log-reason"]
    if ctx.at_least("2.11"):
        actions.append("force-down")
    if action not in actions:
        raise errors.not_found("Unknown action")
    body = body if isinstance(body, dict) else {}
    host, binary = body.get("host"), body.get("binary")
    if binary != "nova-compute":
        raise errors.bad_request(
            f"Updating a {binary} service is not supported. Only "
            "nova-compute services can be updated.")
    service = state.computes.get(str(host))
    if service is None:
        raise errors.not_found(f"Service {host} with binary {binary} could "
                               "not be found.")
    result: dict[str, Any] = {"host": host, "binary": binary}
    if action == "force-down":
        forced_down = parse_bool(body.get("forced_down"), "forced_down")
        if not forced_down:
            _check_for_evacuations(state, service.host)
        service.forced_down = forced_down
        result["forced_down"] = forced_down
        return result
    reason = body.get("disabled_reason") \
        if action == "disable-log-reason" else None
    if action == "disable-log-reason" and not reason:
        raise errors.bad_request("Missing disabled reason field")
    set_status(service, action != "enable", reason)
    result["status"] = "enabled" if action == "enable" else "disabled"
    if reason:
        result["disabled_reason"] = reason
    return result


def _looks_like_uuid(text: str) -> bool:
    hex_digits = text.replace("-", "").lower()
    return len(hex_digits) == 32 and all(
        c in "0123456789abcdef" for c in hex_digits)


# -- migrations ------------------------------------------------------------
def list_migrations(state: State, ctx: RequestContext,
                    query: dict[str, str]) -> list[Migration]:
    if not ctx.is_admin:
        raise errors.policy_denied("os_compute_api:os-migrations:index")
    since = _time_filter(query, "changes-since", ctx.at_least("2.59"))
    before = _time_filter(query, "changes-before", ctx.at_least("2.66"))
    if since and before and before < since:
        raise errors.bad_request("The value of changes-since must be less "
                                 "than or equal to changes-before.")
    found = [m for m in state.migrations if _matches(m, query, ctx)
             and _updated_between(m, since, before)]
    if ctx.at_least("2.59"):
        found.sort(key=lambda m: (m.created_at, m.id), reverse=True)
    return found


def _matches(migration: Migration, query: dict[str, str],
             ctx: RequestContext) -> bool:
    if "status" in query and migration.status != query["status"]:
        return False
    if "host" in query:
        if query["host"] not in (migration.source_compute,
                                 migration.dest_compute):
            return False
    elif ("source_compute" in query
          and migration.source_compute != query["source_compute"]):
        return False
    wanted_type = query.get("migration_type")
    if wanted_type == "resize":
        if migration.migration_type not in ("resize", "migration"):
            return False
    elif wanted_type and migration.migration_type != wanted_type:
        return False
    if ("instance_uuid" in query
            and migration.instance_uuid != query["instance_uuid"]):
        return False
    if ctx.at_least("2.80"):
        for key in ("user_id", "project_id"):
            if key in query and getattr(migration, key) != query[key]:
                return False
    return True


def _time_filter(query: dict[str, str], name: str,
                 supported: bool) -> datetime.datetime | None:
    if not supported or name not in query:
        return None
    return parse_iso_time(query[name], name)


def parse_iso_time(text: str, name: str) -> datetime.datetime:
    try:
        value = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise errors.bad_request(
            f"Invalid input for query parameters {name}. Value: {text}. "
            f"'{text}' is not a 'date-time'") from None
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return value


def _updated_between(migration: Migration,
                     since: datetime.datetime | None,
                     before: datetime.datetime | None) -> bool:
    """Nova compares updated_at, which is NULL until the first save."""
    if since is None and before is None:
        return True
    if migration.updated_at is None:
        return False
    if since is not None and migration.updated_at < since:
        return False
    return before is None or migration.updated_at <= before


# -- aggregates ------------------------------------------------------------
def get_aggregate(state: State, ctx: RequestContext, ident: str,
                  rule: str) -> Aggregate:
    if not ctx.is_admin:
        raise errors.policy_denied(f"os_compute_api:os-aggregates:{rule}")
    aggregate = state.aggregates.get(int(ident)) if ident.isdigit() \
        else None
    if aggregate is None:
        raise errors.not_found(f"Aggregate {ident} could not be found.")
    return aggregate


def create_aggregate(state: State, ctx: RequestContext,
                     body: Any) -> Aggregate:
    if not ctx.is_admin:
        raise errors.policy_denied("os_compute_api:os-aggregates:create")
    args = body.get("aggregate") if isinstance(body, dict) else None
    name = args.get("name") if isinstance(args, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise errors.bad_request(
            f"Invalid input for field/attribute aggregate. Value: {args}.")
    if any(a.name == name for a in state.aggregates.values()):
        raise errors.conflict(f"Aggregate {name} already exists.")
    ident = state.add_aggregate(name, [], args.get("availability_zone"),
                                {})
    return state.aggregates[ident]


def aggregate_action(state: State, ctx: RequestContext, ident: str,
                     body: Any) -> Aggregate:
    if not isinstance(body, dict) or len(body) != 1:
        raise errors.bad_request("Malformed request body")
    action, args = next(iter(body.items()))
    if action not in ("add_host", "remove_host", "set_metadata"):
        raise errors.bad_request(f"There is no such action: {action}")
    aggregate = get_aggregate(state, ctx, ident, action)
    if action == "set_metadata":
        _set_metadata(aggregate, args)
        aggregate.updated_at = utcnow()
        return aggregate
    host = args.get("host") if isinstance(args, dict) else None
    if not isinstance(host, str) or not host:
        raise errors.bad_request(
            f"Invalid input for field/attribute {action}. Value: {args}.")
    if action == "add_host":
        _add_host(state, aggregate, host)
    else:
        _remove_host(aggregate, host)
    aggregate.updated_at = utcnow()
    return aggregate


def _add_host(state: State, aggregate: Aggregate, host: str) -> None:
    if host not in state.computes:
        raise errors.not_found(f"Compute host {host} could not be found.")
    if host in aggregate.hosts:
        raise errors.conflict(
            f"Aggregate {aggregate.id} already has host {host}.")
    aggregate.hosts.append(host)


def _set_metadata(aggregate: Aggregate, args: Any) -> None:
    """Nova's set_metadata: a key set to None is removed."""
    metadata = args.get("metadata") if isinstance(args, dict) else None
    if not isinstance(metadata, dict):
        raise errors.bad_request(
            f"Invalid input for field/attribute set_metadata. Value: "
            f"{args}.")
    for key, value in metadata.items():
        if key == "availability_zone":
            aggregate.availability_zone = value
        elif value is None:
            aggregate.metadata.pop(key, None)
        else:
            aggregate.metadata[key] = str(value)


def _remove_host(aggregate: Aggregate, host: str) -> None:
    if host not in aggregate.hosts:
        raise errors.not_found(f"Cannot remove host {host} in aggregate "
                               f"{aggregate.id}: not found")
    aggregate.hosts.remove(host)

