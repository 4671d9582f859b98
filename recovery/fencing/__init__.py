"""Fencing: power a failed host off through its BMC, and prove it.

An instance must not run twice. Before anything of a failed host is
evacuated, its BMC is asked to cut the power and the power state is read
back until the BMC says Off; if that cannot be shown within
``[fencing] timeout``, nothing is evacuated (``FencingError``).

``load_fencing(conf)`` reads ``[fencing]`` and the credentials file once
and checks them; ``Fencing.for_host(host)`` picks the host's settings
(exact section, else first matching pattern, else ``[fencing]``) and
returns a ``Fencer`` of the host's driver, or None for driver ``none``.

The drivers (``redfish``, ``ipmi``) are imported only when a host needs
them, so sushy and pyghmi are imported by their own module only. Each
driver module is the one place where its library's errors become
``FencingError``. Passwords are held in ``Secret`` and never appear in a
message, a log line or a repr.
"""

import configparser
import dataclasses
import fnmatch
import importlib
import logging
import os
import stat
import urllib.parse
from collections.abc import Callable
from typing import Any
from typing import TypeVar

from oslo_config import cfg

from recovery import concurrency
from recovery.exception import ConfigError
from recovery.exception import FencingError
from recovery.exception import WaitTimeout
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

T = TypeVar("T")

DRIVERS = ("none", "redfish", "ipmi")
KEYS = ("driver", "address", "username", "password", "system", "port",
        "verify")
IPMI_PORT = 623
REDFISH_SYSTEMS = "/redfish/v1/Systems/"

_DRIVER_CLASSES = {"redfish": ("recovery.fencing.redfish", "RedfishFencer"),
                   "ipmi": ("recovery.fencing.ipmi", "IpmiFencer")}
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


class BmcRefused(FencingError):
    """The BMC refused for a reason asking again cannot fix (credentials,
    unknown system, unsupported action): fencing stops at once, and a
    wrong password is not hammered into an account lock-out."""


class Secret:
    """A password that shows as ``***`` in str, repr and logs."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        """``text`` with every occurrence of the secret masked: the last
        guard before a library's message reaches a log or an operator."""
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "'***'"

    def __str__(self) -> str:
        return "***"


@dataclasses.dataclass(frozen=True)
class Timing:
    """How long one fencing may take, and how it paces itself."""

    timeout: float
    poll_interval: float
    attempts: int


@dataclasses.dataclass(frozen=True)
class BmcSettings:
    """Everything a driver needs to reach one host's BMC."""

    host: str
    driver: str
    address: str        # redfish: scheme://name[:port]; ipmi: name or IP
    username: str
    password: Secret
    system: str | None = None     # redfish system path; None: the only one
    port: int = IPMI_PORT         # ipmi
    verify: bool | str = True     # redfish TLS: bool or CA bundle path


# -- the power-off ----------------------------------------------------------

@dataclasses.dataclass
class _Progress:
    """What one fencing has seen so far, for its final message."""

    requests: int = 0
    state: str | None = None
    error: FencingError | None = None


