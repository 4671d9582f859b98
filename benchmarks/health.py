"""Benchmark: the hardware-health poll at 1,000 hosts.

    python -m benchmarks.health [--reads 5] [--profile]

About 8 minutes on 2 busy cores, 5 of them the CA-bundle scenario's
(2.5 minutes once each bundle is loaded once per process).

``HardwareWatch.look`` (recovery/engine/hardware.py), as recovery-engine
runs it every ``[host_drain] health_interval``: one census of Nova (an
in-memory stand-in listing 1,000 up compute services), then each host's
health read through its Redfish fencing device
(``RedfishFencer.read_health``, sushy), 16 hosts at once on the
concurrency pool. The watch is built as the engine builds it: a real
``Fencing`` from a generated credentials file (one section per host:
driver redfish, the BMC's address, its own system, username and
password), an SQLite store, the process monkey-patched by eventlet.

The 1,000 BMCs are one small HTTP server in its own process (its CPU is
not the engine's): it answers what sushy asks for, the service root
(``GET /redfish/v1/``, at connect, without credentials as Redfish
allows) and each host's System (``GET /redfish/v1/Systems/<id>``, about
2 KB as a real BMC's, Status Health and HealthRollup OK, PowerState On)
with HTTP Basic auth; it counts the requests it served and the
connections it accepted (in a file both processes map, read between two
looks). It keeps a connection open unless the client asks it to close
(and then says ``Connection: close`` back, as a BMC's web server does).

Four scenarios, each in a fresh engine process:

- ``http``: plain HTTP, sushy as the engine runs it. sushy asks every
  BMC to close the connection after its answer (its connector sets
  ``Connection: close`` on its session: "some BMCs choke at
  long-running persistent HTTP connections"), so every read connects;
- ``https``: the same over TLS (a self-signed certificate, verified
  against it as the credentials file's ``verify``): a TLS handshake per
  read;
- ``https, verify = a CA bundle``: the same, ``verify`` naming a bundle
  the size of a system's (certifi's CAs and the BMCs' certificate): what
  ``verify = true``, the default, reads. requests has urllib3 load the
  bundle into a new TLS context for every connection;
- ``https, kept alive``: what-if, not what the engine does: sushy's
  ``Connection: close`` dropped in the engine process, so each BMC's
  connection is kept between reads (what a kept connection would save,
  and the file descriptors it holds).

In each: the first look (it builds each host's fencing and connects:
more requests), then ``--reads`` steady-state looks. Reported per look:
the engine's CPU (``time.process_time``), the requests and connections
the BMCs saw, the reads that failed, its wall time; and, at the modelled
``health_interval`` of 60 s, the CPU seconds per second of polling and
the requests per second sent to the BMCs. Nova's census adds one request
per look (not counted here). ``--profile`` prints where one more steady
look's CPU goes (cProfile; green threads blur its attribution of
waits).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.server
import json
import logging
import mmap
import os
import pstats
import resource
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from benchmarks import common

HOSTS = 1000
READS = 5
INTERVAL = 60.0         # the health_interval modelled, s
USERNAME, PASSWORD = "admin", "bmc-secret"
# label: (the credentials file's verify: none for plain HTTP, the BMCs'
# own certificate, or a CA bundle the size of a system's; sushy's
# Connection: close dropped, the what-if)
SCENARIOS = {
    "http": (None, False),
    "https": ("cert", False),
    "https, verify = a CA bundle": ("bundle", False),
    "https, kept alive": ("cert", True),
}
# The BMCs' counters: requests, connections, refusals (401/404).
COUNTERS = struct.Struct("<3q")

# The engine child: patched before anything else is imported, as
# recovery-engine's main() does.
CHILD = """
import sys
from recovery import concurrency
concurrency.monkey_patch()
from benchmarks import health
health.engine(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1",
              sys.argv[4] == "1")
