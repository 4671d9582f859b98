"""Fencing through an installed ClusterLabs fence agent (``fence_*``).

Every agent speaks one convention: ``key=value`` lines on standard input,
one of them ``action``, and the exit status as the answer (``off`` 0:
done; ``status`` 0: on, 2: off; ``monitor`` 0: the device answers).
``action=metadata`` prints the agent's parameters and actions as XML.

A power agent (one with a ``status`` action: fence_ipmilan,
fence_redfish, fence_idrac, fence_scsi, ...) is run through the loop
every driver shares: ``off``, then ``status`` until it reads off. An
agent with no ``status`` (fence_kdump) proves the host dead by its
``off`` alone: fence_kdump's exits 0 when the host's crash kernel has
said it is writing its dump. It is a message (``DeviceKind.MESSAGE``),
not a power device: its silence says nothing of the BMCs.

The agents do not tell a device out of reach from a refused login (both
exit 1, with the same words): a power agent that never gave an answer
that worked is taken as out of reach (``Unreachable``, ``NoAnswer``).

The parameters, password included, go to the agent on standard input
only: never on a command line or in the environment (the IPMI agents,
which would put it on ipmitool's, get it through a private file
instead: ``ipmitool_shim``). Each call is bounded; an agent that
outlives its time is killed with everything it started (it runs in a
session of its own). ``AgentFencer._failed`` and ``call`` are the places
where an agent's answers become FencingError (``Fencer._error``).
"""

import contextlib
import dataclasses
import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping

from recovery import concurrency
from recovery.exception import ConfigError
from recovery.exception import FencingError
from recovery.fencing import ipmitool_shim
from recovery.fencing.fencer import BmcSettings
from recovery.fencing.fencer import Check
from recovery.fencing.fencer import DeviceKind
from recovery.fencing.fencer import Fencer
from recovery.fencing.fencer import Timing
from recovery.fencing.fencer import call_bounded
from recovery.metrics import METRICS
from recovery.pacing import Lag

LOG = logging.getLogger(__name__)

# Where distributions install the agents, after PATH.
AGENT_DIRS = ("/usr/sbin", "/sbin", "/usr/local/sbin")
METADATA_TIMEOUT = 20.0
# Exit statuses of the ``status`` action.
STATUS_ON, STATUS_OFF = 0, 2
# Parameters recovery sets or must never set: the action is recovery's
# to choose, and these print the arguments (the password) or the help.
RESERVED = {"action": "recovery chooses the action itself",
            "verbose": "the agent would print its arguments, password "
                       "included",
            "verbose_level": "the agent would print its arguments, "
                             "password included",
            "debug": "the agent would write its arguments to a file",
            "debug_file": "the agent would write its arguments to a file",
            "help": "not a fencing parameter",
            "version": "not a fencing parameter"}
_REAP_TIMEOUT = 5.0
# The same failed answer this many times in a row, and none that worked:
# the device refuses (see AgentFencer._failed).
REFUSAL_REPEATS = 3
# How long past its own timeout an agent that waits (fence_kdump) may
# take to end by itself before it is killed.
_GRACE = 1.0
# What the agents add to any failure, and says nothing of it.
_NOISE = "Please use '-h' for usage"
# A log line's time stamp, as the agents' logging writes it.
_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")


@dataclasses.dataclass(frozen=True)
class Metadata:
    """What an agent's ``metadata`` action says it takes and does."""

    parameters: frozenset[str]
    actions: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Answer:
    """How one agent call ended."""

    code: int
    output: str

    def line(self) -> str:
        """The answer's most telling line: the agent's last error, else
        its last line of output ("" when it wrote none)."""
        lines = [_STAMP.sub("", line.strip())
                 for line in self.output.splitlines()
                 if line.strip() and _NOISE not in line]
        errors = [line for line in lines if "error" in line.lower()
                  or line.startswith("Failed")]
        return (errors or lines or [""])[-1]

    def describe(self) -> str:
        """"exit status N: its most telling line"."""
        line = self.line()
        return f"exit status {self.code}" + (f": {line}" if line else "")


def find_agent(name: str, where: str) -> str:
    """The path of agent ``name`` (a ``fence_*`` name or an absolute
    path); ConfigError naming ``where`` when it is not installed."""
    if os.path.isabs(name):
        if os.access(name, os.X_OK):
            return name
        raise ConfigError(f"{where}: fence agent {name} is not an "
                          f"executable file")
    if not name.startswith("fence_") or "/" in name:
        raise ConfigError(f"{where}: '{name}' is not a fence agent name "
                          f"(fence_ipmilan, fence_redfish, ...) or an "
                          f"absolute path")
    found = _which(name)
    if found is None:
        raise ConfigError(f"{where}: fence agent {name} is not installed "
                          f"(looked in PATH and {', '.join(AGENT_DIRS)}; "
                          f"Debian and Ubuntu ship the agents in the "
                          f"fence-agents package)")
    return found


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join(
        [os.environ.get("PATH", ""), *AGENT_DIRS, "/usr/bin"]))


