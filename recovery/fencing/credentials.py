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

import configparser
import dataclasses
import fnmatch
import importlib
import logging
import os
import re
import stat
import urllib.parse

from oslo_config import cfg

from recovery.exception import ConfigError
from recovery.fencing.fencer import IPMI_PORT
from recovery.fencing.fencer import BmcSettings
from recovery.fencing.fencer import Fencer
from recovery.fencing.fencer import Timing
from recovery.fencing.levels import Device
from recovery.fencing.levels import HostFence
from recovery.fencing.levels import Level
from recovery.fencing.secret import Secret

LOG = logging.getLogger(__name__)

DRIVERS = ("none", "redfish", "ipmi", "fence_agent")
# The connection keys a device takes from its host when it sets none.
CONNECTION = ("address", "username", "password", "system", "port",
              "verify")
KEYS = ("driver", *CONNECTION, "agent", "timeout", "level<N>")
LEVEL = re.compile(r"level([1-9][0-9]?)$")
DEVICE_PREFIX = "device:"
REDFISH_SYSTEMS = "/redfish/v1/Systems/"

_DRIVER_CLASSES = {"redfish": ("recovery.fencing.redfish", "RedfishFencer"),
                   "ipmi": ("recovery.fencing.ipmi", "IpmiFencer")}
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


@dataclasses.dataclass(frozen=True)
class _Value:
    """One setting and where it was written, for error messages."""

    text: str
    where: str


@dataclasses.dataclass(frozen=True)
class _Section:
    name: str                      # host name or fnmatch pattern
    values: dict[str, _Value]

    @property
    def is_pattern(self) -> bool:
        return any(c in self.name for c in "*?[")


class Fencing:
    """Per-host fencing settings, read and checked once."""

    def __init__(self, defaults: dict[str, _Value],
                 sections: list[_Section], timing: Timing,
                 path: str | None = None, *,
                 file_defaults: dict[str, _Value] | None = None,
                 devices: dict[str, _Section] | None = None) -> None:
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

    def _fence(self, host: str, section: _Section | None) -> HostFence | None:
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

    def _named(self, host: str, name: str, host_values: dict[str, _Value],
               where: str) -> Device:
        """Device ``name`` of a level, for ``host``."""
        section = self._devices.get(name)
        if section is None:
            raise ConfigError(f"{where}: no [{DEVICE_PREFIX}{name}] section "
                              f"in {self._path}")
        values = {key: host_values[key] for key in CONNECTION
                  if key in host_values}
        values.update(section.values)
        if values.get("driver", _Value("none", "")).text == "none":
            raise ConfigError(f"{self._path} [{section.name}]: a device "
                              f"needs a 'driver' ({', '.join(DRIVERS[1:])})")
        return self._device(host, name, values, section.values,
                            f"device {name} of host {host} (section "
                            f"[{section.name}] of {self._path})")

    def _device(self, host: str, name: str, values: dict[str, _Value],
                own: dict[str, _Value], subject: str) -> Device:
        """One device from its settings; ``own``: the keys its section
        wrote itself (checked strictly), ``subject`` names it in errors."""
        timing = self.timing
        if "timeout" in values:
            timing = dataclasses.replace(timing,
                                         timeout=_timeout(values["timeout"]))
        driver = values["driver"].text
        if driver == "fence_agent":
            return Device(name, _agent_fencer(host, values, own, subject,
                                              timing))
        settings = _settings(host, values, subject)
        return Device(name, _driver_class(driver)(settings, timing))

    def _section(self, host: str) -> _Section | None:
        if host in self._exact:
            return self._exact[host]
        for section in self._patterns:
            if fnmatch.fnmatchcase(host, section.name):
                return section
        return None

    def _subject(self, host: str, section: _Section | None) -> str:
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
        scopes: list[_Section | None] = [*self._exact.values(),
                                         *self._patterns]
        if _says_how(self._file_defaults):
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
                    attempts=group.attempts)
    defaults = {key: _Value(str(getattr(group, key)), f"[fencing] {key}")
                for key in ("driver", "address", "username", "password",
                            "verify")
                if getattr(group, key) not in (None, "")}
    _check_values(defaults)
    path = group.credentials_file
    file_defaults: dict[str, _Value] = {}
    sections: list[_Section] = []
    devices: dict[str, _Section] = {}
    if path:
        file_defaults, sections = _read_credentials(path)
        devices = {s.name.removeprefix(DEVICE_PREFIX): s for s in sections
                   if s.name.startswith(DEVICE_PREFIX)}
        sections = [s for s in sections
                    if not s.name.startswith(DEVICE_PREFIX)]
        defaults.update(file_defaults)
    fencing = Fencing(defaults, sections, timing, path,
                      file_defaults=file_defaults, devices=devices)
    fencing.check_all()
    return fencing


