"""Live migrations of a host's instances: a drain, and bringing them
home (recovery's own)."""

from recovery.policies.base import RECOVERY_API
from recovery.policies.base import admin_rule

HOSTS = f"{RECOVERY_API}:host-actions:%s"

RULES = [
    admin_rule(HOSTS % "drain",
               "Drain a host that is up, as 'recovery host-drain' does: "
               "disable it and live-migrate its instances away, run by the "
               "engine and recorded with the caller and the reason "
               "(recovery's own).", "POST", "/host-actions/{hostname}/drain"),
    admin_rule(HOSTS % "bring_back",
               "Return a repaired host and live-migrate back the instances "
               "its last failure evacuated, as 'recovery host-return "
               "--bring-back' does, run by the engine and recorded with "
               "the caller and the reason (recovery's own).", "POST",
               "/host-actions/{hostname}/bring-back"),
]
