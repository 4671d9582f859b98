"""The game day: 'recovery simulate' plans the failure of the hosts it
names as the runs would (``recovery.flows.simulate``), from one look at
today's Nova and Placement (``capacity.look``), says which of the
engine's gates would hold them, and estimates the time to recover from
this cloud's own past evacuations. Its only write is the event that
says it ran.
"""

import dataclasses
import datetime
import math
import statistics
from collections.abc import Sequence
from typing import Protocol

from oslo_config import cfg

from recovery import concurrency
from recovery import hostnames
from recovery.census import Census
from recovery.db.claims import Start
from recovery.db.claims import Window
from recovery.db.claims import fits
from recovery.db.control import Arming
from recovery.domains import FailureDomains
from recovery.domains import assess
from recovery.engine.capacity import EventLog
from recovery.engine.capacity import Segments
from recovery.engine.capacity import SegmentSource
from recovery.engine.capacity import fences
from recovery.engine.capacity import look
from recovery.engine.capacity import plan_env
from recovery.engine.gates import GateStore
from recovery.events import Decision
from recovery.events import Event
from recovery.events import EventKind
from recovery.flows import Cloud
from recovery.flows import Plan
from recovery.flows import placement_for_host
from recovery.flows import simulate as simulate_plans
from recovery.nova import Nova
from recovery.results import Outcome

# Past events read for the estimate: the latest evacuations are enough.
HISTORY_EVENTS = 20000


class SimulationStore(SegmentSource, EventLog, GateStore, Protocol):
    """What a simulated failure needs: the gates' state too."""
    def arming(self) -> Arming: ...


@dataclasses.dataclass(frozen=True)
class GateVerdict:
    gate: str
    holds: bool
    says: str


@dataclasses.dataclass(frozen=True)
class Estimate:
    """The time to recover, from this cloud's past evacuations."""

    seconds: float | None
    says: str


@dataclasses.dataclass(frozen=True)
class Simulation:
    failed: tuple[str, ...]
    plans: list[Plan]
    gates: list[GateVerdict]
    estimate: Estimate


def simulate(conf: cfg.ConfigOpts, store: SimulationStore, nova: Nova,
             clock: concurrency.Clock, failed: Sequence[str],
             actor: str) -> Simulation:
    """What ``failed`` failing now would do, from today's Nova and
    Placement: reads only, and one event that says it ran."""
    env, cloud = plan_env(conf, nova, clock), look(nova)
    computes = {s.host for s in cloud.services if s.binary == "nova-compute"}
    for host in failed:
        if host not in computes:
            raise hostnames.unknown_host(host)
    segments = Segments(store)
    plans = simulate_plans(env, cloud, failed, lambda host: (
        placement_for_host(env, segments, host, "")), fences(conf))
    verdicts = gates(conf, store, nova, clock, cloud, failed)
    estimate = estimate_time(store, plans, env.settings.threads,
                             conf.engine.max_concurrent_host_recoveries)
    evacuated = sum(r.outcome is Outcome.PLANNED
                    for p in plans for r in p.report.instances)
    short = sum(len(p.forecast.short) for p in plans)
    held = [v.gate for v in verdicts if v.holds]
    store.add_event(Decision(
        actor, ", ".join(failed), EventKind.SIMULATED,
        f"simulated the failure of {', '.join(failed)}: {evacuated} "
        f"instance(s) evacuated, {short} without room predicted; "
        f"{'held by ' + ', '.join(held) if held else 'no gate holds'}; "
        f"time to recover: {estimate.says}; nothing changed"), clock.now())
    return Simulation(tuple(failed), plans, verdicts, estimate)