def _example_host(section: _Section | None) -> str:
    """A host name the section matches, to check its address template."""
    if section is None:
        return "host"
    if not section.is_pattern:
        return section.name
    return "".join("x" if c in "*?[]" else c for c in section.name)


def _read_credentials(path: str) -> tuple[dict[str, _Value],
                                          list[_Section]]:
    """The file's [DEFAULT] values and its sections, in file order."""
    # No inheritance by configparser: [DEFAULT] is applied by _merge, to
    # every host, and each value keeps the section it was written in.
    parser = configparser.ConfigParser(interpolation=None,
                                       default_section="\0")
    try:
        with open(path, encoding="utf-8") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            parser.read_file(handle)
    except OSError as exc:
        raise ConfigError(
            f"[fencing] credentials_file {path} cannot be read: "
            f"{exc.strerror}") from exc
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"[fencing] credentials_file {path} is not a valid INI file: "
            f"{_first_line(exc)}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        LOG.warning("[fencing] credentials_file %s is readable by other "
                    "users than its owner; it holds BMC passwords "
                    "(chmod 600)", path)
    file_defaults: dict[str, _Value] = {}
    sections = []
    for name in parser.sections():
        where = f"{path} [{name}]"
        values = {key: _Value(text.strip(), f"{where} {key}")
                  for key, text in parser.items(name, raw=True)
                  if text.strip()}
        for value in values.values():
            if "\n" in value.text:
                # Not echoed: it may be a password. An agent reads one
                # parameter a line: a second line would be another.
                raise ConfigError(f"{value.where}: a value is one line; "
                                  f"this one goes on (an indented line "
                                  f"under it continues it)")
        _check_values(values)
        is_device = name.startswith(DEVICE_PREFIX)
        if is_device and not re.fullmatch(r"[\w.-]+",
                                          name[len(DEVICE_PREFIX):]):
            raise ConfigError(f"{where}: a device section is "
                              f"[{DEVICE_PREFIX}NAME], NAME of letters, "
                              f"digits, '.', '-' and '_'")
        if is_device and any(LEVEL.match(key) for key in values):
            raise ConfigError(f"{where}: a device has no levels; name the "
                              f"device in a host's levelN")
        if "driver" in values and any(
                LEVEL.match(key) for key in values):
            raise ConfigError(f"{where}: sets both 'driver' and levels; a "
                              f"host is fenced by one driver or by levels "
                              f"of [{DEVICE_PREFIX}NAME] devices")
        if name == configparser.DEFAULTSECT:
            file_defaults = values
        else:
            sections.append(_Section(name, values))
    _check_keys(file_defaults, _is_agent(file_defaults))
    for section in sections:
        _check_keys(section.values, _is_agent(section.values) or (
            not _says_how(section.values) and _is_agent(file_defaults)
            and not section.name.startswith(DEVICE_PREFIX)))
    return file_defaults, sections


def _is_agent(values: dict[str, _Value]) -> bool:
    return "driver" in values and values["driver"].text == "fence_agent"


def _check_keys(values: dict[str, _Value], agent: bool) -> None:
    """Only a fence agent's section (one that says ``driver =
    fence_agent``, or a host's that inherits it from [DEFAULT]) may set
    keys of its own: the agent's parameters, checked against its
    metadata when the device is built."""
    if agent:
        return
    for key, value in values.items():
        if not _is_known(key) or key == "agent":
            raise ConfigError(
                f"{value.where}: unknown key '{key}' (known keys: "
                f"{', '.join(KEYS)}; an agent's own parameters go in a "
                f"section with driver = fence_agent)")


