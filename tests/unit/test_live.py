"""The live view: its rows and counts from a run's recorder calls, with a
clock that never sleeps, drawn on an in-memory console."""

import dataclasses
import io
import logging
import os

import pytest
from rich.console import Console

from recovery import concurrency
from recovery.cmd import live
from recovery.cmd.output import ProgressPrinter
from recovery.flows import host_failure as hf
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from recovery.results import StepName
from recovery.results import StepState
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import SyncPool
from tests.unit.fakes import make_env

HOST = "compute-1"


def drawn(board: live.Board, width: int = 120) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width).print(board.render())
    return [line.rstrip() for line in out.getvalue().splitlines()]


def row(lines: list[str], name: str) -> list[str]:
    """The cells of ``name``'s row in a drawn table."""
    [found] = [line for line in lines if line.startswith(f"│ {name} ")]
    return [cell.strip() for cell in found.strip("│").split("│")]


def instance(name: str, clock: FakeClock, **fields) -> InstanceResult:
    return InstanceResult(uuid=f"{name}-0000-uuid", name=name,
                          source_host=HOST, original_state="active",
                          **fields)


def test_rows_and_counts_follow_the_recorder_calls():
    clock = FakeClock()
    board = live.Board(f"host-failure {HOST}", clock)
    board.step_changed("verify-host-down", StepState.RUNNING, "started")
    assert "step verify-host-down running: started" in drawn(board)
    board.step_changed(StepName.RECOVER_INSTANCES, StepState.RUNNING,
                       f"3 instance(s) on {HOST}; auto", instances=3)
    board.instance_changed(instance(
        "paused", clock, outcome=Outcome.SKIPPED,
        reason="vm_state 'paused' cannot be evacuated by Nova"))
    moving = instance("vm-a", clock, started_at=clock.now(),
                      phase=Phase.LOCKING)
    board.instance_changed(moving)
    moving.phase = Phase.EVACUATING
    board.instance_changed(moving)
    # The view shows what it was told; the flow's own object moves on.
    moving.phase = Phase.CONFIRMING
    clock.t += 2.5
    lines = drawn(board)
    assert lines[0] == f"host-failure {HOST}"
    assert lines[2] == ("pending 1 | in flight 1 | recovered 0 | failed 0 "
                        "| skipped 1")
    assert row(lines, "vm-a") == ["vm-a", "vm-a-000", "evacuating", "",
                                  "2.5s", ""]
    assert row(lines, "paused") == [
        "paused", "paused-0", "skipped", "", "",
        "vm_state 'paused' cannot be evacuated by Nova"]

    # Recovered while unlocking: still in flight until it is done.
    moving.outcome, moving.dest_host = Outcome.RECOVERED, "compute-2"
    moving.phase = Phase.UNLOCKING
    board.instance_changed(moving)
    assert row(drawn(board), "vm-a")[2] == "unlocking"
    moving.phase, moving.finished_at = Phase.DONE, clock.now()
    board.instance_changed(moving)
    doomed = instance("doomed", clock, started_at=clock.now(),
                      phase=Phase.DONE, outcome=Outcome.FAILED,
                      reason="evacuation failed")
    clock.t += 1
    doomed.finished_at = clock.now()
    board.instance_changed(doomed)
    board.step_changed(StepName.RECOVER_INSTANCES, StepState.FAILURE,
                       "1 recovered, 1 failed, 1 skipped")
    clock.t += 60    # a finished row's time no longer runs
    lines = drawn(board)
    assert lines[1] == ("step recover-instances failure: 1 recovered, "
                        "1 failed, 1 skipped")
    assert lines[2] == ("pending 0 | in flight 0 | recovered 1 | failed 1 "
                        "| skipped 1")
    assert row(lines, "vm-a") == ["vm-a", "vm-a-000", "recovered",
                                  "compute-2", "2.5s", ""]
    assert row(lines, "doomed")[2:] == ["failed", "", "1.0s",
                                        "evacuation failed"]
    # One row per instance, in the order they were first told.
    names = [line.split("│")[1].strip() for line in lines
             if line.startswith("│ ")]
    assert names == ["paused", "vm-a", "doomed"]


def test_a_retried_instance_s_time_runs_again():
    clock = FakeClock()
    board = live.Board("run", clock)
    retried = instance("vm-a", clock, started_at=clock.now(),
                       phase=Phase.LOCKING)
    clock.t += 3
    retried.finished_at = clock.now()   # its earlier attempt's end
    board.instance_changed(retried)
    clock.t += 4
    assert row(drawn(board), "vm-a")[4] == "7.0s"


