"""What the detector keeps of the hosts it watches, and tells of them:
one record per host between polls (``Watch``), its verdict at a poll
(``Verdict``), and what a whole poll saw (``Cycle``)."""

import dataclasses
import enum

from recovery.engine.silence import HoldCause


class Verdict(enum.StrEnum):
    """A watched host at one poll, as the ``detector_hosts`` metric's
    label says it."""

    UP = "up"
    # Down (or stale) within grace_period, or stale for the fast path.
    SUSPECT = "suspect"
    # Past it: failed, or left alone (an operator's, recovered already).
    DOWN = "down"


@dataclasses.dataclass
class Watch:
    """One watched host's episode, in monotonic times: from when it was
    first seen stale or down, until it heartbeats again (or leaves the
    watch). A record with nothing in it is dropped."""

    # First seen down by Nova: the slow path's grace runs from it.
    down_since: float | None = None
    # First seen stale (or down by Nova): its suspect event is written.
    stale_since: float | None = None
    # Recovered, and first seen heartbeating again.
    returning_since: float | None = None
    # The fast path's hold, told once for as long as it lasts.
    held: HoldCause | None = None
    # Silent and stale, without a majority of engines yet.
    waiting_since: float | None = None

    def empty(self) -> bool:
        return self == Watch()


@dataclasses.dataclass(frozen=True)
class Cycle:
    """What one poll saw, for the decision line."""

    watched: int
    up: int
    suspects: tuple[tuple[str, str], ...]       # host, what is seen
    decisions: tuple[str, ...]                  # one per failed host
    returns: tuple[str, ...] = ()               # one per returning host
    hold: str | None = None                     # the fast path held

    def line(self) -> str:
        parts = [f"{self.watched} hosts", f"{self.up} up"]
        if self.suspects:
            parts.append(f"{len(self.suspects)} suspect (" + "; ".join(
                f"{host}, {seen}" for host, seen in self.suspects) + ")")
        if self.hold:
            parts.append(f"fast path held: {self.hold}")
        if self.decisions:
            parts.append(f"{len(self.decisions)} failed -> "
                         + "; ".join(self.decisions))
        if self.returns:
            parts.append(f"{len(self.returns)} back -> "
                         + "; ".join(self.returns))
        return "detector: " + ", ".join(parts)

    def shape(self) -> tuple:
        """What makes a line worth writing: not the ages."""
        return (self.watched, self.up,
                tuple(host for host, _ in self.suspects), self.decisions,
                self.returns, self.hold)

    def counts(self) -> dict[Verdict, int]:
        """The watched hosts by verdict."""
        suspect = len(self.suspects)
        return {Verdict.UP: self.up, Verdict.SUSPECT: suspect,
                Verdict.DOWN: self.watched - self.up - suspect}
