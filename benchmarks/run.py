"""Run every benchmark and print the summary table.

    python -m benchmarks.run          (or: tox -e bench)

Needs the ``integration`` extra (the real Nova of benchmark 1), and root
for the network namespaces of the fast path's (benchmarks/fastpath.py,
about 20 minutes). The soak (benchmarks/soak.py) alone takes about 22
minutes; the backends side by side (benchmarks/backends.py) about 9;
fencing per device kind (benchmarks/fencing.py, Debian's fence-agents)
about 3; the message bus (benchmarks/bus.py, RabbitMQ) about 3; the
storage fence on a real Ceph (Debian's ceph-mon, ceph-osd, python3-rados
and python3-rbd; root): benchmarks/ceph_fence.py about 1,
benchmarks/ceph_loss.py about 8, benchmarks/ceph_rack.py about 3; a
host drain against max_concurrent_live_migrations' bound
(benchmarks/drain.py) about 5.
Each benchmark also prints its own table and writes
benchmarks/results/*.json.
"""

from benchmarks import backends
from benchmarks import bus
from benchmarks import ceph_fence
from benchmarks import ceph_loss
from benchmarks import ceph_rack
from benchmarks import detector
from benchmarks import drain
from benchmarks import fastpath
from benchmarks import fencing
from benchmarks import latency
from benchmarks import metrics
from benchmarks import rack
from benchmarks import scale
from benchmarks import soak
from benchmarks import startup
from benchmarks import store
from benchmarks import tolerance
from benchmarks import ttr


