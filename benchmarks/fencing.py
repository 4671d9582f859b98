"""Benchmark: fencing, from the start of a fencing (``HostFence.power_off``)
to its proof, per kind of device, on the test emulators; and what going
through a ClusterLabs agent costs instead of a built-in driver.

    .tox/py3/bin/python -m benchmarks.fencing [--repeat 10] [--reads 20]

Needs Debian's ``fence-agents`` and ``ipmitool``. About 3 minutes on 2
cores. Writes benchmarks/results/fencing.json.

Every fencing here is ``load_fencing(conf).for_host(host).power_off()``
in this process (plain threads: no monkey-patching), with ``[fencing]
poll_interval = 0.2``, ``timeout = 30`` and ``attempts = 3`` (the
default: each power-off request gets a third of the time left; every
fencing here proves Off on its first request, which the JSON counts).
The time is taken around ``power_off``; its ``DeviceAttempt.seconds``
(the device's own time) is in the JSON too. Each figure is measured
``--repeat`` times after one uncounted run (the first agent run pays a
cold page cache); the built-in driver and the agent alternate run by run,
against the same emulator, so that whatever else the machine does falls
on both. p50 is the median, p95 the nearest rank (with 10 runs: the
10th of 10, the max).

1. kdump. Level 1 fence_kdump (``nodename = 127.0.0.1``, a free UDP
   port), level 2 the built-in ipmi driver (never reached: checked).
   (a) A host whose crash kernel is sending: ``fence_kdump_send`` every
   1 s (tests/bmc/kdump.py ``kdump_sender``) from before the fencing
   starts, each fencing after an untimed random (seeded) 0-1 s sleep so
   that it starts anywhere in the sender's second; the time to proof is
   the agent's start plus the wait for the next message. The time to
   fence_kdump's UDP port being bound is read from /proc/net/udp every
   2 ms. (b) No sender; as soon as the port is bound (read every 1 ms),
   one message is sent from this process, the exact bytes
   ``fence_kdump_send`` sends (captured from it at start), so that its
   send time is known: message sent -> proof.
2. Redfish: the built-in ``redfish`` driver (sushy, ``verify = false``)
   vs ``fence_agent``/fence_redfish, both against one
   ``RedfishBmc(tls=True, fast=True)``: sushy-tools' emulator applies a
   power-off at the next whole second plus one (0-1 s after the
   request). Its state is read every 20 ms behind its back: when it first
   holds the request and when the power goes Off (its apply time, exact),
   so the time splits into start -> request held, request -> Off (the
   emulator's lag) and Off -> proof (the driver's own wait). The share
   of the time that is the emulator's lag is the median, over the
   fencings, of request -> Off over start -> proof.
3. IPMI: the built-in ``ipmi`` driver (a pyghmi helper process) vs
   fence_agent/fence_ipmilan (ipmitool, lanplus, cipher 3, the agent's
   defaults otherwise: it sleeps its ``power_wait``, 2 s, after asking
   for off) against one ``IpmiBmc(lag=0.5)``. The emulator's state file
   says when the power goes Off (exact); the request came ``lag`` before.
4. An agent's overhead without any power lag: one ``status`` read
   (``Fencer._read_power``) by a new fencer each time, fence_redfish vs
   built-in redfish and fence_ipmilan vs built-in ipmi, ``--reads`` times
   each (alternating), with the CPU it costs: this process's
   (``RUSAGE_SELF``) plus its children's (``RUSAGE_CHILDREN``: the agent
   and its ipmitool, or the ipmi helper, once reaped), per read. A
   built-in driver reads the power again on the session it opened (every
   poll of a fencing after the first): that warm read is timed too,
   ``--reads`` times on one fencer; an agent has no warm read, each poll
   is a new process.

Between two fencings the emulator's power is turned back On through its
own protocol (Redfish ``Reset`` ``On``; ``ipmitool chassis power on``
with the password in a file), untimed, and read On before the next. The
emulators run for the whole benchmark: warm, as a real BMC is.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import resource
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oslo_config import cfg

from benchmarks import common
from recovery.concurrency import Clock
from recovery.conf import fencing as fencing_conf
from recovery.fencing import DeviceAttempt
from recovery.fencing import Fencing
from recovery.fencing import HostFence
from recovery.fencing import load_fencing
from tests.bmc import free_port
from tests.bmc import write_sections
from tests.bmc.agents import FENCE_IPMILAN
from tests.bmc.agents import FENCE_KDUMP
from tests.bmc.agents import FENCE_KDUMP_SEND
from tests.bmc.agents import FENCE_REDFISH
from tests.bmc.agents import IPMITOOL
from tests.bmc.agents import device_section
from tests.bmc.agents import unavailable
from tests.bmc.ipmi import IpmiBmc
from tests.bmc.kdump import kdump_sender
from tests.bmc.kdump import udp_bound
from tests.bmc.redfish import RedfishBmc

HOST = "compute-1"
REPEAT = 10
READS = 20
POLL_INTERVAL = 0.2
TIMEOUT = 30
ATTEMPTS = 3
IPMI_LAG = 0.5
BMC_WATCH = 0.02
ON_TIMEOUT = 15.0
KINDS = ("builtin", "agent")
SEED = 7410


# -- settings -----------------------------------------------------------------
def load(path: Path, sections: dict[str, dict[str, str]]) -> Fencing:
    """``[fencing]`` as the benchmark sets it, with these sections as its
    credentials file."""
    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf([])
    write_sections(path, sections)
    for name, value in (("credentials_file", str(path)),
                        ("poll_interval", POLL_INTERVAL),
                        ("timeout", TIMEOUT), ("attempts", ATTEMPTS)):
        conf.set_override(name, value, "fencing")
    return load_fencing(conf)


def host_fence(fencing: Fencing) -> HostFence:
    fence = fencing.for_host(HOST)
    assert fence is not None
    return fence


# -- watching -----------------------------------------------------------------
class RedfishWatch:
    """When the emulator first holds a power-off request (wall clock, to
    ``BMC_WATCH``) and when it applies it (its own apply time, exact);
    how many distinct requests it held."""

    def __init__(self, bmc: RedfishBmc) -> None:
        self._bmc = bmc
        self.held: float | None = None
        self.applies: list[float] = []
        self._watch = common.Poller(self._look, BMC_WATCH)

    def _look(self) -> None:
        pending = self._bmc._record().get("pending_power") or {}
        if pending.get("power_state") == "Off":
            if self.held is None:
                self.held = time.time()
            applies = float(pending["apply_time"])
            if applies not in self.applies:
                self.applies.append(applies)

    def stop(self) -> dict[str, Any]:
        self._watch.stop()
        return {"requested": self.held,
                "off": self.applies[-1] if self.applies else None,
                "bmc_requests": len(self.applies)}


class IpmiWatch:
    """When the emulated IPMI BMC's power goes Off (its state file's
    ``off_at``, exact); the request came ``lag`` before."""

    def __init__(self, bmc: IpmiBmc) -> None:
        self._bmc = bmc
        self.off_at: list[float] = []
        self._watch = common.Poller(self._look, BMC_WATCH)

    def _look(self) -> None:
        state = json.loads(self._bmc._state.read_text(encoding="utf-8"))
        if state["off_at"] is not None and state["off_at"] not in \
                self.off_at:
            self.off_at.append(float(state["off_at"]))

    def stop(self) -> dict[str, Any]:
        self._watch.stop()
        off = self.off_at[-1] if self.off_at else None
        return {"requested": None if off is None else off - self._bmc.lag,
                "off": off, "bmc_requests": len(self.off_at)}


# -- powering the emulators back on -------------------------------------------
def _wait(check: Callable[[], bool], what: str,
          timeout: float = ON_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.05)


def redfish_request(bmc: RedfishBmc, body: dict[str, Any] | None = None
                    ) -> None:
    """GET the BMC's system, or POST a ``Reset`` with ``body``."""
    token = base64.b64encode(
        f"{bmc.username}:{bmc.password}".encode()).decode()
    action = "" if body is None else "/Actions/ComputerSystem.Reset"
    request = urllib.request.Request(
        f"{bmc.address}{bmc.system}{action}",
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={"Authorization": f"Basic {token}",
                 "Content-Type": "application/json"})
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE     # its own self-signed certificate
    with urllib.request.urlopen(request, timeout=10,
                                context=context) as response:
        response.read()