def gates(conf: cfg.ConfigOpts, store: SimulationStore, nova: Nova,
          clock: concurrency.Clock, cloud: Cloud,
          failed: Sequence[str]) -> list[GateVerdict]:
    """Which of the engine's gates would hold these failures: disarm,
    the mass-failure brake (as ``gates.Gates`` judges it, the hosts down
    or in recovery now counted too), the per-window cap."""
    group = conf.safety
    arming = store.arming()
    verdicts = [GateVerdict(
        "disarm", not arming.armed,
        "armed" if arming.armed else
        f"disarmed by {arming.changed_by}: {arming.reason}; nothing "
        f"starts until 'recovery arm'")]
    census = Census(cloud.services, group.service_down_time)
    computes = {s.host for s in census.computes}
    down = census.down_hosts() | (store.hosts_in_recovery() & computes)
    assessment = assess(
        down | set(failed), computes,
        FailureDomains(conf, nova, clock).of_hosts(),
        max_percent=group.max_failed_hosts_percent,
        max_domains=group.max_failed_domains, noun="compute services")
    verdict = assessment.verdict
    if computes and down | set(failed) >= computes:
        verdict = (f"every one of the {len(computes)} compute services "
                   f"would look down at once")
    verdicts.append(GateVerdict(
        "brake", verdict is not None,
        verdict or f"{len((down | set(failed)) & computes)} of "
                   f"{len(computes)} compute services down or in recovery: "
                   f"under max_failed_hosts_percent "
                   f"({group.max_failed_hosts_percent}%)"))
    window = Window(group.max_host_recoveries_per_window,
                    group.window_seconds)
    starts = list(store.recoveries_started_within(window.seconds))
    waiting = []
    for host in failed:
        domain = assessment.domain_of(host)
        if fits(starts, dataclasses.replace(window, domain=domain)):
            starts.append(Start(0.0, domain))
        else:
            waiting.append(host)
    verdicts.append(GateVerdict(
        "window", bool(waiting),
        f"{', '.join(waiting)} would wait: more than "
        f"max_host_recoveries_per_window ({window.cap}) starts in "
        f"{window.seconds:g} s" if waiting else
        f"{len(starts)} of {window.cap} starts in the last "
        f"{window.seconds:g} s, these included"))
    return verdicts


def estimate_time(store: EventLog, plans: Sequence[Plan], threads: int,
                  concurrent: int) -> Estimate:
    """From the evacuations this cloud's past recoveries recorded (each
    instance's 'evacuating' event to its 'recovered' one): the median
    per instance, times the rounds of ``threads`` each priority phase
    takes; ``concurrent`` hosts recovered side by side (one engine's
    ``max_concurrent_host_recoveries``: more engines go faster), the
    longest first. A per-window cap that holds adds its wait, which the
    gates' verdict says."""
    durations = evacuation_seconds(store.events(limit=HISTORY_EVENTS))
    if not durations:
        return Estimate(None, "no estimate: no past evacuation recorded "
                              "in this store")
    median = statistics.median(durations)
    each = []
    for plan in plans:
        phases: dict[int | None, int] = {}
        for result in plan.report.instances:
            if result.outcome is Outcome.PLANNED:
                phases[result.priority_phase] = phases.get(
                    result.priority_phase, 0) + 1
        each.append(sum(math.ceil(n / threads) for n in phases.values()))
    # Waves of ``concurrent`` hosts, each as long as its longest.
    each.sort(reverse=True)
    rounds = sum(each[::concurrent])
    seconds = rounds * median
    return Estimate(seconds, (
        f"about {seconds:.0f} s: {rounds} round(s) of "
        f"{threads} evacuation(s) at the median {median:.1f} s of the "
        f"{len(durations)} past evacuation(s) recorded"))


def evacuation_seconds(events: Sequence[Event]) -> list[float]:
    """Each recorded evacuation's time: from an instance's 'evacuating'
    event to its 'recovered' event in the same run."""
    started: dict[tuple[str | None, str], datetime.datetime] = {}
    found = []
    for event in events:
        key = (event.notification_uuid, event.subject)
        if event.kind == EventKind.EVACUATING.value:
            started.setdefault(key, event.created_at)
        elif event.kind == EventKind.RECOVERED.value and key in started:
            found.append((event.created_at
                          - started.pop(key)).total_seconds())
    return found
