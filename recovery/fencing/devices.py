"""Building one device's fencer from its settings: a ``redfish`` or
``ipmi`` driver from the BMC's settings, a ``fence_agent`` from the
connection keys mapped to the agent's own parameters, or a ``ceph``
storage fence from its own keys.

The drivers' modules (sushy, pyghmi, the agents' subprocess plumbing,
Ceph's bindings) are imported here only when a device needs them.
"""

import dataclasses
import importlib
import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from recovery.exception import ConfigError
from recovery.fencing import values as checks
from recovery.fencing.fencer import IPMI_PORT
from recovery.fencing.fencer import BmcSettings
from recovery.fencing.fencer import Fencer
from recovery.fencing.fencer import Timing
from recovery.fencing.secret import Secret
from recovery.fencing.values import CONNECTION
from recovery.fencing.values import Value

CEPH_CONF = "/etc/ceph/ceph.conf"
CEPH_EXPIRE = 30 * 24 * 3600     # a month
_DRIVER_CLASSES = {"redfish": ("recovery.fencing.redfish", "RedfishFencer"),
                   "ipmi": ("recovery.fencing.ipmi", "IpmiFencer")}


def driver_fencer(host: str, values: dict[str, Value], subject: str,
                  timing: Timing) -> Fencer:
    """A ``redfish`` or ``ipmi`` device; ``subject`` names it in errors."""
    settings = _settings(host, values, subject)
    return _driver_class(values["driver"].text)(settings, timing)


def _settings(host: str, values: dict[str, Value],
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
    templated = Value(address.text.replace("{host}", host), address.where)
    if driver == "redfish":
        target = checks.redfish_url(templated)
    else:
        target = checks.ipmi_address(templated)
    return BmcSettings(
        host=host, driver=driver, address=target,
        username=values["username"].text,
        password=Secret(values["password"].text),
        system=checks.system(values.get("system")),
        port=checks.port(values["port"]) if "port" in values else IPMI_PORT,
        verify=(checks.verify(values["verify"]) if "verify" in values
                else True))


def _driver_class(driver: str) -> type[Fencer]:
    module_name, class_name = _DRIVER_CLASSES[driver]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"fencing driver {driver} cannot be loaded: "
                          f"{exc}") from exc
    return getattr(module, class_name)


def ceph_fencer(host: str, values: dict[str, Value],
                own: dict[str, Value], subject: str,
                timing: Timing) -> Fencer:
    """A ``ceph`` device (a storage fence): its own keys only; the
    connection keys it inherits from its host are a BMC's, not its."""
    from recovery.fencing import ceph
    from recovery.fencing import ceph_client

    for key in CONNECTION:
        if key in own:
            raise ConfigError(f"{own[key].where}: driver ceph takes no "
                              f"'{key}' (its keys: "
                              f"{', '.join(checks.CEPH_KEYS)})")
    if "storage_address" not in values:
        raise ConfigError(f"driver ceph needs 'storage_address' (the "
                          f"host's Ceph client addresses: '{{host}}-storage'"
                          f" or IP addresses) for {subject}")
    settings = ceph.CephSettings(host=host, **_ceph_settings(
        host, values, subject))
    ceph_client.bindings()     # ConfigError naming the packages
    return ceph.CephFencer(settings, timing)


def _ceph_settings(host: str, values: dict[str, Value],
                   subject: str) -> dict[str, Any]:
    """A ``ceph`` device's settings, checked, its defaults filled in."""
    def get(key: str, default: str) -> Value:
        return values.get(key, Value(default, f"{subject}: {key} (default)"))

    user = get("ceph_user", "recovery").text
    keyring = get("keyring", f"/etc/ceph/ceph.client.{user}.keyring")
    return {
        "conf": checks.readable(get("ceph_conf", CEPH_CONF), "ceph.conf"),
        "user": user, "keyring": checks.readable(keyring, "keyring"),
        "addresses": checks.storage_addresses(values["storage_address"],
                                              host),
        "expire": checks.expire(get("expire", str(CEPH_EXPIRE))),
        "ephemeral_pool": get("ephemeral_pool", "").text or None,
        "volume_pools": tuple(pool for pool in re.split(
            r"[\s,]+", get("volume_pools", "").text) if pool),
        "watch_timeout": checks.seconds(get("watch_timeout", "30"),
                                        "a watch timeout")}