def redfish_on(bmc: RedfishBmc) -> None:
    if bmc.power_state() != "On":
        redfish_request(bmc, {"ResetType": "On"})
        _wait(lambda: bmc.power_state() == "On", "the Redfish BMC to be On")
    redfish_request(bmc)    # the emulator applies what is due on a read


def ipmi_on(bmc: IpmiBmc, password_file: Path) -> None:
    if bmc.power_state() != "On":
        subprocess.run(
            [IPMITOOL, "-I", "lanplus", "-C", "3", "-H", bmc.address,
             "-p", str(bmc.port), "-U", bmc.username,
             "-f", str(password_file), "chassis", "power", "on"],
            check=True, capture_output=True, timeout=30)
        _wait(lambda: bmc.power_state() == "On", "the IPMI BMC to be On")


# -- one fencing --------------------------------------------------------------
def fence_once(fence: HostFence) -> dict[str, Any]:
    """``power_off`` timed; what each device said."""
    told: list[DeviceAttempt] = []
    began_wall, began = time.time(), time.monotonic()
    message = fence.power_off(Clock(), told.append).text
    seconds = time.monotonic() - began
    requests = re.search(r"\((\d+) power-off requests[,)]", message)
    return {"seconds": seconds, "began": began_wall,
            "ended": began_wall + seconds,
            "device_seconds": [round(a.seconds, 4) for a in told],
            "devices": [f"level {a.level} {a.device} ({a.kind}) "
                        f"{'proved' if a.proved else 'failed'}"
                        for a in told],
            "power_off_requests": int(requests.group(1)) if requests else 1,
            "message": message}


