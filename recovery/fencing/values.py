"""One fencing setting and where it was written, and the checks each
kind of value gets (driver, port, verify, timeout, addresses), so that
every error names the file, section and key at fault.

The credentials file's reader, the host's merge and the device builders
all check values here, the same way.
"""

import dataclasses
import os
import re
import urllib.parse

from recovery.exception import ConfigError

DRIVERS = ("none", "redfish", "ipmi", "fence_agent", "ceph")
# The connection keys a device takes from its host when it sets none.
CONNECTION = ("address", "username", "password", "system", "port",
              "verify")
# The keys of driver ceph (a storage fence), in its own section only.
CEPH_KEYS = ("ceph_conf", "ceph_user", "keyring", "storage_address",
             "expire", "ephemeral_pool", "volume_pools", "watch_timeout")
KEYS = ("driver", *CONNECTION, "agent", "timeout", "no_answer_timeout",
        *CEPH_KEYS, "level<N>")
# A blocklist entry must outlive any plausible outage (seconds).
MIN_EXPIRE = 3600.0
LEVEL = re.compile(r"level([1-9][0-9]?)$")
DEVICE_PREFIX = "device:"
REDFISH_SYSTEMS = "/redfish/v1/Systems/"

_TRUE = ("true", "yes", "on", "1")
# A host name, an IPv4 address or an IPv6 one (checked by getaddrinfo
# or ipaddress when used).
_IP_OR_NAME = re.compile(r"[A-Za-z0-9_.-]+|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")
_FALSE = ("false", "no", "off", "0")


@dataclasses.dataclass(frozen=True)
class Value:
    """One setting and where it was written, for error messages."""

    text: str
    where: str


def is_known(key: str) -> bool:
    return key in KEYS or bool(LEVEL.match(key))


def is_agent(values: dict[str, Value]) -> bool:
    return "driver" in values and values["driver"].text == "fence_agent"


def says_how(values: dict[str, Value] | None) -> bool:
    """Whether these values say how to fence: a driver or levels."""
    return bool(values) and ("driver" in values or any(
        LEVEL.match(key) for key in values))


def check_values(values: dict[str, Value]) -> None:
    """Checks that do not depend on the host."""
    if "driver" in values and values["driver"].text not in DRIVERS:
        value = values["driver"]
        raise ConfigError(f"{value.where}: unknown driver "
                          f"'{value.text}' (one of {', '.join(DRIVERS)})")
    if "port" in values:
        port(values["port"])
    if "verify" in values:
        verify(values["verify"])
    if "timeout" in values:
        timeout(values["timeout"])
    driver = values["driver"].text if "driver" in values else None
    if "no_answer_timeout" in values:
        timeout(values["no_answer_timeout"])
        if driver == "ceph":
            raise ConfigError(f"{values['no_answer_timeout'].where}: "
                              f"driver ceph has no no_answer_timeout (a "
                              f"monitor that does not answer is given up "
                              f"at its timeout)")
    levels = any(LEVEL.match(key) for key in values)
    for key in CEPH_KEYS:
        if key in values and (levels or driver not in (None, "ceph")):
            raise ConfigError(f"{values[key].where}: '{key}' is a key of "
                              f"driver ceph only (set it in the section "
                              f"that says driver = ceph)")
    if "expire" in values:
        expire(values["expire"])
    if "watch_timeout" in values:
        seconds(values["watch_timeout"], "a watch timeout")


def seconds(value: Value, what: str) -> float:
    """A positive number of seconds."""
    try:
        number = float(value.text)
    except ValueError:
        number = 0.0
    if not 0 < number < float("inf"):
        raise ConfigError(f"{value.where}: '{value.text}' is not {what} in "
                          f"seconds (more than 0)")
    return number


def expire(value: Value) -> float:
    """A blocklist entry's lifetime: an hour or more."""
    number = seconds(value, "an expiry")
    if number < MIN_EXPIRE:
        raise ConfigError(f"{value.where}: '{value.text}' seconds is too "
                          f"short: a storage fence must outlive any "
                          f"plausible outage ({MIN_EXPIRE:g} s or more; "
                          f"default 30 days)")
    return number


def readable(value: Value, what: str) -> str:
    """The path of a file this process can read."""
    try:
        with open(value.text, "rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"{value.where}: {what} {value.text} cannot be "
                          f"read: {exc.strerror}") from exc
    return value.text


def storage_addresses(value: Value, host: str) -> tuple[str, ...]:
    """A comma list of host names (``{host}`` put in) or IP addresses."""
    names = []
    for item in re.split(r"[\s,]+", value.text):
        if not item:
            continue
        name = item.replace("{host}", host)
        if not _IP_OR_NAME.fullmatch(name):
            raise ConfigError(f"{value.where}: '{item}' is not a host name "
                              f"or IP address ('{{host}}' stands for the "
                              f"host's name)")
        names.append(name)
    if not names:
        raise ConfigError(f"{value.where}: no storage address")
    return tuple(names)


def timeout(value: Value) -> float:
    try:
        seconds = float(value.text)
    except ValueError:
        seconds = 0.0
    if not seconds >= 1.0:
        raise ConfigError(f"{value.where}: '{value.text}' is not a timeout "
                          f"in seconds (1 or more)")
    return seconds


def redfish_url(value: Value) -> str:
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


def ipmi_address(value: Value) -> str:
    if not value.text or any(c in value.text for c in "/@ "):
        raise ConfigError(f"{value.where}: '{value.text}' is not an IPMI "
                          f"address (a host name or IP address; the port "
                          f"goes in 'port')")
    return value.text


def system(value: Value | None) -> str | None:
    if value is None:
        return None
    if value.text.startswith("/"):
        return value.text.rstrip("/")
    return REDFISH_SYSTEMS + value.text.strip("/")


def port(value: Value) -> int:
    try:
        number = int(value.text)
    except ValueError:
        number = 0
    if not 0 < number < 65536:
        raise ConfigError(f"{value.where}: '{value.text}' is not a port "
                          f"number (1-65535)")
    return number


def verify(value: Value) -> bool | str:
    lowered = value.text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    if not os.path.exists(value.text):
        raise ConfigError(f"{value.where}: '{value.text}' is neither "
                          f"true, false nor an existing CA bundle path")
    return value.text
