"""Reading ``[fencing] credentials_file``: its [DEFAULT] and its sections
(hosts, patterns, ``[device:NAME]``), each value with where it was
written, and every check that needs no host.

The file holds BMC passwords: no error quotes a line of it, and a file
that others may read is warned about.
"""

import configparser
import dataclasses
import logging
import os
import re
import stat

from recovery.exception import ConfigError
from recovery.fencing.values import DEVICE_PREFIX
from recovery.fencing.values import KEYS
from recovery.fencing.values import LEVEL
from recovery.fencing.values import Value
from recovery.fencing.values import check_values
from recovery.fencing.values import is_agent
from recovery.fencing.values import is_known
from recovery.fencing.values import says_how

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Section:
    name: str                      # host name or fnmatch pattern
    values: dict[str, Value]

    @property
    def is_pattern(self) -> bool:
        return any(c in self.name for c in "*?[")


def read_credentials(path: str) -> tuple[dict[str, Value], list[Section]]:
    """The file's [DEFAULT] values and its sections, in file order."""
    parser = _parse(path)
    file_defaults: dict[str, Value] = {}
    sections = []
    for name in parser.sections():
        values = _section_values(parser, path, name)
        if name == configparser.DEFAULTSECT:
            file_defaults = values
        else:
            sections.append(Section(name, values))
    _check_keys(file_defaults, is_agent(file_defaults))
    for section in sections:
        _check_keys(section.values, is_agent(section.values) or (
            not says_how(section.values) and is_agent(file_defaults)
            and not section.name.startswith(DEVICE_PREFIX)))
    return file_defaults, sections


def _parse(path: str) -> configparser.ConfigParser:
    """The file, parsed; warns when others than its owner may read it."""
    # No inheritance by configparser: [DEFAULT] is applied by the host's
    # merge, to every host, and each value keeps the section it was
    # written in.
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
    return parser


def _section_values(parser: configparser.ConfigParser, path: str,
                    name: str) -> dict[str, Value]:
    """Section ``name``'s values (empty ones left out), checked."""
    where = f"{path} [{name}]"
    values = {key: Value(text.strip(), f"{where} {key}")
              for key, text in parser.items(name, raw=True)
              if text.strip()}
    for value in values.values():
        if "\n" in value.text:
            # Not echoed: it may be a password. An agent reads one
            # parameter a line: a second line would be another.
            raise ConfigError(f"{value.where}: a value is one line; "
                              f"this one goes on (an indented line "
                              f"under it continues it)")
    check_values(values)
    _check_shape(name, values, where)
    return values


def _check_shape(name: str, values: dict[str, Value], where: str) -> None:
    """A device is a named section without levels; a host has one driver
    or levels, not both."""
    has_levels = any(LEVEL.match(key) for key in values)
    is_device = name.startswith(DEVICE_PREFIX)
    if is_device and not re.fullmatch(r"[\w.-]+",
                                      name[len(DEVICE_PREFIX):]):
        raise ConfigError(f"{where}: a device section is "
                          f"[{DEVICE_PREFIX}NAME], NAME of letters, "
                          f"digits, '.', '-' and '_'")
    if is_device and has_levels:
        raise ConfigError(f"{where}: a device has no levels; name the "
                          f"device in a host's levelN")
    if "driver" in values and has_levels:
        raise ConfigError(f"{where}: sets both 'driver' and levels; a "
                          f"host is fenced by one driver or by levels "
                          f"of [{DEVICE_PREFIX}NAME] devices")


def _check_keys(values: dict[str, Value], agent: bool) -> None:
    """Only a fence agent's section (one that says ``driver =
    fence_agent``, or a host's that inherits it from [DEFAULT]) may set
    keys of its own: the agent's parameters, checked against its
    metadata when the device is built."""
    if agent:
        return
    for key, value in values.items():
        if not is_known(key) or key == "agent":
            raise ConfigError(
                f"{value.where}: unknown key '{key}' (known keys: "
                f"{', '.join(KEYS)}; an agent's own parameters go in a "
                f"section with driver = fence_agent)")


def _first_line(exc: Exception) -> str:
    # configparser quotes the offending line, which may hold a password.
    return str(exc).splitlines()[0]