class Fencer:
    """Powers one host off through its BMC and verifies it is Off.

    Made by ``Fencing.for_host`` for one fencing at a time (it keeps the
    BMC session of the running ``power_off``). A driver implements
    ``describe``, ``_target``, ``_send_off``, ``_read_power`` and
    ``_close``; each BMC call it makes is bounded by the seconds it is
    given (``call_bounded``). The loop here is the same for every driver.
    """

    driver: str = ""

    def __init__(self, settings: BmcSettings, timing: Timing) -> None:
        self.settings = settings
        self.timing = timing

    def describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    # -- driver hooks ------------------------------------------------------
    def _send_off(self, seconds: float) -> None:
        """Send one power-off request; raise FencingError on failure."""
        raise NotImplementedError

    def _read_power(self, seconds: float) -> str:
        """Read the power state ("On", "Off", ...); FencingError if not."""
        raise NotImplementedError

    def _close(self) -> None:
        """Release the BMC session, best effort."""

    # -- the loop ------------------------------------------------------------
    def power_off(self, clock: concurrency.Clock) -> str:
        """Power the host off and read the power back until it is Off.

        Each power-off request gets an equal share of the time left; the
        request is sent again when its share ends with the power not
        shown Off. Returns what was done; raises FencingError (BmcRefused
        for a refusal) when Off is not shown within ``timeout``.
        """
        started = clock.monotonic()
        deadline = started + self.timing.timeout
        progress = _Progress()
        LOG.info("Fencing %s: %s", self.settings.host, self.describe())
        try:
            for attempt in range(self.timing.attempts):
                now = clock.monotonic()
                if now >= deadline:
                    break
                share = (deadline - now) / (self.timing.attempts - attempt)
                if self._attempt(clock, now + share, progress):
                    return self._done(clock.monotonic() - started, progress)
        except BmcRefused as exc:
            LOG.error("Fencing %s failed: %s", self.settings.host, exc)
            raise
        finally:
            self._close()
        error = FencingError(self._failure(progress))
        LOG.error("Fencing %s failed: %s", self.settings.host, error)
        raise error

    def _attempt(self, clock: concurrency.Clock, until: float,
                 progress: _Progress) -> bool:
        """One power-off request, then wait for Off until ``until``.

        A failed request still waits: the BMC may have acted on it and
        only its answer been lost.
        """
        progress.requests += 1
        try:
            self._send_off(until - clock.monotonic())
        except BmcRefused:
            raise
        except FencingError as exc:
            progress.error = exc
            LOG.warning("Fencing %s: power-off request %d failed: %s",
                        self.settings.host, progress.requests, exc)
        else:
            LOG.info("Fencing %s: power-off request %d accepted, waiting "
                     "for the power to read Off", self.settings.host,
                     progress.requests)

        def is_off() -> bool:
            left = until - clock.monotonic()
            if left <= 0:
                return False
            try:
                progress.state = self._read_power(left)
            except BmcRefused:
                raise
            except FencingError as exc:
                if str(exc) != str(progress.error):   # once, not per poll
                    LOG.warning("Fencing %s: cannot read the power state: "
                                "%s", self.settings.host, exc)
                progress.error = exc
                return False
            return progress.state == "Off"

        try:
            wait_for(is_off, what=f"{self.settings.host} to read Off",
                     timeout=max(until - clock.monotonic(), 0.0),
                     interval=self.timing.poll_interval, clock=clock)
        except WaitTimeout:
            return False
        return True

    def _done(self, elapsed: float, progress: _Progress) -> str:
        message = (f"powered off through {self.driver} {self._target()}, "
                   f"verified Off after {elapsed:.1f} s")
        if progress.requests > 1:
            message += f" ({progress.requests} power-off requests)"
        LOG.info("Fencing %s: %s", self.settings.host, message)
        return message

    def _failure(self, progress: _Progress) -> str:
        details = []
        if progress.state is not None:
            details.append(f"the power last read {progress.state}")
        if progress.error is not None:
            error = str(progress.error).removeprefix(f"{self.describe()}: ")
            details.append(f"last BMC error: {error}")
        if not details:
            details.append("the power state could not be read")
        return self.settings.password.scrub(
            f"{self.describe()}: power not verified Off within "
            f"{self.timing.timeout:g} s after {progress.requests} power-off "
            f"request(s); " + "; ".join(details))

    def _target(self) -> str:
        """The BMC (and system) acted on, for messages."""
        raise NotImplementedError


def call_bounded(fn: Callable[[], T], seconds: float) -> T:
    """Return ``fn()``, or raise FencingError if it takes over ``seconds``.

    A library's own timeouts bound each packet or request, not a whole
    call (sushy makes several requests, and may retry). So the call runs
    on its own (green) thread and the caller stops waiting at its
    deadline. The abandoned call ends on its own timeouts (sushy), or
    when the caller kills what it waits on (the IPMI helper process).
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except Exception as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    task = concurrency.spawn(run)
    if not task.wait(max(seconds, 0.0)):
        raise FencingError(
            f"no answer from the BMC within {max(seconds, 0.0):.1f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# -- configuration ----------------------------------------------------------

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
