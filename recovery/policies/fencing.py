"""Fencing: an operator's confirmation that a host is off (recovery's
own)."""

from recovery.policies.base import RECOVERY_API
from recovery.policies.base import admin_rule

FENCING = f"{RECOVERY_API}:fencing:%s"

RULES = [
    admin_rule(FENCING % "confirm",
               "Confirm that a failed host is off, as 'recovery fencing "
               "confirm' does: the proof a human gives after checking it, "
               "for its current failure only, recorded with the caller "
               "as its author (recovery's own). Refused while Nova hears "
               "from the host or it answers the liveness probe.", "POST",
               "/fencing/{hostname}/confirm"),
]