def main() -> None:
    ttr_data = ttr.main()
    rack_data = rack.main()
    scale_data = scale.main()
    latency_data = latency.main()
    store_data = store.main()
    detector_data = detector.main()
    fastpath_data = fastpath.main()
    fencing_data = fencing.main()
    metrics_data = metrics.main()
    startup_data = startup.main()
    backends_data = backends.main()
    soak_data = soak.main()
    tolerance_data = tolerance.main()
    bus_data = bus.main()
    ceph_fence_data = ceph_fence.main()
    ceph_loss_data = ceph_loss.main()
    ceph_rack_data = ceph_rack.main()
    drain_data = drain.main()
    rows = []
    for run in ttr_data.values():
        label = f"real Nova, {run['instances']} instances, T={run['threads']}"
        rows += [
            (f"TTR ratio, {label}, to the {run['other']}",
             run["ttr_ratio"], "<= 1.00"),
            (f"Nova requests per instance, {label}",
             run["requests_per_instance"], "<= 3.5"),
        ]
    rows += [
        ("rack drill (20 x 50, 3 engines): time to the bound",
         rack_data["ratio_to_bound"], "<= 1.10"),
        ("rack drill: Nova requests per instance",
         rack_data["requests_per_instance"], "<= 3.5"),
        ("rack drill: CPU per instance (ms)",
         rack_data["cpu_ms_per_instance"], "<= 2"),
        ("peak RSS, 1,000 instances in flight (MB)",
         scale_data["one_host"]["peak_rss_mb"], "<= 150"),
        ("CPU per instance, 1,000 on one host (ms)",
         scale_data["cpu_ms_per_instance_one_host"], "<= 2"),
        ("CPU per instance, 20 hosts x 50 (ms)",
         scale_data["cpu_ms_per_instance_many_hosts"], "<= 2"),
        ("notification accepted -> first evacuate, max (s)",
         latency_data["max_s"], "<= 1"),
    ]
    rows += [
        ("nova-compute stopped -> first evacuate, detector, max (s)",
         detector_data["max_s"], f"<= {detector_data['target_s']:g}"),
        ("detector Nova requests per poll", detector_data[
            "idle_requests_per_poll"], "1"),
    ]
    fast, slow = fastpath_data["fast"], fastpath_data["slow"]
    rows += [(f"fast path p95, {label} (s)", fast[key]["p95"],
              f"<= {fastpath.TARGETS[key]:g}")
             for key, label in fastpath.SEGMENTS.items()]
    rows += [
        ("slow path p50, power loss -> first evacuate (s)",
         slow["loss_to_evacuate"]["p50"], "report"),
        ("detector CPU, 1,000 hosts (s per s)",
         fastpath_data["cost"]["cpu_s_per_s"], "report"),
        ("detector Nova requests per poll, 1,000 hosts",
         fastpath_data["cost"]["requests_per_poll"], "1"),
    ]
    rows += [(f"fencing p50, {label.strip()} (s)", figure["p50"], "report")
             for label, figure in fencing_data["figures"].items()
             if not label.startswith(" ")]
    rows += [
        ("metrics' CPU per instance, 1,000 in flight (ms)",
         metrics_data["cpu_ms_per_instance"], "report"),
        ("one /metrics scrape (ms)", metrics_data["scrape_ms"], "report"),
    ]
    rows += [
        ("recovery host-failure start -> first Nova request (s)",
         startup_data["migrated_store"]["median_s"],
         f"<= {startup_data['target_s']:g}"),
        ("  the same, first use (schema created) (s)",
         startup_data["fresh_store"]["median_s"], "report"),
        ("  its libraries alone (s)",
         startup_data["libraries_floor"]["median_s"], "report"),
        ("recovery --help (s)", startup_data["help"]["median_s"], "report"),
    ]
    for key, figure in backends_data["figures"].items():
        label = backends_data["labels"][key]
        eventlet = figure["eventlet"]["median"]
        rows += [
            (f"{label}, eventlet", eventlet, "report"),
            ("  the same, threading", figure["threading"]["median"],
             f"<= {eventlet + figure['noise']:.3g} (eventlet + noise)"),
        ]
    rows += [(f"store time per instance, {backend} (ms)",
              data["ms_per_instance"], "report")
             for backend, data in store_data.items()]
    soak_totals = soak_data["totals"]
    rows += [
        (f"soak, {soak_totals['runs']} seeded fault runs: left locked",
         soak_totals["locked"], "0"),
        ("  evacuated twice", soak_totals["twice"], "0"),
        ("  failed instances", soak_totals["failed"], "report"),
        ("  minutes", soak_data["minutes"], "< 25"),
    ]
    for free, cloud in tolerance_data["clouds"].items():
        rows += [
            (f"failures tolerated refresh, 1,000 hosts, {free} slot(s) "
             f"free: requests", cloud["requests"],
             f"<= {tolerance.TARGET_REQUESTS}"),
            ("  its CPU (s)", cloud["cpu_s"], "report"),
        ]
    rows += [
        ("bus on vs no bus, 100 instances (relative)",
         bus_data["bus_vs_noop"], "<= +0.02"),
        ("broker stopped mid-run vs no bus (relative)",
         bus_data["stopped_vs_noop"], "<= +0.05"),
        ("evacuated -> owner's event at the listener, p95 (s)",
         bus_data["owner_delay_p95"], "<= 1"),
    ]
    rows += _storage_rows(ceph_fence_data, ceph_loss_data, ceph_rack_data)
    for run in drain_data["runs"]:
        label = (f"host-drain of {run['instances']}, M={run['limit']}, "
                 f"poll {run['poll_interval_s']:g} s")
        rows += [
            (f"{label}: time to the bound", run["ratio_to_bound"],
             f"<= {drain.TARGET:g}"),
            ("  Nova requests per instance", run["requests_per_instance"],
             "report"),
        ]
    print("\n== Summary")
    for metric, value, target in rows:
        print(f"  {metric:<56} {value:>8.3g}   target {target}")


def _storage_rows(fence: dict, loss: dict, rack: dict) -> list[tuple]:
    rows = [("Ceph fence -> the old guest's first refused write, p95 (s)",
             fence["figures"]["fence_to_refused_write"]["p95"], "report")]
    rows += [(f"power loss, BMC gone, on Ceph -> first evacuate, p95, "
              f"BMC timeout {label} (s)", run["loss_to_evacuate"]["p95"],
              f"<= {ceph_loss.TARGET:g}")
             for label, run in loss["runs"].items()]
    rows += [(f"rack 10 x 20 on Ceph -> last ACTIVE, BMCs {label}, p50 (s)",
              rack["last_active_s"][label]["p50"], "report")
             for label in ("gone", "alive")]
    return rows


if __name__ == "__main__":
    main()
