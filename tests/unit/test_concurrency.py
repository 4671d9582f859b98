"""The task pools: bounded, and no worker's exception is ever lost."""

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


def test_unpatched_process_gets_threads():
    assert isinstance(concurrency.task_pool(2), concurrency.ThreadTaskPool)
