"""Notifications, their vmoves (Masakari's ``notifications`` and
``vmoves`` rules) and recovery's own reads of them."""

from oslo_policy import policy

from recovery.policies.base import MASAKARI_API
from recovery.policies.base import RECOVERY_API
from recovery.policies.base import admin_rule

NOTIFICATIONS = f"{MASAKARI_API}:notifications:%s"
VMOVES = f"{MASAKARI_API}:vmoves:%s"
EVENTS = f"{RECOVERY_API}:events:%s"
OWNER_READ = f"{RECOVERY_API}:owner:read"
_NOTIFICATION = "/notifications/{notification_id}"
#: The reads an owner's may stand in for, when their own rule refuses.
OWNER_READS = frozenset({NOTIFICATIONS % "index", NOTIFICATIONS % "detail",
                         VMOVES % "index", VMOVES % "detail"})

RULES = [
    admin_rule(NOTIFICATIONS % "index", "List notifications.", "GET",
               "/notifications"),
    admin_rule(NOTIFICATIONS % "detail",
               "Show a notification, with its recovery workflow details "
               "from microversion 1.1.", "GET", _NOTIFICATION),
    admin_rule(NOTIFICATIONS % "create",
               "Send a notification of a failure (what the monitors do).",
               "POST", "/notifications"),
    admin_rule(VMOVES % "index",
               "List the instance moves of a host failure notification.",
               "GET", f"{_NOTIFICATION}/vmoves"),
    admin_rule(VMOVES % "detail", "Show one instance move.", "GET",
               f"{_NOTIFICATION}/vmoves/{{vmove_id}}"),
    admin_rule(EVENTS % "index",
               "List a notification's decision log: who decided what, "
               "and why (recovery's own).", "GET",
               f"{_NOTIFICATION}/events"),
    # Not a route's rule (no operations): it widens the four reads above
    # to the owners of the instances a notification recovered.
    policy.RuleDefault(
        OWNER_READ, "!",
        description="Let a project's users list and show the notifications "
                    "that recovered their project's instances, and those "
                    "instances' vmoves, and nothing else of them: no host "
                    "names, payload or messages, no other project's "
                    "instances (GET /notifications, "
                    "/notifications/{notification_id}, "
                    "/notifications/{notification_id}/vmoves and "
                    "/notifications/{notification_id}/vmoves/{vmove_id}, "
                    "when their own rule refuses the caller). Recovery's "
                    "own. Off by default (\"!\"); an operator turns it on "
                    "with \"role:reader or role:member\"."),
]
