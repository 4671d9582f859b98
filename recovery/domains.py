"""Failure domains: hosts that fail together, such as a rack or a power
feed, and the mass-failure brake's rule reasoned per domain.

A host's domain is the value of the metadata key ``[safety]
failure_domain_key`` (``failure_domain``) on a Nova host aggregate that
holds it::

    openstack aggregate create rack-12
    openstack aggregate set --property failure_domain=rack-12 rack-12

Aggregates, not failover segments or a host-name pattern: a segment
groups the hosts that take each other's instances, which should span
racks, not be one; a pattern breaks on the first host named against the
convention. An aggregate is where Nova operators already group hosts, it
is visible to every Nova tool, and one request reads them all. A host in
no such aggregate is a domain of its own; a host given two different
domains is one too, with a warning.

The rule (``assess``), over the hosts that are down or in recovery:

- a domain of two hosts or more whose every host has failed is *down as
  a whole*: one event. Its hosts leave the percentage brake, and the
  per-window cap counts the domain once (``recovery.db.claims``);
- more than ``max_failed_domains`` domains down as a whole at once holds
  every host recovery: silence across many domains is more likely a
  partition than as many independent losses;
- the other failed hosts (alone, or in a domain only partly down) meet
  the percentage brake as before, as a share of the hosts outside the
  domains down as a whole.
"""

import collections
import dataclasses
import logging
from collections.abc import Collection
from collections.abc import Mapping

from oslo_config import cfg

from recovery import concurrency
from recovery import exception
from recovery.nova import Nova

LOG = logging.getLogger(__name__)

# How long a reading of the aggregates serves: a domain changes when an
# operator re-cables a rack, not from one host failure to the next.
REFRESH_SECONDS = 60.0


@dataclasses.dataclass(frozen=True)
class Assessment:
    """What the rule says of a set of failed hosts."""

    # Each domain down as a whole, with its hosts.
    whole: Mapping[str, frozenset[str]]
    # The brake's reason (a metric label) and verdict, or None.
    reason: str | None = None
    verdict: str | None = None

    def domain_of(self, host: str) -> str | None:
        """The domain down as a whole that ``host`` is part of."""
        for name, hosts in self.whole.items():
            if host in hosts:
                return name
        return None

    def describe_whole(self) -> str:
        return ", ".join(f"{name} ({len(hosts)} hosts)"
                         for name, hosts in sorted(self.whole.items()))


def assess(failed: Collection[str], hosts: Collection[str],
           domain_of: Mapping[str, str], *, max_percent: float,
           max_domains: int, noun: str,
           state: str = "are down or in recovery",
           at_least: int = 1) -> Assessment:
    """The rule for ``failed``, out of ``hosts``, grouped by
    ``domain_of`` (host -> domain; a host missing is its own domain).
    ``noun`` names the hosts in a verdict, ``state`` what the failed ones
    are. The percentage brake engages only with ``at_least`` failed
    hosts outside whole domains."""
    hosts = set(hosts)
    failed = set(failed) & hosts
    members: dict[str, set[str]] = collections.defaultdict(set)
    for host in hosts:
        if host in domain_of:
            members[domain_of[host]].add(host)
    whole = {name: frozenset(group) for name, group in members.items()
             if len(group) >= 2 and group <= failed}
    if len(whole) > max_domains:
        names = ", ".join(sorted(whole))
        return Assessment(whole, "many_domains", (
            f"{len(whole)} failure domains are down as a whole at once "
            f"({names}; max_failed_domains {max_domains}): more likely a "
            f"network partition than {len(whole)} independent losses"))
    inside = set().union(*whole.values())
    alone, rest = failed - inside, hosts - inside
    share = 100 * len(alone) / max(len(rest), 1)
    if len(alone) >= at_least and share > max_percent:
        where = " outside the failure domains down as a whole" \
            if whole else ""
        return Assessment(whole, "too_many_down", (
            f"{len(alone)} of {len(rest)} {noun}{where} {state} "
            f"({share:.0f}% > max_failed_hosts_percent "
            f"{max_percent:g}%)"))
    return Assessment(whole)


class FailureDomains:
    """Each host's failure domain, read from Nova's host aggregates at most
    every ``REFRESH_SECONDS``."""

    def __init__(self, conf: cfg.ConfigOpts, nova: Nova,
                 clock: concurrency.Clock):
        self._conf, self._nova, self._clock = conf, nova, clock
        self._read: tuple[str, float] | None = None   # key, when
        self._map: dict[str, str] = {}

    def of_hosts(self) -> dict[str, str]:
        """host -> domain. Empty when no key is set, and when Nova cannot
        say: a domain only ever relaxes a brake, so in doubt none
        does."""
        key = self._conf.safety.failure_domain_key
        if not key:
            return {}
        now = self._clock.monotonic()
        if (self._read is not None and self._read[0] == key
                and now - self._read[1] < REFRESH_SECONDS):
            return self._map
        try:
            aggregates = self._nova.list_aggregates()
        except exception.NovaError as exc:
            LOG.warning("Failure domains unknown: could not list Nova's "
                        "host aggregates (%s); every host counts alone "
                        "until they can be read", exc)
            # Asked again at the next refresh, not at every check.
            self._map, self._read = {}, (key, now)
            return self._map
        found: dict[str, set[str]] = collections.defaultdict(set)
        for aggregate in aggregates:
            value = aggregate.property(key)
            if value:
                for host in aggregate.hosts:
                    found[host].add(value)
        for host, values in sorted(found.items()):
            if len(values) > 1:
                LOG.warning("Host %s is in aggregates of different failure "
                            "domains (%s = %s): it counts alone", host, key,
                            ", ".join(sorted(values)))
        self._map = {host: values.pop() for host, values in found.items()
                     if len(values) == 1}
        self._read = (key, now)
        return self._map
