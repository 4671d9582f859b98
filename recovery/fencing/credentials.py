"""The fencing settings of every host: ``[fencing]`` and its credentials
file, read and checked once at start.

A host is fenced by the most specific place that says how: its section
(exact name, else the first matching pattern), else the file's
[DEFAULT], else ``[fencing] driver``. That place names either one
``driver`` (one level of one device) or levels, ``level1 = kdump``,
``level2 = ipmi, scsi``, whose devices are ``[device:NAME]`` sections.
A device takes the connection keys it does not set (address, username,
password, port, system, verify) from the host's. A ``fence_agent``
device may also set the agent's own parameters (lanplus, ssl_insecure,
nodename, ...), which are checked against the agent's metadata.
"""

import dataclasses
import fnmatch
import logging
import os
import re

from oslo_config import cfg

from recovery.exception import ConfigError
from recovery.fencing import devices
from recovery.fencing.credentials_file import Section
from recovery.fencing.credentials_file import read_credentials
from recovery.fencing.fencer import Timing
from recovery.fencing.levels import Device
from recovery.fencing.levels import HostFence
from recovery.fencing.levels import Level
from recovery.fencing.values import CONNECTION
from recovery.fencing.values import DEVICE_PREFIX
from recovery.fencing.values import DRIVERS
from recovery.fencing.values import LEVEL
from recovery.fencing.values import Value
from recovery.fencing.values import check_values
from recovery.fencing.values import says_how
from recovery.fencing.values import timeout

LOG = logging.getLogger(__name__)


class Fencing:
    """Per-host fencing settings, read and checked once."""

    def __init__(self, defaults: dict[str, Value],
                 sections: list[Section], timing: Timing,
                 path: str | None = None, *,
                 file_defaults: dict[str, Value] | None = None,
                 devices: dict[str, Section] | None = None) -> None:
        self._defaults = defaults
        self._file_defaults = file_defaults or {}
        self._exact = {s.name: s for s in sections if not s.is_pattern}
        self._patterns = [s for s in sections if s.is_pattern]
        self._devices = devices or {}
        self._path = path
        self.timing = timing

    def for_host(self, host: str) -> HostFence | None:
        """The host's fencing levels; None when its driver is ``none``.

        Raises ConfigError when a device lacks an address or
        credentials for this host.
        """
        return self._fence(host, self._section(host))

    def _fence(self, host: str, section: Section | None) -> HostFence | None:
        values = _merge(section, self._defaults)
        subject = self._subject(host, section)
        levels = _levels(section, self._file_defaults)
        if not levels:
            driver = values["driver"].text
            if driver == "none":
                return None
            own = section.values if section else self._file_defaults
            name = values["agent"].text if "agent" in values else driver
            return HostFence(host, [Level(1, [self._device(
                host, os.path.basename(name), values, own, subject)])])
        return HostFence(host, [
            Level(number, [self._named(host, name, values, where)
                           for name in names])
            for number, names, where in levels])

    def _named(self, host: str, name: str, host_values: dict[str, Value],
               where: str) -> Device:
        """Device ``name`` of a level, for ``host``."""
        section = self._devices.get(name)
        if section is None:
            raise ConfigError(f"{where}: no [{DEVICE_PREFIX}{name}] section "
                              f"in {self._path}")
        values = {key: host_values[key] for key in CONNECTION
                  if key in host_values}
        values.update(section.values)
        if values.get("driver", Value("none", "")).text == "none":
            raise ConfigError(f"{self._path} [{section.name}]: a device "
                              f"needs a 'driver' ({', '.join(DRIVERS[1:])})")
        return self._device(host, name, values, section.values,
                            f"device {name} of host {host} (section "
                            f"[{section.name}] of {self._path})")

    def _device(self, host: str, name: str, values: dict[str, Value],
                own: dict[str, Value], subject: str) -> Device:
        """One device from its settings; ``own``: the keys its section
        wrote itself (checked strictly), ``subject`` names it in errors."""
        timing = self.timing
        for key in ("timeout", "no_answer_timeout"):
            if key in values:
                timing = dataclasses.replace(
                    timing, **{key: timeout(values[key])})
        driver = values["driver"].text
        if driver == "fence_agent":
            return Device(name, devices.agent_fencer(host, values, own,
                                                     subject, timing))
        if driver == "ceph":
            return Device(name, devices.ceph_fencer(host, values, own,
                                                    subject, timing))
        return Device(name, devices.driver_fencer(host, values, subject,
                                                  timing))

    def _section(self, host: str) -> Section | None:
        if host in self._exact:
            return self._exact[host]
        for section in self._patterns:
            if fnmatch.fnmatchcase(host, section.name):
                return section
        return None

    def _subject(self, host: str, section: Section | None) -> str:
        if section is not None:
            return f"host {host} (section [{section.name}] of {self._path})"
        if self._path:
            return (f"host {host} (no section of {self._path} matches it, "
                    f"so only the file's [DEFAULT] and [fencing] apply)")
        return f"host {host} (no [fencing] credentials_file is set)"

    def check_all(self) -> None:
        """Build every section's fencing for a host it matches, and the
        file's [DEFAULT]'s when it says how to fence; one ConfigError
        with one line per mistake."""
        errors = []
        scopes: list[Section | None] = [*self._exact.values(),
                                         *self._patterns]
        if says_how(self._file_defaults):
            scopes.append(None)
        for section in scopes:
            host = _example_host(section)
            try:
                self._fence(host, section)
            except ConfigError as exc:
                errors.extend(line for line in str(exc).splitlines()
                              if line not in errors)
        used = {name for section in scopes
                for _, names, _ in _levels(section, self._file_defaults)
                for name in names}
        for name in sorted(set(self._devices) - used):
            LOG.warning("[fencing] credentials_file %s: device %s is in no "
                        "host's levels", self._path, name)
        if errors:
            raise ConfigError("\n".join(errors))


