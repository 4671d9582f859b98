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


class Phases:
    """The gates between the phases of one pool of instance tasks.

    ``sizes[i]`` tasks belong to phase ``i + 1``. A task calls ``enter``
    before it starts (it waits there for its phase to open) and ``leave``
    when it has ended. Phase 1 is open at once; phase ``i + 1`` opens when
    phase ``i`` is open and all its tasks have left, or when it has been
    open for ``timeout`` seconds of ``clock`` (then ``on_timeout(i)`` is
    called once, with the 1-based number of the late phase).

    ``on_timeout`` is called by the task that found the phase late, once
    the lock is released: it writes to the store, and no task waits on a
    write of another's. What it raises is raised by ``enter`` (the task
    has not started: a lost lease or a failed store stops the run there)
    and logged by ``leave``, which runs in a ``finally`` where it would
    replace the task's own outcome (a lost lease is remembered by the
    lease: the run's next write raises it again).

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

    def _advance(self) -> tuple[float | None, list[int]]:
        """Open what may open, under the lock. Return the seconds until
        the next timeout that would open a gate (None: nothing to wait
        for on the clock), and the late phases (1-based) that this call
        opened the next one for: for ``_late``, after the lock."""
        late_phases: list[int] = []
        for index in range(1, len(self._gates)):
            if self._gates[index].is_set():
                continue
            before = index - 1
            if not self._gates[before].is_set():
                break
            if self._left[before] <= 0:
                self._open(index)
                continue
            late = (self._clock.monotonic() - self._opened_at[before]
                    - self._timeout)
            if late < 0:
                return -late, late_phases
            # Opened here, told after: a recorder that fails keeps no
            # phase shut.
            self._open(index)
            late_phases.append(before + 1)
        return None, late_phases

    def _late(self, phases: list[int]) -> None:
        """Call ``on_timeout`` for each of ``phases``, outside the lock;
        raise the first failure once each has been called."""
        failure: Exception | None = None
        for phase in phases:
            try:
                self._on_timeout(phase)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def enter(self, phase: int) -> None:
        """Wait until ``phase`` (1-based) is open."""
        index = phase - 1
        while True:
            with self._lock:
                wait, late = self._advance()
                opened = self._gates[index].is_set()
            self._late(late)
            if opened:
                return
            self._clock.wait(self._gates[index], wait)

    def leave(self, phase: int) -> None:
        """``phase``'s task has ended. Never raises what ``on_timeout``
        raised: it is logged."""
        with self._lock:
            self._left[phase - 1] -= 1
            _, late = self._advance()
        try:
            self._late(late)
        except Exception as exc:
            LOG.warning("Could not record that phase %s is late: %s",
                        ", ".join(str(p) for p in late), exc)
