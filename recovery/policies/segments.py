"""Failover segments and their hosts: Masakari's ``segments`` and
``os-hosts`` rules."""

from recovery.policies.base import MASAKARI_API
from recovery.policies.base import admin_rule

SEGMENTS = f"{MASAKARI_API}:segments:%s"
HOSTS = f"{MASAKARI_API}:os-hosts:%s"
_SEGMENT = "/segments/{segment_id}"
_HOST = "/segments/{segment_id}/hosts/{host_id}"

RULES = [
    admin_rule(SEGMENTS % "index", "List failover segments.", "GET",
               "/segments"),
    admin_rule(SEGMENTS % "detail", "Show a failover segment.", "GET",
               _SEGMENT),
    admin_rule(SEGMENTS % "create", "Create a failover segment.", "POST",
               "/segments"),
    admin_rule(SEGMENTS % "update", "Update a failover segment.", "PUT",
               _SEGMENT),
    admin_rule(SEGMENTS % "delete",
               "Delete a failover segment and its hosts.", "DELETE",
               _SEGMENT),
    admin_rule(HOSTS % "index", "List the hosts of a failover segment.",
               "GET", f"{_SEGMENT}/hosts"),
    admin_rule(HOSTS % "detail", "Show a host of a failover segment.",
               "GET", _HOST),
    admin_rule(HOSTS % "create", "Add a host to a failover segment.",
               "POST", f"{_SEGMENT}/hosts"),
    admin_rule(HOSTS % "update", "Update a host of a failover segment.",
               "PUT", _HOST),
    admin_rule(HOSTS % "delete", "Remove a host from a failover segment.",
               "DELETE", _HOST),
]