"""


def host_name(n: int) -> str:
    return f"compute-{n:04d}"


def system_id(n: int) -> str:
    return f"4c4c4544-0000-1000-8000-{n:012d}"


def root_document() -> dict[str, Any]:
    return {
        "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
        "@odata.id": "/redfish/v1/", "Id": "RootService",
        "Name": "Root Service", "RedfishVersion": "1.15.0",
        "UUID": "92384634-2938-2342-8820-489239905423",
        "Systems": {"@odata.id": "/redfish/v1/Systems"},
        "Chassis": {"@odata.id": "/redfish/v1/Chassis"},
        "Managers": {"@odata.id": "/redfish/v1/Managers"},
        "SessionService": {"@odata.id": "/redfish/v1/SessionService"},
        "Registries": {"@odata.id": "/redfish/v1/Registries"},
        "Links": {"Sessions": {
            "@odata.id": "/redfish/v1/SessionService/Sessions"}},
    }


def system_document(n: int) -> dict[str, Any]:
    """A System about the size of a real BMC's (without its Oem)."""
    path = f"/redfish/v1/Systems/{system_id(n)}"
    ok = {"State": "Enabled", "Health": "OK", "HealthRollup": "OK"}
    return {
        "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
        "@odata.id": path, "Id": system_id(n), "Name": "System",
        "SystemType": "Physical", "Manufacturer": "Contoso",
        "Model": "R760", "SKU": f"SKU{n:06d}",
        "SerialNumber": f"SN{n:08d}", "PartNumber": "0F2D3X",
        "UUID": system_id(n), "HostName": host_name(n),
        "Status": ok, "IndicatorLED": "Off", "PowerState": "On",
        "BiosVersion": "2.1.5",
        "Boot": {
            "BootSourceOverrideEnabled": "Disabled",
            "BootSourceOverrideTarget": "None",
            "BootSourceOverrideTarget@Redfish.AllowableValues": [
                "None", "Pxe", "Cd", "Usb", "Hdd", "BiosSetup",
                "Utilities", "UefiTarget", "UefiHttp"],
            "BootSourceOverrideMode": "UEFI"},
        "ProcessorSummary": {"Count": 2, "Model": "Intel(R) Xeon(R) Gold",
                             "Status": ok},
        "MemorySummary": {"TotalSystemMemoryGiB": 512, "Status": ok},
        **{name: {"@odata.id": f"{path}/{name}"} for name in (
            "Bios", "SecureBoot", "Processors", "Memory",
            "EthernetInterfaces", "SimpleStorage", "Storage",
            "LogServices")},
        "Links": {"Chassis": [{"@odata.id": "/redfish/v1/Chassis/1"}],
                  "ManagedBy": [{"@odata.id": "/redfish/v1/Managers/1"}]},
        "Actions": {"#ComputerSystem.Reset": {
            "target": f"{path}/Actions/ComputerSystem.Reset",
            "ResetType@Redfish.AllowableValues": [
                "On", "ForceOff", "GracefulShutdown", "GracefulRestart",
                "ForceRestart", "Nmi", "PushPowerButton"]}},
    }


# -- the BMCs: one server process ------------------------------------------

class Counters:
    """The BMCs' counters, in a file both processes map."""

    def __init__(self, path: Path, create: bool = False) -> None:
        if create:
            path.write_bytes(bytes(COUNTERS.size))
        with open(path, "r+b") as handle:
            self._map = mmap.mmap(handle.fileno(), COUNTERS.size)
        self._lock = threading.Lock()

    def add(self, index: int) -> None:
        with self._lock:
            values = list(COUNTERS.unpack_from(self._map))
            values[index] += 1
            COUNTERS.pack_into(self._map, 0, *values)

    def read(self) -> dict[str, int]:
        requests, connections, refused = COUNTERS.unpack_from(self._map)
        return {"requests": requests, "connections": connections,
                "refused": refused}


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True
    tls: ssl.SSLContext | None = None
    counters: Counters

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake in the connection's own thread.
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return
        super().finish_request(request, client_address)


