"""``/metrics`` behind the API's authentication (recovery's own)."""

from recovery.policies.base import RECOVERY_API
from recovery.policies.base import admin_rule

METRICS = f"{RECOVERY_API}:metrics:%s"
PATH = "/metrics"

RULES = [
    admin_rule(METRICS % "index",
               "Read the Prometheus metrics, where /metrics is served "
               "behind the API's authentication.", "GET", PATH),
]