def test_the_host_failure_flow_announces_what_the_view_counts():
    """The view learns how many instances wait from the flow, as data
    with its recover-instances step: it counts them down as they
    start."""
    nova = MemoryNova()
    nova.add_service(HOST, state="down")
    for n in range(3):
        nova.add_server(str(n))    # named vm-0, vm-1, vm-2
    clock = FakeClock()
    board = live.Board("run", clock)
    seen = []

    class Watching:
        def step_changed(self, step, state, message, **told):
            board.step_changed(step, state, message, **told)

        def instance_changed(self, result):
            board.instance_changed(result)
            seen.append((result.name, result.phase.value,
                         board.counts()["pending"]))

    hf.recover_host(make_env(nova, clock, recorder=Watching()), HOST,
                    pool_factory=SyncPool)
    firsts = [(name, pending) for name, phase, pending in seen
              if phase == "locking"]
    assert firsts == [("vm-0", 2), ("vm-1", 1), ("vm-2", 0)]
    assert board.counts() == {"pending": 0, "in flight": 0, "recovered": 3,
                              "failed": 0, "skipped": 0}


def test_workers_and_the_drawing_thread_share_the_board():
    """Eight workers tell their changes while each draws the view: no
    change is lost and no drawing sees a half-made row list."""
    clock = FakeClock()
    board = live.Board("run", clock)
    results = [instance(f"vm-{n}", clock, started_at=clock.now())
               for n in range(16)]

    def recover(result):
        for phase in (Phase.LOCKING, Phase.EVACUATING, Phase.CONFIRMING,
                      Phase.UNLOCKING):
            result.phase = phase
            board.instance_changed(result)
            drawn(board)
        result.phase, result.outcome = Phase.DONE, Outcome.RECOVERED
        board.instance_changed(result)

    outcomes = concurrency.task_pool(8).run(recover, results)
    assert [o.error for o in outcomes] == [None] * 16
    assert board.counts()["recovered"] == 16


def terminal_console(out: io.StringIO) -> Console:
    return Console(file=out, width=100, force_terminal=True,
                   force_interactive=True)


def test_the_view_leaves_its_last_frame_and_logs_go_above_it():
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with live.LiveView(terminal_console(out),
                           live.Board("run", FakeClock())) as view:
            view.step_changed("list-instances", StepState.SUCCESS, "done")
            assert handler.stream is not out
            logging.getLogger("recovery.test").warning("a log line")
            result = instance("vm-a", FakeClock(), phase=Phase.DONE,
                              outcome=Outcome.RECOVERED,
                              dest_host="compute-2")
            view.instance_changed(result)
        assert handler.stream is out
    finally:
        root.removeHandler(handler)
    written = out.getvalue()
    assert "\x1b[" in written     # drawn in place, with cursor moves
    last_frame = written[written.rindex("step list-instances"):]
    assert "vm-a" in last_frame and "compute-2" in last_frame
    assert "a log line" in written[:written.rindex("step list-instances")]


def test_nothing_is_drawn_without_a_change():
    """A run refused before its first step leaves no empty table."""
    out = io.StringIO()
    with live.LiveView(terminal_console(out), live.Board("run",
                                                         FakeClock())):
        pass
    assert out.getvalue() == ""


def test_only_a_terminal_that_redraws_gets_the_view(monkeypatch):
    assert live.terminal(io.StringIO()) is None
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        try:
            monkeypatch.setenv("TERM", "xterm")
            assert live.terminal(tty) is not None
            monkeypatch.setenv("TERM", "dumb")
            assert live.terminal(tty) is None
        finally:
            os.close(master)


@pytest.mark.parametrize("wanted", [True, False])
def test_progress_off_a_terminal_keeps_the_lines(wanted):
    out = io.StringIO()
    with live.progress("run", FakeClock(), out, wanted=wanted) as shown:
        assert isinstance(shown, ProgressPrinter)
        shown.instance_changed(dataclasses.replace(
            instance("vm-a", FakeClock()), phase=Phase.DONE,
            outcome=Outcome.RECOVERED, dest_host="compute-2"))
    assert out.getvalue() == "vm-a (vm-a-000) recovered -> compute-2\n"


def test_progress_on_a_terminal_unless_unwanted(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        try:
            with live.progress("run", FakeClock(), tty) as shown:
                assert isinstance(shown, live.LiveView)
            with live.progress("run", FakeClock(), tty,
                               wanted=False) as shown:
                assert isinstance(shown, ProgressPrinter)
        finally:
            os.close(master)