class _Bmcs(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # An answer in one write (headers and body), sent at once.
    wbufsize = -1
    disable_nagle_algorithm = True
    server: _Server
    _documents: dict[str, bytes] = {}
    _auth = "Basic " + base64.b64encode(
        f"{USERNAME}:{PASSWORD}".encode()).decode()

    def setup(self) -> None:
        super().setup()
        self.server.counters.add(1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        counters = self.server.counters
        counters.add(0)
        path = self.path.split("?")[0].rstrip("/")
        # The service root needs no credentials (Redfish says so; sushy
        # reads it before it sets its authentication).
        if (path != "/redfish/v1"
                and self.headers.get("Authorization") != self._auth):
            counters.add(2)
            self._answer(401, _error("Base.1.0.InsufficientPrivilege"))
            return
        body = self._documents.get(path)
        if body is None:
            counters.add(2)
            self._answer(404, _error("Base.1.0.ResourceMissingAtURI"))
            return
        self._answer(200, body)

    def _answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("OData-Version", "4.0")
        if code == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="BMC"')
        # Said back when the client asked for it (sushy does), as a BMC's
        # web server does: a client that kept the connection would race
        # its close.
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


def _error(code: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": code}}).encode()


def serve_bmcs(counters: Path, tls: str) -> None:
    """The 1,000 BMCs, until stdin closes; prints the port first.
    ``tls``: "CERT:KEY", or "" for plain HTTP."""
    documents = {"/redfish/v1": json.dumps(root_document()).encode()}
    for n in range(HOSTS):
        documents[f"/redfish/v1/Systems/{system_id(n)}"] = json.dumps(
            system_document(n)).encode()
    _Bmcs._documents = documents
    server = _Server(("127.0.0.1", 0), _Bmcs)
    server.counters = Counters(counters)
    if tls:
        cert, key = tls.split(":")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.tls = context
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


@contextlib.contextmanager
def bmcs(workdir: Path, tls: bool) -> Any:
    """The BMCs' server process; yields its address."""
    spec = ""
    if tls:
        from tests.bmc.redfish import _self_signed

        _self_signed(workdir / "cert.pem", workdir / "key.pem")
        spec = f"{workdir / 'cert.pem'}:{workdir / 'key.pem'}"
    Counters(workdir / "counters", create=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.health", "bmcs",
         str(workdir / "counters"), spec],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=common.ROOT)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the engine: one child process per scenario ----------------------------

def write_config(workdir: Path, address: str, verify: str | None) -> None:
    """The credentials file and recovery.conf; ``verify`` as in
    SCENARIOS."""
    import certifi

    from tests.bmc import write_sections

    extra = {}
    if verify == "cert":
        extra = {"verify": str(workdir / "cert.pem")}
    elif verify == "bundle":
        # As ``verify = true`` reads (requests' default: certifi's),
        # with the BMCs' certificate among them.
        bundle = workdir / "bundle.pem"
        bundle.write_text(Path(certifi.where()).read_text()
                          + (workdir / "cert.pem").read_text())
        extra = {"verify": str(bundle)}
    write_sections(workdir / "credentials", {
        host_name(n): {"driver": "redfish", "address": address,
                       "system": f"/redfish/v1/Systems/{system_id(n)}",
                       "username": USERNAME, "password": PASSWORD,
                       **extra}
        for n in range(HOSTS)})
    (workdir / "recovery.conf").write_text(
        f"[fencing]\ncredentials_file = {workdir / 'credentials'}\n\n"
        f"[host_drain]\nhealth_interval = {INTERVAL:g}\n")


def engine(workdir_text: str, reads: int, profile: bool,
           keep: bool) -> None:
    """The first look and ``reads`` more, in this (patched) process; the
    figures of each on stdout, as JSON. ``keep``: sushy's ``Connection:
    close`` dropped (the what-if)."""
    import time

    import sushy.connector
    from oslo_config import cfg

    import recovery.fencing.redfish  # noqa: F401 (its import: not a look)
    from recovery import concurrency
    from recovery import conf as recovery_conf
    from recovery.db.store import open_store
    from recovery.engine.hardware import HardwareWatch
    from recovery.fencing.credentials import load_fencing
    from tests.unit.fakes import MemoryNova

    assert concurrency.is_green()
    if keep:
        _keep_connections(sushy.connector.Connector)
    workdir = Path(workdir_text)
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(args=[], default_config_files=[str(workdir / "recovery.conf")])
    store = open_store(f"sqlite:///{workdir}/s.sqlite", upgrade=True)
    nova = MemoryNova()
    for n in range(HOSTS):
        nova.add_service(host_name(n), state="up")
    watch = HardwareWatch(conf, store, nova, load_fencing(conf),
                          concurrency.Clock(), "bench")
    # A read that fails is said at debug level only: counted here.
    failures = _Failures()
    hardware_log = logging.getLogger("recovery.engine.hardware")
    hardware_log.setLevel(logging.DEBUG)
    hardware_log.addHandler(failures)
    counters = Counters(workdir / "counters")
    looks = []
    for _ in range(1 + reads):
        failures.said.clear()
        seen = counters.read()
        cpu, wall = time.process_time(), time.perf_counter()
        watch.look()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        now = counters.read()
        looks.append({"cpu_s": cpu, "wall_s": wall,
                      **{key: now[key] - seen[key] for key in now},
                      "failed": len(failures.said),
                      "failures": failures.said[:3]})
    healths = [w.health for w in watch._hosts.values() if w is not None]
    found = {
        "looks": looks, "events": len(store.events()),
        "read_ok": sum(h == "OK" for h in healths),
        "open_fds": len(os.listdir("/proc/self/fd")),
        "peak_rss_mb": resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss / 1024}
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        watch.look()
        profiler.disable()
        profiler.dump_stats(workdir / "look.pstats")
    store.close()
    print(json.dumps(found))


class _Failures(logging.Handler):
    """The hosts' reads that failed, as the watch says them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.said: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Health of"):
            self.said.append(record.getMessage())


def _keep_connections(connector: Any) -> None:
    """The what-if: every sushy connector made from now on keeps its
    connection (no ``Connection: close`` on its session)."""
    made = connector.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self._session.headers.pop("Connection", None)

    connector.__init__ = init


def scenario(label: str, reads: int, profile: bool) -> dict[str, Any]:
    verify, keep = SCENARIOS[label]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with bmcs(workdir, verify is not None) as address:
            write_config(workdir, address, verify)
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(workdir), str(reads),
                 "1" if profile else "0", "1" if keep else "0"],
                capture_output=True, text=True, cwd=common.ROOT,
                timeout=1800)
            if done.returncode:
                raise RuntimeError(f"{label}: the engine child failed:\n"
                                   f"{done.stderr[-3000:]}")
        found = json.loads(done.stdout)
        if profile:
            print(f"\n== Where one steady look's CPU goes, {label} "
                  f"(cProfile)")
            stats = pstats.Stats(str(workdir / "look.pstats"))
            stats.sort_stats("tottime").print_stats(25)
            stats.sort_stats("cumulative").print_stats(40)
    first, steady = found["looks"][0], found["looks"][1:]
    if found["read_ok"] != HOSTS or found["events"]:
        raise RuntimeError(f"{label}: {found['read_ok']} of {HOSTS} hosts "
                           f"read OK, {found['events']} event(s)")
    for look in found["looks"]:
        if look["refused"]:
            raise RuntimeError(f"{label}: {look['refused']} request(s) "
                               f"refused by the BMCs")

    def mean(key: str) -> float:
        return sum(look[key] for look in steady) / len(steady)

    cpus = sorted(look["cpu_s"] for look in steady)
    return {
        "first": first, "steady": steady,
        "peak_rss_mb": found["peak_rss_mb"],
        "open_fds": found["open_fds"],
        "first_requests_per_host": first["requests"] / HOSTS,
        "first_cpu_ms_per_host": 1000 * first["cpu_s"] / HOSTS,
        "requests_per_host": mean("requests") / HOSTS,
        "connections_per_look": mean("connections"),
        "failed_per_look": mean("failed"),
        "cpu_ms_per_host": 1000 * common.median(cpus) / HOSTS,
        "cpu_s_per_look": common.median(cpus),
        "cpu_s_range": [cpus[0], cpus[-1]],
        "wall_s_per_look": common.median([look["wall_s"]
                                          for look in steady]),
        "cpu_s_per_s": common.median(cpus) / INTERVAL,
        "requests_per_s": mean("requests") / INTERVAL,
    }


def main(reads: int = READS, profile: bool = False) -> dict[str, Any]:
    found = {label: scenario(label, reads, profile) for label in SCENARIOS}
    rows: list[tuple[str, Any, str]] = []
    for label, data in found.items():
        first = data["first"]
        low, high = data["cpu_s_range"]
        rows += [
            (f"{label}: first look: requests / connections / failed",
             f"{first['requests']} / {first['connections']} / "
             f"{first['failed']}", "report"),
            (f"{label}: first look: CPU / wall (s)",
             f"{first['cpu_s']:.2f} / {first['wall_s']:.2f}", "report"),
            (f"{label}: steady: requests per host read",
             data["requests_per_host"], "1"),
            (f"{label}: steady: connections opened per look",
             data["connections_per_look"], "report"),
            (f"{label}: steady: reads failed per look",
             data["failed_per_look"], "0"),
            (f"{label}: steady: CPU per host read (ms)",
             data["cpu_ms_per_host"], f"report (look {low:.2f}-"
                                      f"{high:.2f} s)"),
            (f"{label}: steady: wall of one look, {HOSTS} hosts (s)",
             data["wall_s_per_look"], "report"),
            (f"{label}: every {INTERVAL:g} s: CPU (s per s)",
             data["cpu_s_per_s"], "report"),
            (f"{label}: every {INTERVAL:g} s: BMC requests per s",
             data["requests_per_s"], "report"),
            (f"{label}: engine open fds / peak RSS (MB)",
             f"{data['open_fds']} / {data['peak_rss_mb']:.0f}", "report"),
        ]
    data = {"hosts": HOSTS, "reads": reads, "interval_s": INTERVAL,
            "scenarios": found}
    common.report("health", f"Hardware-health poll, {HOSTS} hosts "
                  f"(Redfish, sushy; {reads} steady looks each; CPU and "
                  f"wall: medians)", rows, data)
    return data


if __name__ == "__main__":
    if sys.argv[1:2] == ["bmcs"]:
        serve_bmcs(Path(sys.argv[2]), sys.argv[3])
    else:
        parser = argparse.ArgumentParser(prog="python -m benchmarks.health")
        parser.add_argument("--reads", type=int, default=READS)
        parser.add_argument("--profile", action="store_true")
        args = parser.parse_args()
        main(args.reads, args.profile)