@functools.cache
def metadata(path: str) -> Metadata:
    """The agent's parameters and actions (read once per process)."""
    answer = run(path, {"action": "metadata"}, METADATA_TIMEOUT)
    if answer.code != 0:
        raise ConfigError(f"fence agent {path} answered 'metadata' with "
                          f"{answer.describe()}")
    try:
        root = ElementTree.fromstring(answer.output[
            answer.output.index("<"):answer.output.rindex(">") + 1])
    except (ValueError, ElementTree.ParseError) as exc:
        raise ConfigError(f"fence agent {path} answered 'metadata' with "
                          f"no XML it could read: {exc}") from exc
    return Metadata(
        parameters=frozenset(p.get("name", "")
                             for p in root.iter("parameter")),
        actions=frozenset(a.get("name", "") for a in root.iter("action")))


def run(path: str, parameters: Mapping[str, str], seconds: float) -> Answer:
    """Run the agent once with ``parameters`` on standard input; its exit
    status and output (stdout, then stderr). FencingError when it runs
    over ``seconds``: it is killed then, with its children."""
    text = "".join(f"{key}={value}\n" for key, value in parameters.items())
    env = dict(os.environ)
    # The agents' own Python warnings are noise in an answer.
    env["PYTHONWARNINGS"] = "ignore"
    try:
        process = subprocess.Popen(
            [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8",
            errors="replace", env=env, start_new_session=True)
    except OSError as exc:
        raise FencingError(f"cannot run {path}: {exc.strerror}") from exc
    try:
        out, err = call_bounded(lambda: process.communicate(text), seconds)
    except FencingError:
        _kill(process)
        raise FencingError(f"{os.path.basename(path)} gave no answer "
                           f"within {max(seconds, 0.0):.1f} s and was "
                           f"killed") from None
    return Answer(process.returncode, (out or "") + (err or ""))


def _kill(process: "subprocess.Popen[str]") -> None:
    """Kill the agent and what it started (ipmitool, ...); reap it in the
    background."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass

    def reap() -> None:
        try:
            process.communicate(timeout=_REAP_TIMEOUT)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            pass

    concurrency.spawn(reap)


class AgentFencer(Fencer):
    """One device: an agent and its parameters (password apart)."""

    def __init__(self, settings: BmcSettings, timing: Timing, *,
                 path: str, parameters: Mapping[str, str]) -> None:
        super().__init__(settings, timing)
        self.path = path
        self.agent = os.path.basename(path)
        self.driver = self.agent
        self.parameters = dict(parameters)
        info = metadata(path)
        self.proves_by_off = "status" not in info.actions
        if self.proves_by_off:
            self.kind = DeviceKind.MESSAGE
        # Whether the device gave an answer that worked, and its last
        # failure with how many times in a row (see _failed).
        self._answered = False
        self._repeats: tuple[str | None, int] = (None, 0)
        self._power_timeout = "power_timeout" in info.parameters and (
            "power_timeout" not in parameters)
        self._timeout_parameter = (self.proves_by_off
                                   and "timeout" in info.parameters
                                   and "timeout" not in parameters)
        # An ipmitool agent gets its password through a file (see
        # ipmitool_shim), never on ipmitool's command line.
        self._ipmitool = None
        if "ipmitool_path" in info.parameters:
            self._ipmitool = (self.parameters.pop("ipmitool_path", None)
                              or _which("ipmitool") or "/usr/bin/ipmitool")
            if settings.password.reveal():
                ipmitool_shim.check_runnable(
                    f"{self.agent} for {settings.host}")

    def describe(self) -> str:
        if self.proves_by_off:
            return f"{self.agent} proof of {self._target()}"
        return f"{self.agent} power-off of {self._target()}"

    def _target(self) -> str:
        for key in ("ip", "nodename", "plug", "devices"):
            if key in self.parameters:
                return f"{key}={self.parameters[key]}"
        return self.settings.host

    # -- one call ------------------------------------------------------------
    def call(self, action: str, seconds: float,
             extra: Mapping[str, str] | None = None) -> Answer:
        """Run ``action`` bounded by ``seconds``."""
        parameters = {"action": action, **self.parameters, **(extra or {})}
        password = self.settings.password.reveal()
        try:
            with contextlib.ExitStack() as stack:
                if password and self._ipmitool is not None:
                    parameters["ipmitool_path"] = stack.enter_context(
                        ipmitool_shim.without_password(
                            password, self._ipmitool))
                elif password:
                    parameters["password"] = password
                elif self._ipmitool is not None:
                    parameters["ipmitool_path"] = self._ipmitool
                answer = run(self.path, parameters, seconds)
        except FencingError as exc:
            raise self._error(action, str(exc)) from exc
        return Answer(answer.code,
                      self.settings.password.scrub(answer.output))

    # -- the shared loop's hooks --------------------------------------------
    def _send_off(self, seconds: float) -> None:
        extra = {}
        if self._power_timeout:
            # The agent waits for off itself: for half the share, so that
            # it answers before it would be killed, and the power is
            # read back in the other half.
            extra["power_timeout"] = str(max(int(seconds / 2), 1))
        answer = self.call("off", seconds, extra)
        if answer.code != 0:
            raise self._failed(answer, "off")
        self._answered = True

    def _read_power(self, seconds: float) -> str:
        answer = self.call("status", seconds)
        if answer.code not in (STATUS_ON, STATUS_OFF):
            raise self._failed(answer, "status")
        self._answered = True
        return "On" if answer.code == STATUS_ON else "Off"

    def _failed(self, answer: Answer, action: str) -> FencingError:
        """A failed answer. The agents do not tell a refused password
        from a device out of reach (both are exit status 1), so a device
        that has given the same failure ``REFUSAL_REPEATS`` times in a
        row, and nothing that worked, is taken as refusing: it is not
        asked again in this fencing, and a wrong password does not lock
        the account out. Having never answered, it counts as out of
        reach too (``NoAnswer``): a BMC that lost its power fails so.
        An agent killed at its time is not an answer, and does not
        count."""
        line = answer.describe()
        last, count = self._repeats
        self._repeats = (line, count + 1 if line == last else 1)
        if not self._answered and self._repeats[1] >= REFUSAL_REPEATS:
            return self._error(action, (
                f"{line}; the same failure {REFUSAL_REPEATS} times and no "
                f"answer that worked: taken as a refusal (credentials, "
                f"address or parameters), not asked again"), refused=True,
                unanswered=True)
        return self._error(action, line)

    def check(self, clock: concurrency.Clock) -> list[Check]:
        """``monitor`` and ``status``, as far as the agent has them. An
        agent whose off is its proof (fence_kdump) has nothing to ask
        without fencing (fence_kdump's ``monitor`` checks the local
        node's kdump, not the host's): its metadata was checked."""
        actions = metadata(self.path).actions
        checks: list[Check] = []
        for action in ("monitor", "status"):
            if action not in actions or self.proves_by_off:
                continue
            started = clock.monotonic()
            try:
                answer = self.call(action, self.timing.timeout)
            except FencingError as exc:
                checks.append((action, False, str(exc),
                               clock.monotonic() - started))
                continue
            seconds = clock.monotonic() - started
            if action == "status" and answer.code in (STATUS_ON,
                                                      STATUS_OFF):
                power = "On" if answer.code == STATUS_ON else "Off"
                checks.append((action, True, f"power {power}", seconds))
            elif answer.code == 0:
                checks.append((action, True, answer.line() or "answers",
                               seconds))
            else:
                checks.append((action, False, answer.describe(), seconds))
        if not checks:
            checks.append(("metadata", True,
                           f"installed, parameters known; {self.agent} "
                           f"has no action that answers without fencing",
                           0.0))
        return checks

    # -- an agent whose off is its proof ------------------------------------
    def power_off(self, clock: concurrency.Clock,
                  lag: Lag | None = None) -> str:
        """A power agent's off is paced by ``lag`` (``Fencer``); an agent
        whose off is its proof is asked once, and has no lag."""
        if not self.proves_by_off:
            return super().power_off(clock, lag)
        started = clock.monotonic()
        timeout = self.timing.timeout
        extra = {}
        bound = timeout
        if self._timeout_parameter:
            # The agent waits the device's time itself, and is killed
            # only if it does not end then.
            extra["timeout"] = str(max(int(timeout), 1))
            bound += _GRACE
        LOG.info("Fencing %s: %s", self.settings.host, self.describe())
        counted = METRICS.fencing.labels
        try:
            answer = self.call("off", bound, extra)
        except FencingError as exc:
            counted(self.agent, "not_off").inc()
            LOG.error("Fencing %s failed: %s", self.settings.host, exc)
            raise
        if answer.code != 0:
            counted(self.agent, "not_off").inc()
            error = self._error(
                "off", f"no proof within {timeout:g} s ({answer.describe()})")
            LOG.error("Fencing %s failed: %s", self.settings.host, error)
            raise error
        counted(self.agent, "off").inc()
        message = (f"proved dead by {self.agent} ({self._target()}) after "
                   f"{clock.monotonic() - started:.1f} s")
        if answer.line():
            message += f": {answer.line()}"
        LOG.info("Fencing %s: %s", self.settings.host, message)
        return message

