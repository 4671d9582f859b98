"""Notifications, their vmoves (Masakari's ``notifications`` and
``vmoves`` rules) and recovery's own reads of them."""

from recovery.policies.base import MASAKARI_API
from recovery.policies.base import RECOVERY_API
from recovery.policies.base import admin_rule

NOTIFICATIONS = f"{MASAKARI_API}:notifications:%s"
VMOVES = f"{MASAKARI_API}:vmoves:%s"
EVENTS = f"{RECOVERY_API}:events:%s"
_NOTIFICATION = "/notifications/{notification_id}"

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
]
