"""The fast path's prober on real sockets: every host at once, on one
selector. A port that accepts or refuses is an answer; a host whose
connections go unanswered (here: a listener whose queue is full, so the
kernel drops the SYNs) is silent."""

import socket
import subprocess
import sys
from pathlib import Path

from oslo_config import cfg

from recovery import concurrency
from recovery import conf as recovery_conf
from recovery.probe import Prober
from recovery.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def prober_for(host, port, resolve=None, addresses="127.0.0.1"):
    """A prober of ``host`` on ``port``, every 0.2 s."""
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    conf.set_override("probe_interval", 0.2, "detector")
    conf.set_override("probe_timeout", 0.5, "detector")
    conf.set_override("liveness_probe", [port], "detector")
    if resolve is None:
        conf.set_override("probe_addresses", {host: addresses},
                          "detector")
    prober = Prober(conf, concurrency.Clock(), resolve=resolve)
    prober.watch([host])
    return prober


def test_answers_refusals_and_silence(silent_port):
    accepting = socket.create_server(("127.0.0.1", 0))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused_port = closed.getsockname()[1]
    ports = {"up": accepting.getsockname()[1], "refusing": refused_port,
             "dead": silent_port}
    probers = {host: prober_for(host, port) for host, port in ports.items()}
    stopping = concurrency.Event()
    tasks = [concurrency.spawn(p.run, stopping) for p in probers.values()]
    try:
        wait_for(lambda: probers["dead"].view("dead").silent_for
                 and probers["dead"].view("dead").silent_for > 1.0,
                 what="the dead host to be silent for 1 s", timeout=10,
                 interval=0.1, clock=concurrency.Clock())
        up, refusing = probers["up"].view("up"), probers["refusing"].view(
            "refusing")
        assert up.silent_for is None and "accepted" in up.answer
        assert refusing.silent_for is None and "refused" in refusing.answer
        assert probers["dead"].view("dead").answer is None
    finally:
        stopping.set()
        for task in tasks:
            assert task.wait(5)
        accepting.close()


def test_a_host_silent_on_one_network_but_not_the_other_answers(
        silent_port):
    """Its first address (the listener's) is silent; on its second, the
    same port is closed: that refusal is an answer."""
    prober = prober_for("split", silent_port,
                        addresses="127.0.0.1+127.0.0.2")
    lone = prober_for("lone", silent_port)
    stopping = concurrency.Event()
    tasks = [concurrency.spawn(p.run, stopping) for p in (prober, lone)]
    try:
        wait_for(lambda: (lone.view("lone").silent_for or 0) > 1.0,
                 what="the one-address host to be silent for 1 s",
                 timeout=10, interval=0.1, clock=concurrency.Clock())
        view = prober.view("split")
        assert view.silent_for is None
        assert view.answer == (f"split (127.0.0.2) answers on TCP port "
                               f"{silent_port}: the connection was refused, "
                               f"so its network stack runs")
    finally:
        stopping.set()
        for task in tasks:
            assert task.wait(5)


def test_a_name_that_does_not_resolve_is_never_silence():
    def resolve(host):
        raise socket.gaierror(-2, "Name or service not known")

    prober = prober_for("nowhere", 22, resolve=resolve)
    stopping = concurrency.Event()
    task = concurrency.spawn(prober.run, stopping)
    try:
        wait_for(lambda: prober.view("nowhere").unprobed,
                 what="the probe to give up on the name", timeout=5,
                 interval=0.05, clock=concurrency.Clock())
        view = prober.view("nowhere")
        assert view.silent_for is None
        assert "probe_addresses" in view.unprobed
    finally:
        stopping.set()
        assert task.wait(5)


GREEN_ROUND = """
from recovery import concurrency
concurrency.monkey_patch()
import socket, sys
from recovery.probe import connect_all
with socket.socket() as closed:
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
targets = {f"compute-{n}": ("127.0.0.1",) for n in range(500)}
answers = concurrency.offload(connect_all, targets, (port,), 2.0,
                              concurrency.Clock().monotonic)
print(sum(1 for answer in answers.values() if answer))
"""


def test_a_green_process_probes_every_host_in_one_round():
    """Under eventlet, green select wakes for one socket per call: the
    round runs on a native thread, where one poll takes every answer."""
    done = subprocess.run([sys.executable, "-c", GREEN_ROUND],
                          capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "500"
