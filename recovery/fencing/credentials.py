"""The fencing settings of every host: ``[fencing]`` and its credentials
file, read and checked once at start."""

import configparser
import dataclasses
import fnmatch
import importlib
import logging
import os
import stat
import urllib.parse

from oslo_config import cfg

from recovery.exception import ConfigError
from recovery.fencing.fencer import IPMI_PORT
from recovery.fencing.fencer import BmcSettings
from recovery.fencing.fencer import Fencer
from recovery.fencing.fencer import Timing
from recovery.fencing.secret import Secret

LOG = logging.getLogger(__name__)

DRIVERS = ("none", "redfish", "ipmi")
KEYS = ("driver", "address", "username", "password", "system", "port",
        "verify")
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
                 path: str | None = None) -> None:
        self._defaults = defaults
        self._exact = {s.name: s for s in sections if not s.is_pattern}
        self._patterns = [s for s in sections if s.is_pattern]
        self._path = path
        self.timing = timing

    def for_host(self, host: str) -> Fencer | None:
        """The host's fencer; None when its driver is ``none``.

        Raises ConfigError when the driver lacks an address or
        credentials for this host.
        """
        section = self._section(host)
        values = _merge(section, self._defaults)
        driver = values["driver"].text
        if driver == "none":
            return None
        settings = _settings(host, values, self._subject(host, section))
        return _driver_class(driver)(settings, self.timing)

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


def load_fencing(conf: cfg.ConfigOpts) -> Fencing:
    """Read ``[fencing]`` and its credentials file, and check them.

    Every section of the file is checked now (unknown key, bad driver,
    port or verify, missing address or credentials), so a typo stops the
    engine at start rather than at the first fencing. Raises ConfigError.
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
    sections: list[_Section] = []
    if path:
        file_defaults, sections = _read_credentials(path)
        defaults.update(file_defaults)
    for section in sections:
        values = _merge(section, defaults)
        if values["driver"].text != "none":
            _settings(_example_host(section), values,
                      f"section [{section.name}] of {path}")
    return Fencing(defaults, sections, timing, path)


def _example_host(section: _Section) -> str:
    """A host name the section matches, to check its address template."""
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
        for key in parser.options(name):
            if key not in KEYS:
                raise ConfigError(
                    f"{where}: unknown key '{key}' (known keys: "
                    f"{', '.join(KEYS)})")
        values = {key: _Value(text.strip(), f"{where} {key}")
                  for key, text in parser.items(name, raw=True)
                  if text.strip()}
        _check_values(values)
        if name == configparser.DEFAULTSECT:
            file_defaults = values
        else:
            sections.append(_Section(name, values))
    return file_defaults, sections


def _first_line(exc: Exception) -> str:
    # configparser quotes the offending line, which may hold a password.
    return str(exc).splitlines()[0]


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