def _first_line(exc: Exception) -> str:
    # configparser quotes the offending line, which may hold a password.
    return str(exc).splitlines()[0]


def _is_known(key: str) -> bool:
    return key in KEYS or bool(LEVEL.match(key))


def _says_how(values: dict[str, _Value] | None) -> bool:
    """Whether these values say how to fence: a driver or levels."""
    return bool(values) and ("driver" in values or any(
        LEVEL.match(key) for key in values))


def _levels(section: _Section | None, file_defaults: dict[str, _Value]
            ) -> list[tuple[int, list[str], str]]:
    """The levels of the most specific place that says how to fence
    (the host's section, else the file's [DEFAULT]): each level's
    number, device names and where it is written; [] for a driver."""
    for values in (section.values if section else None, file_defaults):
        if not _says_how(values):
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


def _check_values(values: dict[str, _Value]) -> None:
    """Checks that do not depend on the host."""
    if "driver" in values and values["driver"].text not in DRIVERS:
        value = values["driver"]
        raise ConfigError(f"{value.where}: unknown driver "
                          f"'{value.text}' (one of {', '.join(DRIVERS)})")
    if "port" in values:
        _port(values["port"])
    if "verify" in values:
        _verify(values["verify"])
    if "timeout" in values:
        _timeout(values["timeout"])


def _merge(section: _Section | None,
           defaults: dict[str, _Value]) -> dict[str, _Value]:
    """The section's values over ``[fencing]``'s, key by key."""
    values = dict(defaults)
    if section is not None:
        values.update(section.values)
    values.setdefault("driver", _Value("none", "[fencing] driver"))
    return values


def _settings(host: str, values: dict[str, _Value],
              subject: str) -> BmcSettings:
    """The settings of ``host``; ``subject`` names it in errors."""
    driver = values["driver"].text
    for key in ("address", "username", "password"):
        if key not in values:
            raise ConfigError(
                f"driver {driver} needs '{key}' for {subject}: set it in "
                f"the host's section of the credentials file or in "
                f"[fencing] {key} of recovery.conf")
    address = values["address"]
    templated = _Value(address.text.replace("{host}", host), address.where)
    if driver == "redfish":
        target = _redfish_url(templated)
    else:
        target = _ipmi_address(templated)
    return BmcSettings(
        host=host, driver=driver, address=target,
        username=values["username"].text,
        password=Secret(values["password"].text),
        system=_system(values.get("system")),
        port=_port(values["port"]) if "port" in values else IPMI_PORT,
        verify=_verify(values["verify"]) if "verify" in values else True)


def _agent_fencer(host: str, values: dict[str, _Value],
                  own: dict[str, _Value], subject: str,
                  timing: Timing) -> Fencer:
    """A ``fence_agent`` device: the connection keys mapped to the
    agent's parameters (where it has them: a key the device inherited
    and the agent lacks is left out, one it set itself is a mistake),
    its own parameters checked against its metadata."""
    from recovery.fencing import agent as agents

    if "agent" not in values:
        raise ConfigError(f"driver fence_agent needs 'agent' (fence_ipmilan, "
                          f"fence_redfish, ...) for {subject}")
    name = values["agent"]
    path = agents.find_agent(name.text, name.where)
    info = agents.metadata(path)
    parameters: dict[str, str] = {}
    errors: list[str] = []

    def put(key: str, parameter: str, text: str) -> None:
        if parameter in info.parameters:
            parameters[parameter] = text
        elif key in own:
            errors.append(f"{own[key].where}: {os.path.basename(path)} has "
                          f"no parameter '{parameter}' to take '{key}'")

    for key in CONNECTION:
        if key not in values:
            continue
        value = values[key]
        text = value.text.replace("{host}", host)
        if key == "address":
            _put_address(put, _Value(text, value.where))
        elif key == "port":
            put(key, "ipport", str(_port(value)))
        elif key == "username":
            put(key, "username" if "username" in info.parameters
                else "login", text)
        elif key == "password":
            put(key, "password", "")     # checked; passed apart
        elif key == "system":
            put(key, "systems_uri", _system(value) or "")
        elif key == "verify":
            verify = _verify(value)
            if verify is False:
                put(key, "ssl_insecure", "1")
            elif verify is not True and key in own:
                errors.append(f"{value.where}: fence agents take no CA "
                              f"bundle; set verify = true (the system's "
                              f"CA store) or false")
    for key, value in values.items():
        if _is_known(key):
            continue
        if key in agents.RESERVED:
            errors.append(f"{value.where}: '{key}' cannot be set: "
                          f"{agents.RESERVED[key]}")
        elif key not in info.parameters:
            errors.append(f"{value.where}: {os.path.basename(path)} has no "
                          f"parameter '{key}' (its parameters: "
                          f"'{os.path.basename(path)} -o metadata')")
        else:
            parameters[key] = value.text.replace("{host}", host)
    if errors:
        raise ConfigError("\n".join(errors))
    password = parameters.pop("password", None)
    settings = BmcSettings(
        host=host, driver=os.path.basename(path),
        address=parameters.get("ip", ""),
        username=values["username"].text if "username" in values else "",
        password=Secret(values["password"].text
                        if password is not None else ""))
    return agents.AgentFencer(settings, timing, path=path,
                              parameters=parameters)


