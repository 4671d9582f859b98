"""Restart priority: which instances of a failed host come back first.

An instance's priority is the integer in its metadata under
``[host_failure] priority_metadata_key`` (higher first), else
``default_priority``. Instances of one priority form a phase; with
``priority_phases`` a phase starts once the one before it has finished
(each of its instances recovered or failed), or once that one has run
for ``phase_timeout``: then the next starts with a warning, and the late
phase's instances keep running.
"""

import logging
from collections.abc import Callable
from collections.abc import Sequence

from recovery import concurrency
from recovery.flows.context import Settings
from recovery.models import Server

LOG = logging.getLogger(__name__)


def priority_of(server: Server,
                settings: Settings) -> tuple[int, str | None]:
    """``server``'s priority, and why it is the default when its metadata
    holds one that is not an integer (None otherwise)."""
    key = settings.priority_metadata_key
    value = server.metadata.get(key)
    if value is None:
        return settings.default_priority, None
    try:
        return int(str(value).strip()), None
    except ValueError:
        return settings.default_priority, (
            f"metadata {key}={value!r} is not an integer: priority "
            f"{settings.default_priority} ([host_failure] "
            f"default_priority)")


def phase_numbers(priorities: Sequence[int]) -> dict[int, int]:
    """The 1-based phase of each priority: the highest is phase 1."""
    return {priority: number for number, priority in
            enumerate(sorted(set(priorities), reverse=True), start=1)}


class Phases:
    """The gates between the phases of one pool of instance tasks.

    ``sizes[i]`` tasks belong to phase ``i + 1``. A task calls ``enter``
    before it starts (it waits there for its phase to open) and ``leave``
    when it has ended. Phase 1 is open at once; phase ``i + 1`` opens when
    phase ``i`` is open and all its tasks have left, or when it has been
    open for ``timeout`` seconds of ``clock`` (then ``on_timeout(i)`` is
    called once, with the 1-based number of the late phase).

    The pool takes the tasks in phase order, so a task that waits holds a
    slot only once every task of the earlier phases has started.
    """

    def __init__(self, sizes: Sequence[int], clock: concurrency.Clock,
                 timeout: float, on_timeout: Callable[[int], None]):
        self._left = list(sizes)
        self._clock = clock
        self._timeout = timeout
        self._on_timeout = on_timeout
        self._lock = concurrency.Lock()
        self._gates = [concurrency.Event() for _ in sizes]
        self._opened_at: list[float | None] = [None] * len(sizes)
        if sizes:
            self._open(0)

    def _open(self, index: int) -> None:
        self._opened_at[index] = self._clock.monotonic()
        self._gates[index].set()

    def _advance(self) -> float | None:
        """Open what may open, under the lock; return the seconds until
        the next timeout that would open a gate (None: nothing to wait
        for on the clock)."""
        for index in range(1, len(self._gates)):
            if self._gates[index].is_set():
                continue
            before = index - 1
            if not self._gates[before].is_set():
                return None
            if self._left[before] <= 0:
                self._open(index)
                continue
            late = (self._clock.monotonic() - self._opened_at[before]
                    - self._timeout)
            if late < 0:
                return -late
            # Open first: a recorder that fails keeps no phase shut.
            self._open(index)
            self._on_timeout(before + 1)
        return None

    def enter(self, phase: int) -> None:
        """Wait until ``phase`` (1-based) is open."""
        index = phase - 1
        while True:
            with self._lock:
                wait = self._advance()
                if self._gates[index].is_set():
                    return
            self._clock.wait(self._gates[index], wait)

    def leave(self, phase: int) -> None:
        with self._lock:
            self._left[phase - 1] -= 1
            self._advance()