def bmc_fencing(fence: HostFence, bmc: Any, watch: Callable[[Any], Any]
                ) -> dict[str, Any]:
    """One fencing of ``bmc``'s host, with when the BMC held the request
    and when its power went Off, relative to the start."""
    watcher = watch(bmc)
    try:
        run = fence_once(fence)
    finally:
        seen = watcher.stop()
    if bmc.power_state() != "Off":
        raise RuntimeError(f"fenced, but the BMC reads {bmc.power_state()}")
    began, ended = run["began"], run["ended"]
    requested, off = seen["requested"], seen["off"]
    run.update(
        bmc_requests=seen["bmc_requests"],
        start_to_request=None if requested is None else requested - began,
        request_to_off=(None if requested is None or off is None
                        else off - requested),
        start_to_off=None if off is None else off - began,
        off_to_proof=None if off is None else ended - off)
    return run


def alternate(repeat: int, runs: dict[str, Callable[[], dict[str, Any]]],
              label: str) -> dict[str, list[dict[str, Any]]]:
    """Each of ``runs`` once uncounted, then ``repeat`` times, taking
    turns."""
    for run in runs.values():
        run()
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in runs}
    for n in range(repeat):
        for kind, run in runs.items():
            out[kind].append(run())
            print(f"{label} {n + 1}/{repeat}, {kind}: "
                  f"{out[kind][-1]['seconds']:.3f} s", flush=True)
    return out