def agent_fencer(host: str, values: dict[str, Value],
                 own: dict[str, Value], subject: str,
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
    given = _AgentParameters(os.path.basename(path),
                             agents.metadata(path).parameters, own,
                             agents.RESERVED)
    for key in CONNECTION:
        if key in values:
            given.connection(key, values[key].text.replace("{host}", host),
                             values[key])
    for key, value in values.items():
        if not checks.is_known(key):
            given.own_parameter(key, value, host)
    if given.errors:
        raise ConfigError("\n".join(given.errors))
    password = given.parameters.pop("password", None)
    settings = BmcSettings(
        host=host, driver=os.path.basename(path),
        address=given.parameters.get("ip", ""),
        username=values["username"].text if "username" in values else "",
        password=Secret(values["password"].text
                        if password is not None else ""))
    return agents.AgentFencer(settings, timing, path=path,
                              parameters=given.parameters)


@dataclasses.dataclass
class _AgentParameters:
    """The parameters one agent is given, and every mistake found on the
    way (all of them are reported at once)."""

    agent: str                       # its file name, for errors
    known: frozenset[str]            # its parameters, by its metadata
    own: dict[str, Value]            # the keys the device set itself
    reserved: Mapping[str, str]      # never set, and why
    parameters: dict[str, str] = dataclasses.field(default_factory=dict)
    errors: list[str] = dataclasses.field(default_factory=list)

    def put(self, key: str, parameter: str, text: str) -> None:
        """Connection key ``key`` as the agent's ``parameter``."""
        if parameter in self.known:
            self.parameters[parameter] = text
        elif key in self.own:
            self.errors.append(f"{self.own[key].where}: {self.agent} has "
                               f"no parameter '{parameter}' to take "
                               f"'{key}'")

    def connection(self, key: str, text: str, value: Value) -> None:
        """Connection key ``key``: ``value``, ``{host}`` put in as
        ``text``."""
        if key == "address":
            self._address(Value(text, value.where))
        elif key == "port":
            self.put(key, "ipport", str(checks.port(value)))
        elif key == "username":
            self.put(key, "username" if "username" in self.known
                     else "login", text)
        elif key == "password":
            self.put(key, "password", "")     # checked; passed apart
        elif key == "system":
            self.put(key, "systems_uri", checks.system(value) or "")
        elif key == "verify":
            verify = checks.verify(value)
            if verify is False:
                self.put(key, "ssl_insecure", "1")
            elif verify is not True and key in self.own:
                self.errors.append(f"{value.where}: fence agents take no CA "
                                   f"bundle; set verify = true (the "
                                   f"system's CA store) or false")

    def _address(self, value: Value) -> None:
        """An address is the agent's ``ip``; a URL's port its
        ``ipport``."""
        if "://" not in value.text:
            self.put("address", "ip", value.text)
            return
        parsed = urllib.parse.urlsplit(checks.redfish_url(value))
        self.put("address", "ip", parsed.hostname or "")
        if parsed.port:
            self.put("address", "ipport", str(parsed.port))

    def own_parameter(self, key: str, value: Value, host: str) -> None:
        """A key that is none of recovery's: one of the agent's own."""
        if key in self.reserved:
            self.errors.append(f"{value.where}: '{key}' cannot be set: "
                               f"{self.reserved[key]}")
        elif key not in self.known:
            self.errors.append(f"{value.where}: {self.agent} has no "
                               f"parameter '{key}' (its parameters: "
                               f"'{self.agent} -o metadata')")
        else:
            self.parameters[key] = value.text.replace("{host}", host)
