"""The task pools (bounded, and no worker's exception is ever lost), the
lock (exclusive; green in a monkey-patched process), and concurrency kept
in this one module."""

import ast
import pathlib
import subprocess
import sys
import threading

import eventlet
import pytest

from recovery import concurrency


def _tracking(pool_size, yield_fn):
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def task(item):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        yield_fn()
        with lock:
            state["now"] -= 1
        if item == 3:
            raise ValueError("task 3 failed")
        return item * 10

    return task, state


@pytest.mark.parametrize("pool_class,yield_fn", [
    (concurrency.ThreadTaskPool, lambda: threading.Event().wait(0.01)),
    (concurrency.GreenTaskPool, lambda: eventlet.sleep(0)),
])
def test_pool_is_bounded_and_captures_errors(pool_class, yield_fn):
    task, state = _tracking(3, yield_fn)
    outcomes = pool_class(3).run(task, range(12))
    assert state["max"] <= 3
    assert state["max"] >= 2          # it did run tasks side by side
    assert [o.value for o in outcomes if o.error is None] == [
        n * 10 for n in range(12) if n != 3]
    failed = [o for o in outcomes if o.error is not None]
    assert [o.item for o in failed] == [3]
    assert str(failed[0].error) == "task 3 failed"


@pytest.mark.parametrize("pool_class,yield_fn", [
    (concurrency.ThreadTaskPool, lambda: threading.Event().wait(0.01)),
    (concurrency.GreenTaskPool, lambda: eventlet.sleep(0)),
])
def test_a_failed_task_prints_no_traceback(pool_class, yield_fn, capfd):
    """Its outcome carries the error; nothing reaches stderr (eventlet's
    hub prints what leaves a green thread)."""
    task, _ = _tracking(3, yield_fn)
    outcomes = pool_class(3).run(task, range(5))
    assert [o.item for o in outcomes if o.error is not None] == [3]
    assert capfd.readouterr().err == ""


def test_unpatched_process_gets_threads():
    assert isinstance(concurrency.task_pool(2), concurrency.ThreadTaskPool)

ROOT = pathlib.Path(__file__).parents[2]
# What only recovery/concurrency.py may import: the rest asks it.
THREADS = {"threading", "_thread", "concurrent", "eventlet", "greenlet"}


def lock_order() -> list[str]:
    """A task asks for the lock while this thread holds it; what happened,
    in order. The task must wait until the lock is released."""
    lock = concurrency.Lock()
    taken = concurrency.Event()
    order = []

    def take():
        with lock:
            order.append("taken")
            taken.set()

    with lock:
        task = concurrency.spawn(take)
        # A real wait: the task gets every chance to get in while held.
        order.append(f"held, taken: {taken.wait(0.05)}")
    assert task.wait(5)
    return order


def test_lock_is_exclusive_between_threads():
    assert lock_order() == ["held, taken: False", "taken"]


def test_lock_is_green_when_patched():
    """In a monkey-patched process, waiting for the lock lets the holder's
    green thread run on; a real lock would block the whole process, and
    the holder would never release it."""
    script = ("from recovery import concurrency\n"
              "concurrency.monkey_patch()\n"
              "from tests.unit.test_concurrency import lock_order\n"
              "print(lock_order())\n")
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True,
        timeout=10, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['held, taken: False', 'taken']\n"


def imported(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return {name.split(".")[0] for name in names}


def test_only_concurrency_imports_threads_or_eventlet():
    allowed = ROOT / "recovery" / "concurrency.py"
    offenders = {str(path.relative_to(ROOT)): sorted(imported(path) & THREADS)
                 for path in (ROOT / "recovery").rglob("*.py")
                 if path != allowed}
    assert {path: names for path, names in offenders.items() if names} == {}