# -- 1. kdump -----------------------------------------------------------------
def kdump_message() -> bytes:
    """The datagram ``fence_kdump_send`` sends, captured from it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(10)
        subprocess.run([FENCE_KDUMP_SEND, "--ipport",
                        str(sock.getsockname()[1]), "--count", "1",
                        "127.0.0.1"], check=True, capture_output=True,
                       timeout=10)
        return sock.recv(1024)


class BoundWatch:
    """When UDP ``port`` is first bound (fence_kdump listening)."""

    def __init__(self, port: int, interval: float) -> None:
        self.bound: float | None = None
        self._port = port
        self._watch = common.Poller(self._look, interval)

    def _look(self) -> None:
        if self.bound is None and udp_bound(self._port):
            self.bound = time.monotonic()

    def stop(self) -> float | None:
        self._watch.stop()
        return self.bound


def kdump_fencing(workdir: Path, ipmi: IpmiBmc, repeat: int
                  ) -> dict[str, Any]:
    port = free_port(socket.SOCK_DGRAM)
    fencing = load(workdir / "kdump.ini", {
        HOST: {"level1": "kdump", "level2": "ipmi"},
        "device:kdump": {"driver": "fence_agent", "agent": "fence_kdump",
                         "nodename": "127.0.0.1", "ipport": str(port)},
        "device:ipmi": ipmi.credentials()})

    def checked(run: dict[str, Any]) -> dict[str, Any]:
        if run["devices"] != ["level 1 kdump (fence_kdump) proved"]:
            raise RuntimeError(f"kdump: {run['devices']}")
        if ipmi.power_state() != "On":
            raise RuntimeError("kdump: level 2 powered the host off")
        _wait(lambda: not udp_bound(port), "fence_kdump to end", 5)
        return run

    phase = random.Random(SEED)

    def sending() -> dict[str, Any]:
        # Anywhere in the sender's second: one fencing ends just after a
        # message, and the next would otherwise start in step with it.
        time.sleep(phase.uniform(0, 1))
        began = time.monotonic()
        watch = BoundWatch(port, 0.002)
        try:
            run = fence_once(host_fence(fencing))
        finally:
            bound = watch.stop()
        run["start_to_bound"] = None if bound is None else bound - began
        return checked(run)

    def one_message() -> dict[str, Any]:
        outcome: dict[str, Any] = {}
        fence = host_fence(fencing)

        def fencing_run() -> None:
            try:
                outcome["run"] = fence_once(fence)
            except Exception as exc:
                outcome["error"] = exc
            outcome["proved"] = time.monotonic()

        began = time.monotonic()
        thread = threading.Thread(target=fencing_run, daemon=True)
        thread.start()
        while not udp_bound(port):
            if time.monotonic() - began > 10 or not thread.is_alive():
                raise RuntimeError("fence_kdump did not bind its port")
            time.sleep(0.001)
        bound = time.monotonic()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("127.0.0.1", 0))
            sent = time.monotonic()
            sock.sendto(message, ("127.0.0.1", port))
        thread.join(TIMEOUT + 10)
        if "error" in outcome:
            raise outcome["error"]
        run = outcome["run"]
        run.update(start_to_bound=bound - began, bound_to_sent=sent - bound,
                   message_to_proof=outcome["proved"] - sent)
        return checked(run)

    message = kdump_message()
    with kdump_sender("127.0.0.1", port, interval=1) as sender:
        runs = alternate(repeat, {"sending": sending}, "kdump, sender on")
        if sender.poll() is not None:
            raise RuntimeError("fence_kdump_send stopped")
    runs.update(alternate(repeat, {"one_message": one_message},
                          "kdump, one message"))
    return {"port": port, "message_hex": message.hex(), "runs": runs}


# -- 2 and 3. power off through a BMC -----------------------------------------
def power_fencing(workdir: Path, bmc: Any, builtin: dict[str, str],
                  reset: Callable[[], None], watch: Callable[[Any], Any],
                  repeat: int, label: str) -> dict[str, Any]:
    fencings = {"builtin": load(workdir / f"{label}-builtin.ini",
                                {HOST: builtin}),
                "agent": load(workdir / f"{label}-agent.ini",
                              {HOST: device_section(bmc)})}

    def run(kind: str) -> dict[str, Any]:
        reset()
        return bmc_fencing(host_fence(fencings[kind]), bmc, watch)

    runs = alternate(repeat, {k: (lambda k=k: run(k)) for k in KINDS},
                     f"{label} power-off")
    reset()
    return {"runs": runs}


# -- 4. one status read -------------------------------------------------------
def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime,
            children.ru_utime + children.ru_stime)


def cold_read(fencing: Fencing) -> dict[str, Any]:
    """A new fencer's first ``status`` (connection or process included),
    and the CPU it cost here and in its reaped children."""
    fencer = host_fence(fencing).devices[0][1].fencer
    own, children = _cpu()
    began = time.monotonic()
    state = fencer._read_power(TIMEOUT)
    seconds = time.monotonic() - began
    helper = getattr(fencer, "_helper", None)
    fencer._close()
    if helper is not None:      # the ipmi helper: reaped before counting
        helper._process.wait(10)
    own_after, children_after = _cpu()
    if state != "On":
        raise RuntimeError(f"status read {state}")
    return {"seconds": seconds, "cpu_self_s": own_after - own,
            "cpu_children_s": children_after - children}


def warm_reads(fencing: Fencing, reads: int) -> list[float]:
    """``reads`` reads on one built-in fencer's open session."""
    fencer = host_fence(fencing).devices[0][1].fencer
    seconds = []
    try:
        fencer._read_power(TIMEOUT)
        for _ in range(reads):
            began = time.monotonic()
            fencer._read_power(TIMEOUT)
            seconds.append(time.monotonic() - began)
    finally:
        fencer._close()
    return seconds


