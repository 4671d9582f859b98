"""An operator's confirmation that a failed host is off: the proof a
human gives, after checking, when no fencing device can (``recovery
fencing confirm HOST --reason TEXT``, as Pacemaker's ``stonith_admin
--confirm``). It holds for one failure of that host, its notification,
and never for a later one."""

import dataclasses
import datetime


@dataclasses.dataclass(frozen=True)
class Confirmation:
    host: str
    notification_uuid: str
    user: str               # who: the token's user, or the local user
    reason: str             # why, in the operator's words
    at: datetime.datetime   # when (UTC)

    def describe(self) -> str:
        return (f"confirmed off by {self.user} at "
                f"{self.at:%Y-%m-%d %H:%M:%S} UTC: {self.reason}")
