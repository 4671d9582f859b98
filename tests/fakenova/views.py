"""JSON shapes of Nova's responses, following the microversion."""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

from tests.fakenova.errors import RequestContext
from tests.fakenova.state import Aggregate
from tests.fakenova.state import Migration
from tests.fakenova.state import Server
from tests.fakenova.state import Service
from tests.fakenova.state import State

FLAVOR = {"id": "1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1}
# nova/api/openstack/common.py _STATE_MAP (the states modelled here)
_STATUS_MAP: dict[str, dict[str | None, str]] = {
    "active": {None: "ACTIVE", "rebuilding": "REBUILD",
               "rebuild_block_device_mapping": "REBUILD",
               "rebuild_spawning": "REBUILD", "migrating": "MIGRATING"},
    "stopped": {None: "SHUTOFF", "rebuilding": "REBUILD",
                "rebuild_block_device_mapping": "REBUILD",
                "rebuild_spawning": "REBUILD"},
    "error": {None: "ERROR", "rebuilding": "REBUILD",
              "rebuild_block_device_mapping": "REBUILD",
              "rebuild_spawning": "REBUILD"},
    "paused": {None: "PAUSED", "migrating": "MIGRATING"},
    "suspended": {None: "SUSPENDED"},
    "rescued": {None: "RESCUE"},
    "resized": {None: "VERIFY_RESIZE"},
    "shelved": {None: "SHELVED"},
    "soft-delete": {None: "SOFT_DELETED"},
}


def server_status(server: Server) -> str:
    task_map = _STATUS_MAP.get(server.vm_state, {None: "UNKNOWN"})
    return task_map.get(server.task_state, task_map[None])


def iso_z(value: datetime.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_micro(value: datetime.datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f") if value else None


def links(base: str, root: str, collection: str,
          ident: Any) -> list[dict[str, str]]:
    return [{"rel": "self", "href": f"{base}/{collection}/{ident}"},
            {"rel": "bookmark", "href": f"{root}/{collection}/{ident}"}]


def host_status(state: State, server: Server) -> str:
    """compute.api get_instance_host_status()."""
    service = state.computes.get(server.host)
    if service is None:
        return ""
    if service.forced_down:
        return "DOWN"
    if service.disabled:
        return "MAINTENANCE"
    return "UP" if service.up else "UNKNOWN"


def _flavor(ctx: RequestContext, root: str,
            server: Server) -> dict[str, Any]:
    if ctx.at_least("2.47"):
        return {"vcpus": FLAVOR["vcpus"], "ram": FLAVOR["ram"],
                "disk": FLAVOR["disk"], "ephemeral": server.ephemeral_gb,
                "swap": server.swap_mb,
                "original_name": FLAVOR["name"],
                "extra_specs": dict(server.extra_specs)}
    href = f"{root}/flavors/{FLAVOR['id']}"
    return {"id": FLAVOR["id"], "links": [{"rel": "bookmark",
                                           "href": href}]}


def server_summary(server: Server, base: str, root: str) -> dict[str, Any]:
    return {"id": server.uuid, "name": server.name,
            "links": links(base, root, "servers", server.uuid)}


def server_detail(state: State, ctx: RequestContext, server: Server,
                  base: str, root: str) -> dict[str, Any]:
    host_id = hashlib.sha224(
        (server.project_id + server.host).encode()).hexdigest()
    view: dict[str, Any] = server_summary(server, base, root)
    view.update({
        "status": server_status(server),
        "tenant_id": server.project_id, "user_id": server.user_id,
        "metadata": dict(server.metadata), "hostId": host_id,
        # Booted from a volume: "", as Nova shows it.
        "image": {"id": server.image_id, "links": [
            {"rel": "bookmark",
             "href": f"{root}/images/{server.image_id}"}]}
        if server.image_id else "",
        "flavor": _flavor(ctx, root, server),
        "created": iso_z(server.created_at),
        "updated": iso_z(server.updated_at),
        "addresses": {}, "accessIPv4": "", "accessIPv6": "",
        "OS-DCF:diskConfig": "MANUAL", "progress": 0,
        "OS-EXT-AZ:availability_zone": state.zone_of(server.host),
        "config_drive": "", "key_name": None,
        "OS-SRV-USG:launched_at": iso_micro(server.created_at),
        "OS-SRV-USG:terminated_at": None,
        "OS-EXT-STS:task_state": server.task_state,
        "OS-EXT-STS:vm_state": server.vm_state,
        "OS-EXT-STS:power_state": server.power_state,
        "os-extended-volumes:volumes_attached": [
            {"id": volume, "delete_on_termination": False}
            for volume in server.volumes],
        "security_groups": [{"name": "default"}],
    })
    if ctx.is_admin:
        view.update(_admin_attributes(state, ctx, server))
    view.update(_versioned_attributes(ctx, server))
    if server.fault and server.vm_state == "error":
        view["fault"] = _fault(ctx, server.fault)
    return view


def _admin_attributes(state: State, ctx: RequestContext,
                      server: Server) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "OS-EXT-SRV-ATTR:host": server.host,
        "OS-EXT-SRV-ATTR:hypervisor_hostname": server.node,
        "OS-EXT-SRV-ATTR:instance_name": f"instance-{server.seq:08x}",
    }
    if ctx.at_least("2.3"):
        attrs.update({
            "OS-EXT-SRV-ATTR:reservation_id": f"r-{server.seq:08x}",
            "OS-EXT-SRV-ATTR:launch_index": 0,
            "OS-EXT-SRV-ATTR:hostname": server.name,
            "OS-EXT-SRV-ATTR:kernel_id": "",
            "OS-EXT-SRV-ATTR:ramdisk_id": "",
            "OS-EXT-SRV-ATTR:root_device_name": "/dev/vda",
            "OS-EXT-SRV-ATTR:user_data": None,
        })
    if ctx.at_least("2.16"):
        attrs["host_status"] = host_status(state, server)
    return attrs


def _versioned_attributes(ctx: RequestContext,
                          server: Server) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if ctx.at_least("2.9"):
        attrs["locked"] = server.locked
    if ctx.at_least("2.19"):
        attrs["description"] = None
    if ctx.at_least("2.26"):
        attrs["tags"] = []
    if ctx.at_least("2.63"):
        attrs["trusted_image_certificates"] = None
    if ctx.at_least("2.71"):
        attrs["server_groups"] = []
    if ctx.at_least("2.73"):
        attrs["locked_reason"] = server.locked_reason
    if ctx.at_least("2.96"):
        attrs["pinned_availability_zone"] = None
    return attrs


def _fault(ctx: RequestContext, fault: dict[str, Any]) -> dict[str, Any]:
    view = {"code": fault["code"], "message": fault["message"],
            "created": iso_z(fault["created"])}
    if ctx.is_admin:
        view["details"] = fault["message"]
    return view


def service_view(state: State, ctx: RequestContext,
                 service: Service) -> dict[str, Any]:
    zone = service.zone
    if service.binary == "nova-compute":
        zone = state.zone_of(service.host)
    view: dict[str, Any] = {
        "id": service.uuid if ctx.at_least("2.53") else service.id,
        "binary": service.binary, "host": service.host, "zone": zone,
        "status": "disabled" if service.disabled else "enabled",
        "state": "up" if service.up else "down",
        "updated_at": iso_micro(service.updated_at),
        "disabled_reason": service.disabled_reason,
    }
    if ctx.at_least("2.11"):
        view["forced_down"] = service.forced_down
    return view


def migration_view(ctx: RequestContext,
                   migration: Migration) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": migration.id,
        "instance_uuid": migration.instance_uuid,
        "source_compute": migration.source_compute,
        "source_node": migration.source_node,
        "dest_compute": migration.dest_compute,
        "dest_node": migration.dest_node,
        "dest_host": migration.dest_host,
        "status": migration.status,
        "old_instance_type_id": 1, "new_instance_type_id": 1,
        "created_at": iso_micro(migration.created_at),
        "updated_at": iso_micro(migration.updated_at),
    }
    if ctx.at_least("2.23"):
        view["migration_type"] = migration.migration_type
    if ctx.at_least("2.59"):
        view["uuid"] = migration.uuid
    if ctx.at_least("2.80"):
        view["user_id"] = migration.user_id
        view["project_id"] = migration.project_id
    return view


def server_migration_view(ctx: RequestContext,
                          migration: Migration) -> dict[str, Any]:
    """GET /servers/{id}/migrations[/{id}] (no progress figures)."""
    view: dict[str, Any] = {
        "id": migration.id, "server_uuid": migration.instance_uuid,
        "source_compute": migration.source_compute,
        "source_node": migration.source_node,
        "dest_compute": migration.dest_compute,
        "dest_node": migration.dest_node,
        "dest_host": migration.dest_host, "status": migration.status,
        "created_at": iso_micro(migration.created_at),
        "updated_at": iso_micro(migration.updated_at),
    }
    for kind in ("memory", "disk"):
        for figure in ("total", "processed", "remaining"):
            view[f"{kind}_{figure}_bytes"] = None
    if ctx.at_least("2.59"):
        view["uuid"] = migration.uuid
    if ctx.at_least("2.80"):
        view["user_id"] = migration.user_id
        view["project_id"] = migration.project_id
    return view


def aggregate_view(ctx: RequestContext,
                   aggregate: Aggregate) -> dict[str, Any]:
    metadata = dict(aggregate.metadata)
    if aggregate.availability_zone:
        metadata["availability_zone"] = aggregate.availability_zone
    view: dict[str, Any] = {
        "id": aggregate.id, "name": aggregate.name,
        "availability_zone": aggregate.availability_zone,
        "hosts": list(aggregate.hosts), "metadata": metadata,
        "created_at": iso_micro(aggregate.created_at),
        "updated_at": iso_micro(aggregate.updated_at),
        "deleted_at": None, "deleted": False,
    }
    if ctx.at_least("2.41"):
        view["uuid"] = aggregate.uuid
    return view


def version_doc(root: str, max_version: str) -> dict[str, Any]:
    return {
        "id": "v2.1", "status": "CURRENT", "version": max_version,
        "min_version": "2.1", "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": f"{root}/v2.1/"},
                  {"rel": "describedby", "type": "text/html",
                   "href": "http://docs.openstack.org/"}],
        "media-types": [{"base": "application/json",
                         "type": "application/vnd.openstack.compute+json;"
                                 "version=2.1"}],
    }


def versions_doc(root: str, max_version: str) -> dict[str, Any]:
    v20 = {"id": "v2.0", "status": "SUPPORTED", "version": "",
           "min_version": "", "updated": "2011-01-21T11:33:21Z",
           "links": [{"rel": "self", "href": f"{root}/v2/"}]}
    v21 = version_doc(root, max_version)
    del v21["media-types"]
    v21["links"] = v21["links"][:1]
    return {"versions": [v20, v21]}