def status_reads(workdir: Path, bmc: Any, builtin: dict[str, str],
                 reads: int, label: str) -> dict[str, Any]:
    fencings = {"builtin": load(workdir / f"{label}-status-builtin.ini",
                                {HOST: builtin}),
                "agent": load(workdir / f"{label}-status-agent.ini",
                              {HOST: device_section(bmc)})}
    runs = alternate(reads, {k: (lambda k=k: cold_read(fencings[k]))
                             for k in KINDS}, f"{label} status")
    return {"runs": runs, "builtin_warm_s": warm_reads(fencings["builtin"],
                                                        reads)}


# -- figures ------------------------------------------------------------------
def stats(values: list[float | None]) -> dict[str, Any]:
    known = [v for v in values if v is not None]
    if not known:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    return {"n": len(known), "p50": common.median(known),
            "p95": common.percentile(known, 95), "max": max(known)}


def _field(runs: list[dict[str, Any]], key: str) -> list[Any]:
    return [r[key] for r in runs]


def figures(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every figure of the table: label -> p50/p95/max (seconds)."""
    out: dict[str, dict[str, Any]] = {}
    kdump = data["kdump"]["runs"]
    out["kdump, sender every 1 s: start -> proof"] = stats(
        _field(kdump["sending"], "seconds"))
    out["  start -> fence_kdump's port bound"] = stats(
        _field(kdump["sending"], "start_to_bound"))
    out["kdump, one message: start -> proof"] = stats(
        _field(kdump["one_message"], "seconds"))
    out["  start -> port bound"] = stats(
        _field(kdump["one_message"], "start_to_bound"))
    out["  message sent (port bound) -> proof"] = stats(
        _field(kdump["one_message"], "message_to_proof"))
    names = {"redfish": ("redfish (sushy)", "fence_redfish"),
             "ipmi": ("ipmi (pyghmi helper)", "fence_ipmilan")}
    for bmc, (builtin, agent) in names.items():
        runs = data[bmc]["runs"]
        for kind, name in zip(KINDS, (builtin, agent), strict=True):
            out[f"{bmc}: {name}, start -> proof"] = stats(
                _field(runs[kind], "seconds"))
            for key, label in (("start_to_request", "start -> BMC holds "
                                "the request"),
                               ("request_to_off", "request -> power Off "
                                "(emulator's lag)"),
                               ("off_to_proof", "power Off -> proof")):
                out[f"  {name}: {label}"] = stats(_field(runs[kind], key))
    for bmc, (builtin, agent) in names.items():
        reads = data["status"][bmc]
        out[f"status read, {agent} (new process)"] = stats(
            _field(reads["runs"]["agent"], "seconds"))
        out[f"status read, {builtin}, new session"] = stats(
            _field(reads["runs"]["builtin"], "seconds"))
        out[f"status read, {builtin}, open session"] = stats(
            reads["builtin_warm_s"])
    return out


def cpu(data: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Mean CPU milliseconds per cold status read: here, children."""
    out = {}
    for bmc in ("redfish", "ipmi"):
        for kind in KINDS:
            runs = data["status"][bmc]["runs"][kind]
            out[f"{bmc} {kind}"] = {
                "self_ms": 1000 * sum(_field(runs, "cpu_self_s"))
                / len(runs),
                "children_ms": 1000 * sum(_field(runs, "cpu_children_s"))
                / len(runs)}
    return out


def _table(data: dict[str, Any]) -> None:
    print(f"\n== Fencing: start -> proof, and one status read "
          f"(seconds; {data['repeat']} fencings, {data['reads']} reads "
          f"each; {data['minutes']:.1f} min)")
    width = max(len(label) for label in data["figures"])
    print(f"  {'figure':<{width}}  {'n':>3} {'p50':>7} {'p95':>7} "
          f"{'max':>7}")
    for label, f in data["figures"].items():
        shown = [f"{f[k]:7.3f}" if f[k] is not None else "      -"
                 for k in ("p50", "p95", "max")]
        print(f"  {label:<{width}}  {f['n']:>3} {' '.join(shown)}")
    print("\n  CPU per status read, mean ms (this process + children):")
    for name, c in data["cpu_per_read"].items():
        print(f"    {name:<16} {c['self_ms']:7.1f} + "
              f"{c['children_ms']:7.1f} = "
              f"{c['self_ms'] + c['children_ms']:7.1f}")
    print("\n  Share of start -> proof that is the emulator's lag "
          "(request -> power Off), median of the fencings:")
    for name, share in data["lag_share"].items():
        print(f"    {name:<16} {100 * share:5.0f}%")


def lag_share(data: dict[str, Any]) -> dict[str, float]:
    """Per driver, the median over its fencings of the emulator's lag
    (request -> power Off) over start -> proof."""
    out = {}
    for bmc in ("redfish", "ipmi"):
        for kind in KINDS:
            out[f"{bmc} {kind}"] = common.median([
                r["request_to_off"] / r["seconds"]
                for r in data[bmc]["runs"][kind]
                if r["request_to_off"] is not None])
    return out


def main(repeat: int = REPEAT, reads: int = READS) -> dict[str, Any]:
    began = time.monotonic()
    for program in (FENCE_KDUMP, FENCE_KDUMP_SEND, FENCE_REDFISH,
                    FENCE_IPMILAN, IPMITOOL):
        reason = unavailable(program)
        if reason:
            raise SystemExit(reason)
    # verify = false, on purpose: the emulator's self-signed certificate.
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    data: dict[str, Any] = {
        "repeat": repeat, "reads": reads, "host": HOST,
        "fencing": {"poll_interval": POLL_INTERVAL, "timeout": TIMEOUT,
                    "attempts": ATTEMPTS},
        "ipmi_lag_s": IPMI_LAG, "redfish_bmc": "tls=True, fast=True"}
    with tempfile.TemporaryDirectory(prefix="fencing-") as tmp:
        workdir = Path(tmp)
        with RedfishBmc(workdir / "redfish-bmc", tls=True, fast=True) \
                as redfish, IpmiBmc(workdir / "ipmi-bmc",
                                    lag=IPMI_LAG) as ipmi:
            password_file = workdir / "ipmi-password"
            with open(os.open(password_file, os.O_WRONLY | os.O_CREAT,
                              0o600), "w", encoding="utf-8") as handle:
                handle.write(ipmi.password + "\n")
            redfish_builtin = {**redfish.credentials(), "verify": "false"}
            ipmi_builtin = ipmi.credentials()
            data["kdump"] = kdump_fencing(workdir, ipmi, repeat)
            data["redfish"] = power_fencing(
                workdir, redfish, redfish_builtin,
                lambda: redfish_on(redfish), RedfishWatch, repeat,
                "redfish")
            data["ipmi"] = power_fencing(
                workdir, ipmi, ipmi_builtin,
                lambda: ipmi_on(ipmi, password_file), IpmiWatch, repeat,
                "ipmi")
            data["status"] = {
                "redfish": status_reads(workdir, redfish, redfish_builtin,
                                        reads, "redfish"),
                "ipmi": status_reads(workdir, ipmi, ipmi_builtin, reads,
                                     "ipmi")}
    data["power_off_requests_max"] = max(
        r["power_off_requests"] for bmc in ("redfish", "ipmi")
        for kind in KINDS for r in data[bmc]["runs"][kind])
    data["bmc_requests_max"] = max(
        r["bmc_requests"] for bmc in ("redfish", "ipmi")
        for kind in KINDS for r in data[bmc]["runs"][kind])
    data["figures"] = figures(data)
    data["cpu_per_read"] = cpu(data)
    data["lag_share"] = lag_share(data)
    data["minutes"] = (time.monotonic() - began) / 60
    _table(data)
    common.report("fencing", "Fencing run", [
        ("fencings per figure", repeat, "plus one uncounted"),
        ("status reads per figure", reads, "plus one uncounted"),
        ("most power-off requests in one fencing",
         data["power_off_requests_max"], "1: proved on the first"),
        ("  as the BMCs saw them", data["bmc_requests_max"], ""),
        ("minutes", data["minutes"], "target < 10"),
    ], data)
    return data


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=REPEAT,
                        help="fencings per figure (default %(default)s)")
    parser.add_argument("--reads", type=int, default=READS,
                        help="status reads per figure (default "
                             "%(default)s)")
    args = parser.parse_args()
    main(args.repeat, args.reads)
