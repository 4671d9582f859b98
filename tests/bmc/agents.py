"""ClusterLabs fence agents (Debian ``fence-agents``), run as a fencing
driver would: one ``key=value`` a line on standard input, never a
password on a command line or in the environment::

    from tests.bmc.agents import FENCE_REDFISH, require_agent, run_agent

    agent = require_agent(FENCE_REDFISH)   # skip, or fail under CI
    done = run_agent(agent, "status", bmc.agent_parameters())
    done.returncode   # status: 0 on, 2 off; off/on: 0 success
    done.seconds      # how long the agent ran

The emulators' ``agent_parameters()`` (``RedfishBmc(tls=True)``,
``IpmiBmc``) give each agent's parameters without ``action``.
"""

import dataclasses
import os
import subprocess
import time
from collections.abc import Mapping

import pytest

FENCE_REDFISH = "/usr/sbin/fence_redfish"
FENCE_IPMILAN = "/usr/sbin/fence_ipmilan"
FENCE_KDUMP = "/usr/sbin/fence_kdump"
FENCE_KDUMP_SEND = "/usr/libexec/fence-agents/fence_kdump_send"
IPMITOOL = "/usr/bin/ipmitool"  # fence_ipmilan's default ipmitool_path

# The agents' exit statuses.
SUCCESS = 0
STATUS_ON = 0
STATUS_OFF = 2


@dataclasses.dataclass
class AgentRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def unavailable(path: str) -> str | None:
    """Why the agent at ``path`` cannot run here, or None."""
    if not os.access(path, os.X_OK):
        return (f"{path} is missing (Debian: apt-get install fence-agents "
                f"ipmitool)")
    return None


def require_agent(path: str, *needs: str) -> str:
    """``path``, or skip the test if it or a program it ``needs`` (e.g.
    ``IPMITOOL``) is missing; under CI (CI=true), fail it instead, so a
    missing agent never passes unnoticed."""
    for program in (path, *needs):
        reason = unavailable(program)
        if reason:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(reason, pytrace=False)
            pytest.skip(reason)
    return path


def agent_input(action: str, parameters: Mapping[str, str]) -> str:
    """The agent's standard input: ``action`` then ``parameters``."""
    lines = [f"action={action}"]
    for key, value in parameters.items():
        if "\n" in f"{key}{value}" or "=" in key:
            raise ValueError(f"agent parameter {key!r} cannot be passed "
                             f"on standard input")
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def run_agent(path: str, action: str, parameters: Mapping[str, str], *,
              timeout: float = 60.0,
              command: list[str] | None = None) -> AgentRun:
    """Run the agent at ``path`` with ``action`` and ``parameters`` on its
    standard input. ``command`` replaces the argv (e.g. an
    ``ip netns exec`` prefix plus ``path``)."""
    started = time.monotonic()
    done = subprocess.run(command or [path],
                          input=agent_input(action, parameters),
                          capture_output=True, text=True, timeout=timeout)
    return AgentRun(done.returncode, done.stdout, done.stderr,
                    time.monotonic() - started)


def device_section(bmc, **extra: str) -> dict[str, str]:
    """A credentials-file section fencing through the agent for ``bmc``
    (a ``RedfishBmc(tls=True)``: fence_redfish; an ``IpmiBmc``:
    fence_ipmilan), in recovery's keys where it has them: ``address``,
    ``port``, ``username``, ``password``, ``system``, ``verify`` become
    the agent's ip, ipport, username, password, systems_uri and
    ssl_insecure; the rest are the agent's own parameters."""
    section = {"driver": "fence_agent", "username": bmc.username,
               "password": bmc.password}
    if bmc.driver == "redfish":
        section.update(agent="fence_redfish", address=bmc.address,
                       system=bmc.system, verify="false")
    else:
        section.update(agent="fence_ipmilan", address=bmc.address,
                       port=str(bmc.port), lanplus="1", cipher="3")
    section.update(extra)
    return section