def load_fencing(conf: cfg.ConfigOpts) -> Fencing:
    """Read ``[fencing]`` and its credentials file, and check them.

    Every section of the file is checked now (unknown key, bad driver,
    port or verify, missing address or credentials, a fence agent that
    is not installed or lacks a parameter, a level naming no device), so
    a typo stops the engine at start rather than at the first fencing.
    Raises ConfigError, one line per mistake.
    """
    group = conf.fencing
    timing = Timing(timeout=group.timeout, poll_interval=group.poll_interval,
                    attempts=group.attempts,
                    no_answer_timeout=group.no_answer_timeout)
    defaults = {key: Value(str(getattr(group, key)), f"[fencing] {key}")
                for key in ("driver", "address", "username", "password",
                            "verify")
                if getattr(group, key) not in (None, "")}
    check_values(defaults)
    path = group.credentials_file
    file_defaults: dict[str, Value] = {}
    sections: list[Section] = []
    devices: dict[str, Section] = {}
    if path:
        file_defaults, sections = read_credentials(path)
        devices = {s.name.removeprefix(DEVICE_PREFIX): s for s in sections
                   if s.name.startswith(DEVICE_PREFIX)}
        sections = [s for s in sections
                    if not s.name.startswith(DEVICE_PREFIX)]
        defaults.update(file_defaults)
    fencing = Fencing(defaults, sections, timing, path,
                      file_defaults=file_defaults, devices=devices)
    fencing.check_all()
    return fencing


def _example_host(section: Section | None) -> str:
    """A host name the section matches, to check its address template."""
    if section is None:
        return "host"
    if not section.is_pattern:
        return section.name
    return "".join("x" if c in "*?[]" else c for c in section.name)


def _levels(section: Section | None, file_defaults: dict[str, Value]
            ) -> list[tuple[int, list[str], str]]:
    """The levels of the most specific place that says how to fence
    (the host's section, else the file's [DEFAULT]): each level's
    number, device names and where it is written; [] for a driver."""
    for values in (section.values if section else None, file_defaults):
        if not says_how(values):
            continue
        levels = []
        for key, value in sorted(values.items()):
            found = LEVEL.match(key)
            if found:
                names = [name for name in re.split(r"[\s,]+", value.text)
                         if name]
                levels.append((int(found[1]), names, value.where))
        return sorted(levels)
    return []


def _merge(section: Section | None,
           defaults: dict[str, Value]) -> dict[str, Value]:
    """The section's values over ``[fencing]``'s, key by key."""
    values = dict(defaults)
    if section is not None:
        values.update(section.values)
    values.setdefault("driver", Value("none", "[fencing] driver"))
    return values
