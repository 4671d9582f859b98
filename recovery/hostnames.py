"""Host names as monitors send them.

A monitor often sends a host's FQDN (``compute-7.example.com``) where
Nova's compute service host is ``compute-7``, or the reverse. Masakari
answers 400, which is final for a monitor: the failure is lost (its bugs
LP#1839715 and LP#1866638). Here a name matches Nova's compute host
exactly first, then by the short name (up to the first dot), when exactly
one host has it. Only no match, or several, is refused, naming them.
"""

import dataclasses
from collections.abc import Collection

from recovery import exception

EXACT = "exact"
SHORT_NAME = "short name"


@dataclasses.dataclass(frozen=True)
class HostMatch:
    host: str           # Nova's name for it
    rule: str           # EXACT or SHORT_NAME


def short(name: str) -> str:
    return name.split(".", 1)[0]


def unknown_host(host: str) -> exception.UnknownHost:
    return exception.UnknownHost(
        f"Nova has no nova-compute service on host {host!r}: check the "
        f"name with 'openstack compute service list'")


def match(name: str, hosts: Collection[str]) -> HostMatch:
    """The compute host ``name`` means, among ``hosts`` (Nova's compute
    hosts). Raises ``UnknownHost``."""
    if name in hosts:
        return HostMatch(name, EXACT)
    found = sorted(host for host in hosts if short(host) == short(name))
    if len(found) == 1:
        return HostMatch(found[0], SHORT_NAME)
    if not found:
        raise unknown_host(name)
    raise exception.UnknownHost(
        f"{name!r} matches {len(found)} nova-compute hosts by its short "
        f"name ({', '.join(found)}): send the exact name")
