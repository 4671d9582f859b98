"""Benchmark: ``recovery host-drain`` of 100 instances, against the
bound nova-compute's ``max_concurrent_live_migrations`` sets.

    python -m benchmarks.drain [--instances 100] [--limits 1,2,4]
                               [--latency 0.5] [--poll-intervals 0.5,0.1]
                               [--rate 50] [--seed 42]

About 5 minutes on 2 cores. Writes benchmarks/results/drain.json.

The cloud: the fake Nova (tests/fakenova) with its latency model: every
request waits 1-5 ms, each live migration takes L = ``--latency`` s
+/- 50 % (``one_evacuation_latency``; from the request: the conductor
0.2 L, then on the source's executor preparing 0.4 L and running
0.4 L), seeded. One source host, ``compute-1``, holds the instances
(ACTIVE, one priority) and runs at most M live migrations at once (its
``max_concurrent_live_migrations``, the others queued by Nova); ten
destination hosts with room for all. Recovery runs at its defaults but
for ``[host_drain] max_parallel`` = ``max_per_host`` = M (the most
nova-compute runs; each destination takes at most M too, so the
destinations never hold a migration back) and, per run, ``[host_failure]
poll_interval`` (its default 0.5 s, and one smaller); ``--rate`` sets
``[nova] max_requests_per_second`` (default: recovery's, 50; 0 lifts
the cap).

The bound, for N instances at M at once: a drain that keeps M live
migrations in flight, as recovery does, and sends the next one the
moment one completes, takes ceil(N / M) x L, L the mean of this run's
own migrations, each timed by the fake Nova's record from its
``created_at`` (the request accepted) to its ``updated_at`` (completed),
less any time it waited in the source's queue (from "queued" to
"preparing": the record's changes are timed as the fake makes them).
With L drawn +/- 50 % and M dividing N, ceil(N / M) x L is the sum of
the migrations' times over M: no drain of M at a time can beat it. To it
is added what a drain cannot do without: the same command's dry run on
the same cloud, timed the same way (the process start, the imports, the
config, Nova's census, the host's instances, Placement's room, the
report, the exit). The target is a drain within 1.15 times that bound.

Nova's own floor is lower, and reported beside it: the source's
executor holds a slot only from preparing to completed (0.8 L), the
conductor's part (0.2 L) coming before; a client that lets Nova queue
the next migration (more in flight than M) could take the conductor's
mean + ceil(N / M) x the executor's mean, plus the dry run.

The drain is timed from just before its process starts to its exit.
Also reported, each from the fake Nova's records:

- the ideal: the same migrations (their measured times, in the order
  they were sent) run back to back on M slots, plus the dry run: what
  is left over the bound when nothing is lost between two migrations
  (with L drawn, the slots do not end together);
- per migration, from its record's completion to the next live
  migration sent (the k-th completion against the (M + k)-th request),
  and the part of it spent before recovery's poll saw the completion
  (its first ``GET /os-migrations?instance_uuid=...`` after it); and the
  source's executor idle between two migrations (the k-th completion
  to the (M + k)-th "preparing"), and the mean wait in its queue;
- the process start to the first migration sent, and the last
  completion to the exit;
- Nova requests per instance (the compute API's, and Placement's
  apart), by kind in the JSON;
- the CPU time per instance of the ``recovery`` process (user + system,
  from the kernel's accounting of the child: ``os.wait4``), less the
  dry run's;
- the most live migrations the fake Nova saw running from the source and
  to one destination at once, which must not pass M.
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.fakenova import FakeNova

INSTANCES = 100
LIMITS = (1, 2, 4)
# Seconds per live migration, drawn +/- JITTER: short, so that the whole
# benchmark takes minutes; the overhead per migration it shows is in
# seconds, whatever L.
LATENCY, JITTER = 0.5, 0.5
REQUEST_LATENCY = (0.001, 0.005)   # as benchmarks/ceph_cloud.py's
# [host_failure] poll_interval: the default, and one smaller.
POLL_INTERVALS = (0.5, 0.1)
DESTINATIONS = 10
SEED = 42
RATE = 50.0   # [nova] max_requests_per_second's default
SOURCE = "compute-1"
TARGET = 1.15


def cloud(fake: FakeNova, instances: int, limit: int) -> None:
    fake.add_compute(SOURCE)
    for n in range(DESTINATIONS):
        fake.add_compute(f"dest-{n + 1}")
    for n in range(instances):
        fake.add_server(f"vm-{n}", SOURCE)
    fake.set_max_concurrent_live_migrations(SOURCE, limit)


def drain_config(workdir: Path, endpoint: str, limit: int,
                 poll_interval: float, rate: float | None) -> Path:
    """Recovery at its defaults, but for the drain's bounds, the poll
    interval and (if given) the rate cap."""
    path = common.default_config(workdir, endpoint)
    text = path.read_text()
    if rate is not None:
        text = text.replace("[nova]\n", f"[nova]\nmax_requests_per_second"
                                        f" = {rate:g}\n")
    path.write_text(
        text + f"\n[host_failure]\npoll_interval = {poll_interval:g}\n\n"
               f"[host_drain]\nmax_parallel = {limit}\n"
               f"max_per_host = {limit}\n")
    return path


def one_drain(instances: int, limit: int, latency: float,
              poll_interval: float, rate: float | None,
              seed: int) -> dict[str, Any]:
    with FakeNova(evacuation_latency=latency, evacuation_jitter=JITTER,
                  request_latency=REQUEST_LATENCY, seed=seed) as fake, \
            tempfile.TemporaryDirectory() as workdir:
        cloud(fake, instances, limit)
        changes = _record_changes(fake)
        config = drain_config(Path(workdir), fake.endpoint, limit,
                              poll_interval, rate)
        plan = common.run_cli(config, SOURCE, command="host-drain",
                              options=("--dry-run",))
        run = common.run_cli(config, SOURCE, command="host-drain")
        requests = [r for r in fake.requests if r["time"] >= run["started"]]
        migrations = [m for m in fake.migrations()
                      if m["migration_type"] == "live-migration"]
        peaks = fake.peak_live_migrations()
        left = [s["name"] for s in fake.servers() if s["host"] == SOURCE]
    outcomes = [r["outcome"] for r in run["report"]["instances"]]
    if left or set(outcomes) != {"recovered"}:
        raise RuntimeError(f"drain incomplete: {len(left)} left on "
                           f"{SOURCE}, outcomes {sorted(set(outcomes))}")
    figures = _figures(instances, limit, latency, plan, run, requests,
                       migrations, changes, peaks)
    return {"poll_interval_s": poll_interval,
            "rate_cap": RATE if rate is None else rate, **figures}


def _figures(instances: int, limit: int, latency: float,
             plan: dict[str, Any],
             run: dict[str, Any], requests: list[dict[str, Any]],
             migrations: list[dict[str, Any]],
             changes: dict[int, dict[str, float]],
             peaks: dict[str, dict[str, int]]) -> dict[str, Any]:
    seconds = run["ended"] - run["started"]
    overhead = plan["ended"] - plan["started"]
    done = sorted((m for m in migrations if m["status"] == "completed"),
                  key=lambda m: m["created_at"])
    # Each migration: accepted -> queued (the conductor), preparing ->
    # completed (the source's executor); its wait in the queue apart.
    conductor = [changes[m["id"]]["queued"] - common.epoch(m["created_at"])
                 for m in done]
    executor = [changes[m["id"]]["completed"] - changes[m["id"]]["preparing"]
                for m in done]
    queued = [changes[m["id"]]["preparing"] - changes[m["id"]]["queued"]
              for m in done]
    durations = [c + e for c, e in zip(conductor, executor, strict=True)]
    mean = statistics.mean(durations)
    waves = math.ceil(instances / limit)
    migrating = waves * mean
    bound = migrating + overhead
    executor_floor = (statistics.mean(conductor)
                      + waves * statistics.mean(executor) + overhead)
    starts = sorted(changes[m["id"]]["preparing"] for m in done)
    ideal = _back_to_back(durations, limit) + overhead
    compute = [r for r in requests if r["path"].startswith("/v2.1")]
    sends = sorted(r["time"] for r in compute
                   if r["action"] == "os-migrateLive")
    completions = sorted(common.epoch(m["updated_at"]) for m in done)
    gaps = [sends[limit + k] - completions[k]
            for k in range(len(sends) - limit)]
    idle = [starts[limit + k] - completions[k]
            for k in range(len(starts) - limit)]
    seen = _seen_after(done, compute)
    polls = [r for r in compute if r["path"] == "/v2.1/os-migrations"
             and "instance_uuid" in r["query"]]
    return {
        "instances": instances, "limit": limit,
        "latency_s": latency, "jitter": JITTER,
        "seconds": seconds, "dry_run_s": overhead,
        "migration_mean_s": mean, "migration_min_s": min(durations),
        "migration_max_s": max(durations), "migrating_s": migrating,
        "conductor_mean_s": statistics.mean(conductor),
        "executor_mean_s": statistics.mean(executor),
        "queued_mean_s": statistics.mean(queued),
        "bound_s": bound, "ratio_to_bound": seconds / bound,
        "executor_floor_s": executor_floor,
        "ratio_to_executor_floor": seconds / executor_floor,
        "ideal_s": ideal, "ratio_to_ideal": seconds / ideal,
        "completed_to_next_sent_s": statistics.mean(gaps),
        "completed_to_seen_s": statistics.mean(seen),
        "executor_idle_s": statistics.mean(idle),
        "start_to_first_sent_s": sends[0] - run["started"],
        "last_completed_to_exit_s": run["ended"] - completions[-1],
        "lost_s": seconds - bound,
        "requests": len(compute),
        "requests_per_instance": len(compute) / instances,
        "migration_polls_per_instance": len(polls) / instances,
        "placement_requests": len(requests) - len(compute),
        "kinds": common.kinds(requests),
        "cpu_s": run["cpu_s"], "dry_run_cpu_s": plan["cpu_s"],
        "cpu_ms_per_instance": (run["cpu_s"] - plan["cpu_s"])
        / instances * 1000,
        "peak_rss_mb": run["peak_rss_mb"],
        "peak_from_source": max(peaks["source"].values()),
        "peak_to_one_destination": max(peaks["dest"].values()),
    }


def _record_changes(fake: FakeNova) -> dict[int, dict[str, float]]:
    """When each migration took each status, as the fake Nova sets it
    (its record keeps only the last change's time): the fake's own
    setter, wrapped for the run."""
    changes: dict[int, dict[str, float]] = {}
    state = fake._state
    original = state.set_migration_status

    def set_status(migration: Any, status: str) -> None:
        original(migration, status)
        changes.setdefault(migration.id, {})[status] = common.epoch(
            migration.updated_at)

    state.set_migration_status = set_status
    return changes


def _back_to_back(durations: list[float], limit: int) -> float:
    """The makespan of ``durations``, in their order, on ``limit``
    slots, each sent the moment a slot frees."""
    slots = [0.0] * limit
    for duration in durations:
        heapq.heappush(slots, heapq.heappop(slots) + duration)
    return max(slots)


def _seen_after(done: list[dict[str, Any]],
                compute: list[dict[str, Any]]) -> list[float]:
    """Per completed migration: from its completion to the first poll of
    its instance's migrations after it."""
    polls: dict[str, list[float]] = {}
    for r in compute:
        if r["path"] == "/v2.1/os-migrations" and "instance_uuid" in r[
                "query"]:
            polls.setdefault(r["query"]["instance_uuid"], []).append(
                r["time"])
    seen = []
    for m in done:
        completed = common.epoch(m["updated_at"])
        after = [t for t in polls.get(m["instance_uuid"], [])
                 if t >= completed]
        if after:
            seen.append(min(after) - completed)
    return seen


def _table(runs: list[dict[str, Any]]) -> None:
    """The runs side by side."""
    print(f"\n== host-drain of {runs[0]['instances']} instances, fake Nova "
          f"(live migrations {runs[0]['latency_s']:g} s +/- "
          f"{runs[0]['jitter']:.0%})")
    head = ("poll s", "cap/s", "M", "drain s", "bound s", "ratio", "ideal s",
            "gap s", "to poll s", "req/inst", "CPU ms/inst")
    print("  " + "  ".join(f"{h:>9}" for h in head))
    for r in runs:
        cells = (f"{r['poll_interval_s']:g}", f"{r['rate_cap']:g}",
                 str(r["limit"]),
                 f"{r['seconds']:.1f}", f"{r['bound_s']:.1f}",
                 f"{r['ratio_to_bound']:.2f}", f"{r['ideal_s']:.1f}",
                 f"{r['completed_to_next_sent_s']:.3f}",
                 f"{r['completed_to_seen_s']:.3f}",
                 f"{r['requests_per_instance']:.2f}",
                 f"{r['cpu_ms_per_instance']:.1f}")
        print("  " + "  ".join(f"{c:>9}" for c in cells))
    print("  bound = ceil(N / M) x L (the runs' own mean migration) + the "
          "dry run; gap: a migration completed -> the next sent, of which "
          "'to poll' before a poll saw it")


def main(instances: int = INSTANCES, limits: tuple[int, ...] = LIMITS,
         latency: float = LATENCY,
         poll_intervals: tuple[float, ...] = POLL_INTERVALS,
         rate: float | None = None, seed: int = SEED) -> dict[str, Any]:
    runs = []
    load_before = os.getloadavg()
    for poll_interval in poll_intervals:
        for limit in limits:
            run = one_drain(instances, limit, latency, poll_interval,
                            rate, seed)
            runs.append(run)
            print(f"poll {poll_interval:g} s, M = {limit}: "
                  f"{run['seconds']:.1f} s / {run['bound_s']:.1f} s",
                  flush=True)
    _table(runs)
    data = {"instances": instances, "latency_s": latency, "jitter": JITTER,
            "request_latency_s": REQUEST_LATENCY,
            "rate_cap": RATE if rate is None else rate,
            "destinations": DESTINATIONS, "seed": seed,
            # What else the machine was doing: the drain's wall time is
            # mostly waits, its dry run and CPU are not.
            "load_average": {"before": load_before,
                             "after": os.getloadavg()},
            "runs": runs}
    rows = []
    for r in runs:
        label = f"poll {r['poll_interval_s']:g} s, M = {r['limit']}"
        if r["rate_cap"] != RATE:
            label += f", cap {r['rate_cap']:g}/s"
        rows += [
            (f"{label}: drain / bound ({r['seconds']:.1f} / "
             f"{r['bound_s']:.1f} s)", r["ratio_to_bound"],
             f"target <= {TARGET:g}"),
            (f"{label}: Nova requests per instance",
             r["requests_per_instance"], ""),
            (f"{label}: CPU per instance, ms", r["cpu_ms_per_instance"], ""),
            (f"{label}: most migrations from the source, to one "
             f"destination", f"{r['peak_from_source']}, "
             f"{r['peak_to_one_destination']}", f"<= {r['limit']}"),
        ]
    name = "-".join(["drain"] + [
        f"{key}-{','.join(f'{v:g}' for v in value)}"
        for key, value, default in (
            ("instances", (instances,), (INSTANCES,)),
            ("limits", limits, LIMITS), ("latency", (latency,), (LATENCY,)),
            ("polls", poll_intervals, POLL_INTERVALS),
            ("rate", (rate,), (None,)), ("seed", (seed,), (SEED,)))
        if tuple(value) != default])
    common.report(name, f"host-drain of {instances} instances, fake "
                  f"Nova ({latency:g} s live migrations)", rows, data)
    return data


def _numbers(kind: type) -> Any:
    return lambda text: tuple(kind(v) for v in text.split(","))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=INSTANCES)
    parser.add_argument("--limits", type=_numbers(int), default=LIMITS,
                        help="comma list of M, max_concurrent_live_"
                             "migrations = max_per_host (default 1,2,4)")
    parser.add_argument("--latency", type=float, default=LATENCY,
                        help="seconds per live migration, mean "
                             "(default %(default)s)")
    parser.add_argument("--poll-intervals", type=_numbers(float),
                        default=POLL_INTERVALS,
                        help="comma list of [host_failure] poll_interval "
                             "(default 0.5,0.1)")
    parser.add_argument("--rate", type=float, default=None,
                        help="[nova] max_requests_per_second (default: "
                             "recovery's, 50; 0: no cap)")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    main(args.instances, args.limits, args.latency, args.poll_intervals,
         args.rate, args.seed)
