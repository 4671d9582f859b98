"""Benchmark: the message bus, on and off the recovery's path.

    python -m benchmarks.bus            (about 3 minutes; needs RabbitMQ:
                                         the machine's on 127.0.0.1:5672
                                         and Debian's rabbitmq-server)

``recovery-engine`` recovers 100 instances of a failed host on the fake
Nova (0.3 s per evacuation, 10 threads), three ways, alternating round
by round so that whatever else the machine does falls on all three:

- ``noop``: no driver, nothing published (the default);
- ``bus``: ``messagingv2`` to the machine's RabbitMQ, a listener there;
- ``stopped``: ``messagingv2`` to a RabbitMQ node of the benchmark's
  own, stopped as the first instance is recovered.

The recovery's time is from the notification's POST to the last
instance done (its vmove's ``end_time``, taken by the engine once the
instance is unlocked). With the bus on, each owner's
``instance.recovery.end`` is timed from the moment the fake Nova
finished its evacuation (the evacuate call's time plus the latency) to
its arrival at the listener: p50, p95 and the maximum over every
instance of every round. That includes the engine's wait to see the
evacuation done (its poll) besides the journal, the queue and the
broker: an upper bound of "evacuation confirmed -> event on the
broker".
"""

from __future__ import annotations

import datetime
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from tests import rabbit
from tests.fakenova.server import FakeNova
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

INSTANCES = 100
LATENCY = 0.3
THREADS = 10
ROUNDS = 3
MODES = ("noop", "bus", "stopped")


def _utc(text: str) -> float:
    return datetime.datetime.fromisoformat(text).replace(
        tzinfo=datetime.timezone.utc).timestamp()


class Arrivals:
    """Each owner's ``instance.recovery.end``: when it reached us."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self._lock = threading.Lock()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        if event_type == "instance.recovery.end":
            with self._lock:
                self.at[payload["masakari_object.data"]["instance_uuid"]] = (
                    time.time())


def one_run(workdir: Path, mode: str) -> dict[str, Any]:
    """One recovery of INSTANCES in ``mode``: its seconds, and the
    owners' notification delays (``bus`` only)."""
    workdir.mkdir()
    broker, extra, arrivals, listener = None, "", None, None
    if mode == "stopped":
        broker = rabbit.OwnBroker(workdir).start()
        extra = rabbit.engine_config(broker.url, rabbit.exchange())
    elif mode == "bus":
        conf = rabbit.bus_conf(rabbit.URL, rabbit.exchange())
        extra = rabbit.engine_config(conf.transport_url,
                                     conf.control_exchange)
        arrivals = Arrivals()
        listener = rabbit.listening(conf, arrivals)
        listener.__enter__()
    try:
        with FakeNova(evacuation_latency=LATENCY) as nova:
            common.failed_host(nova, INSTANCES)
            took = _recover(workdir, nova, extra, broker)
            evacuated = {c["uuid"]: c["time"] + LATENCY
                         for c in nova.evacuate_calls}
    finally:
        if listener is not None:
            listener.__exit__(None, None, None)
        if broker is not None:
            broker.stop()
    run = {"mode": mode, "seconds": took}
    if arrivals is not None:
        run["delays"] = [arrivals.at[u] - at for u, at in evacuated.items()
                         if u in arrivals.at]
        run["missing"] = len(evacuated) - len(run["delays"])
    return run


def _recover(workdir, nova, extra, broker):
    engine = EngineProcess(workdir, nova.endpoint, threads=THREADS,
                           extra=extra + "\n" + common.BRAKES_OFF)
    try:
        engine.start()
        posted = time.time()
        uuid = engine.post_host_down(common.FAILED)
        if broker is not None:
            wait_until(lambda: _vmoves(engine, uuid, "succeeded"),
                       what="an instance recovered")
            threading.Thread(target=broker.stop, daemon=True).start()
        done = engine.wait_status(uuid, "finished", "error", "failed",
                                  timeout=300)
        if done["status"] != "finished":
            raise RuntimeError(done["message"])
        vmoves = _vmoves(engine, uuid)
        took = max(_utc(v["end_time"]) for v in vmoves) - posted
        engine.signal(signal.SIGTERM)
        engine.wait_exit(60)
    finally:
        engine.close()
    return took


def _vmoves(engine, uuid, status=None):
    _, body = engine.request("GET", f"/v1/notifications/{uuid}/vmoves"
                                    f"?limit=1000")
    found = body["vmoves"]
    return [v for v in found if v["status"] == status] if status else found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="bus-bench-") as tmp:
        for n in range(ROUNDS):
            for mode in MODES:
                run = one_run(Path(tmp) / f"{mode}-{n}", mode)
                runs[mode].append(run)
                print(f"round {n + 1}/{ROUNDS}, {mode}: "
                      f"{run['seconds']:.2f} s", flush=True)
    seconds = {m: common.median([r["seconds"] for r in runs[m]])
               for m in MODES}
    delays = [d for r in runs["bus"] for d in r["delays"]]
    data = {
        "instances": INSTANCES, "threads": THREADS, "rounds": ROUNDS,
        "runs": runs, "median_seconds": seconds,
        "bus_vs_noop": seconds["bus"] / seconds["noop"] - 1,
        "stopped_vs_noop": seconds["stopped"] / seconds["noop"] - 1,
        "owner_delay_p50": percentile(delays, 0.50),
        "owner_delay_p95": percentile(delays, 0.95),
        "owner_delay_max": max(delays),
        "owner_missing": sum(r["missing"] for r in runs["bus"])}
    common.report("bus", "The message bus (100 instances, fake Nova)", [
        ("recovery, no bus (s, median)", seconds["noop"], ""),
        ("recovery, bus on, vs no bus", data["bus_vs_noop"], "<= +0.02"),
        ("recovery, broker stopped mid-run, vs no bus",
         data["stopped_vs_noop"], "<= +0.05"),
        ("evacuated in Nova -> owner's event at the listener, p95 (s)",
         data["owner_delay_p95"], "<= 1"),
        ("owners' events not received", data["owner_missing"], "0"),
    ], data)
    return data


if __name__ == "__main__":
    main()
