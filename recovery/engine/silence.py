"""When the detector's fast path may trust a probe's silence: the two
rules it applies, beside the detector (the store only keeps the engines'
views, ``recovery.db.control.ProbeViews``; it decides nothing).

- The brake on one engine's probes (``silence_verdict``): the
  mass-failure brake's rule (``recovery.domains.assess``) over the hosts
  this engine probes. An engine that finds too many of them silent at
  once suspects its own network and fails none of them.
- The majority (``agreements``): a host fails fast only once a majority
  of the live engines see it silent.
"""

import dataclasses
import enum
from collections.abc import Collection
from collections.abc import Mapping

from oslo_config import cfg

from recovery.db.control import ProbeViews
from recovery.domains import assess
from recovery.identity import owner_gone
from recovery.metrics import METRICS


class HoldCause(enum.StrEnum):
    """Why the fast path holds, as its metric's label says it."""

    # This engine sees too many hosts silent: its own network, likely.
    ISOLATED = "isolated"
    # Too few live engines see a host silent.
    NO_AGREEMENT = "no_agreement"


@dataclasses.dataclass(frozen=True)
class Agreement:
    """Which live engines see a host silent, long enough and lately."""

    silent: tuple[str, ...]
    live: tuple[str, ...]

    @property
    def needed(self) -> int:
        """A majority of the live engines."""
        return len(self.live) // 2 + 1

    @property
    def reached(self) -> bool:
        return len(self.silent) >= self.needed

    def describe(self) -> str:
        names = f" ({', '.join(self.silent)})" if self.silent else ""
        return (f"{len(self.silent)} of {len(self.live)} live engine(s) "
                f"see it silent{names}, {self.needed} needed")


def live_engines(views: ProbeViews, engine: str) -> set[str]:
    """The engines the majority is taken over: ``engine`` itself, and
    those the registry saw within a lease, less the ones known to be gone.

    An engine that crashed stays in the registry until its row is a
    lease old, and counts as live until then: a majority of more engines
    than run. Only proof takes it out sooner: its process is known to
    have exited (``owner_gone``: its name is a process of this machine
    whose pid is gone; a clean stop deletes its row already). Nothing
    weaker does, such as a row a little older than the engines' report
    interval: an engine counted dead that is not lowers the majority, and
    a minority cut off from the others could then fail (and fence) a host
    that they can still reach."""
    return {name for name in views.live if not owner_gone(name)} | {engine}


def agreements(views: ProbeViews, engine: str) -> dict[str, Agreement]:
    """For each host of ``views``: which of the live engines (as
    ``live_engines`` says) see it silent, and whether they are a
    majority."""
    live = live_engines(views, engine)
    return {host: Agreement(tuple(sorted(names & live)), tuple(sorted(live)))
            for host, names in views.silent.items()}


def silence_verdict(silent: Collection[str], probed: Collection[str],
                    domain_of: Mapping[str, str],
                    group: cfg.ConfigOpts) -> str | None:
    """The brake's rule for one engine's probes, from ``group``
    (``[safety]``): when more than ``max_failed_hosts_percent`` of the
    ``probed`` hosts are ``silent`` at once (two at least), or more
    failure domains than ``max_failed_domains`` are silent as a whole,
    the engine is more likely cut off from them than looking at dead
    hosts. A domain silent as a whole leaves the percentage. The
    verdict, or None."""
    verdict = assess(silent, probed, domain_of,
                     max_percent=group.max_failed_hosts_percent,
                     max_domains=group.max_failed_domains,
                     noun="watched hosts",
                     state="are silent on its liveness probe at once",
                     at_least=2).verdict
    METRICS.brake.labels("silent_probes").set(verdict is not None)
    return verdict