def _put_address(put, value: _Value) -> None:
    """An address is the agent's ``ip``; a URL's port its ``ipport``."""
    if "://" not in value.text:
        put("address", "ip", value.text)
        return
    url = _redfish_url(value)
    parsed = urllib.parse.urlsplit(url)
    put("address", "ip", parsed.hostname or "")
    if parsed.port:
        put("address", "ipport", str(parsed.port))


def _timeout(value: _Value) -> float:
    try:
        seconds = float(value.text)
    except ValueError:
        seconds = 0.0
    if not seconds >= 1.0:
        raise ConfigError(f"{value.where}: '{value.text}' is not a timeout "
                          f"in seconds (1 or more)")
    return seconds


def _redfish_url(value: _Value) -> str:
    text = value.text if "://" in value.text else f"https://{value.text}"
    url = urllib.parse.urlsplit(text)
    if "@" in url.netloc:
        # Not echoed: the part before '@' may be a password.
        raise ConfigError(f"{value.where}: the address holds credentials "
                          f"(user:password@); put them in username and "
                          f"password instead")
    try:
        valid = (url.scheme in ("http", "https") and bool(url.hostname)
                 and url.port != 0)
    except ValueError:   # a bad port or IPv6 literal
        valid = False
    if not valid:
        raise ConfigError(f"{value.where}: '{value.text}' is not a Redfish "
                          f"address (https://name[:port])")
    if url.path.rstrip("/") not in ("", "/redfish/v1") or url.query:
        raise ConfigError(f"{value.where}: '{value.text}' has a path; give "
                          f"the BMC as https://name[:port] and the system "
                          f"in 'system'")
    return f"{url.scheme}://{url.netloc}"


def _ipmi_address(value: _Value) -> str:
    if not value.text or any(c in value.text for c in "/@ "):
        raise ConfigError(f"{value.where}: '{value.text}' is not an IPMI "
                          f"address (a host name or IP address; the port "
                          f"goes in 'port')")
    return value.text


def _system(value: _Value | None) -> str | None:
    if value is None:
        return None
    if value.text.startswith("/"):
        return value.text.rstrip("/")
    return REDFISH_SYSTEMS + value.text.strip("/")


def _port(value: _Value) -> int:
    try:
        port = int(value.text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise ConfigError(f"{value.where}: '{value.text}' is not a port "
                          f"number (1-65535)")
    return port


def _verify(value: _Value) -> bool | str:
    lowered = value.text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    if not os.path.exists(value.text):
        raise ConfigError(f"{value.where}: '{value.text}' is neither "
                          f"true, false nor an existing CA bundle path")
    return value.text


def _driver_class(driver: str) -> type[Fencer]:
    module_name, class_name = _DRIVER_CLASSES[driver]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"fencing driver {driver} cannot be loaded: "
                          f"{exc}") from exc
    return getattr(module, class_name)
