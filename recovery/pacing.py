"""How a fencing device's power-off requests are paced: its lag, learned
from its past fencings.

Some BMCs apply a power-off only after a delay, and start that delay
anew on each request they receive. A request sent again while the first
is pending then makes the host die later, not sooner. So a device whose
past fencings took up to ``longest`` seconds from an accepted request to
the power read Off is not sent another request before that much time
(with a margin) has passed since its last accepted one, within the
fencing's ``timeout``. A device with no past fencing is paced as before:
each request gets an equal share of the timeout.

What a fencing teaches is the time from the last request the device
accepted to the power read Off, or, when an earlier accepted request
went longer with the power still On before another was sent, that time:
a BMC that restarts its delay shows its lag only so.

The store keeps each device's lag (``recovery.db.fence_lags``), so every
engine sharing the database, and every later run, paces it the same way.
"""

import dataclasses
from typing import Protocol

# A request is sent again no sooner than this many times the longest lag
# seen, plus one poll of the power state.
MARGIN = 1.25


@dataclasses.dataclass(frozen=True)
class Lag:
    """A device's lag: the longest time seen from an accepted power-off
    request to the power read Off, the last one, and over how many
    fencings."""

    longest: float
    last: float
    fencings: int

    def resend_after(self, poll_interval: float) -> float:
        """Seconds after an accepted request before another may be sent."""
        return self.longest * MARGIN + poll_interval

    def describe(self, poll_interval: float) -> str:
        return (f"its lag learned over {self.fencings} fencing(s): up to "
                f"{self.longest:.1f} s, so a request is sent again only "
                f"{self.resend_after(poll_interval):.1f} s after one it "
                f"accepted")


class LagBook(Protocol):
    """Where each device's lag is kept (the store), by its key (driver
    and target, e.g. ``redfish https://bmc-1:8000/redfish/v1/Systems/1``:
    never a secret)."""

    def fence_lag(self, device: str) -> Lag | None: ...

    def learn_fence_lag(self, device: str, host: str,
                        seconds: float) -> Lag: ...
