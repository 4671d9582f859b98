"""The live view: one row per instance of a run, redrawn in place on a
terminal as the run's ``Recorder`` calls arrive.

``recovery host-failure`` shows it on stderr when stderr is a terminal
(``progress``); ``recovery notifications watch`` shows it on stdout
(``recovery.cmd.watch``). Anywhere else, the progress lines stay: a log
file or a pipe would get every frame, cursor moves and all.

rich is imported only where a view is drawn: a command whose progress
goes to a pipe or a file (a script's, or ``--format json``) starts
without it (some 0.05 s sooner).
"""

import contextlib
import dataclasses
import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING
from typing import TextIO

from recovery.cmd.output import ProgressPrinter
from recovery.concurrency import Clock
from recovery.concurrency import Lock
from recovery.events import News
from recovery.results import InstanceResult
from recovery.results import Phase
from recovery.results import Recorder

if TYPE_CHECKING:
    from rich.console import Console
    from rich.console import RenderableType

_COUNTS = ("pending", "in flight", "recovered", "failed", "skipped")
_STYLES = {"recovered": "green", "failed": "bold red", "skipped": "yellow",
           "in flight": "cyan"}


def _standing(result: InstanceResult) -> str:
    """Which count an instance is in: its outcome once it has one (and
    is done, or was never started), "pending" before it starts, "in
    flight" in between."""
    if result.outcome and result.phase in (Phase.PENDING, Phase.DONE):
        return result.outcome.value
    return "pending" if result.phase is Phase.PENDING else "in flight"


def _tally(rows: list[InstanceResult], untold: int) -> dict[str, int]:
    counts = dict.fromkeys(_COUNTS, 0)
    for row in rows:
        kind = _standing(row)
        counts[kind] = counts.get(kind, 0) + 1
    counts["pending"] += untold
    return counts


class Board:
    """What the view shows: the latest of each instance, the last step,
    and a title. Updated from the run's workers, read by the drawing
    thread; each side holds the lock only to copy.

    An instance is told of only once it starts (or is skipped); how many
    there are, the step that recovers them says as it starts
    (``instances``). Those not told of yet are pending until that step
    changes again."""

    def __init__(self, title: str, clock: Clock):
        self._clock = clock
        self._lock = Lock()
        self._title = title
        self._step = "starting"
        self._rows: dict[str, InstanceResult] = {}
        self._announced: int | None = None
        # The step that announced them.
        self._announcer: str | None = None
        self._told_since: set[str] = set()

    def set_title(self, title: str) -> None:
        with self._lock:
            self._title = title

    def instance_changed(self, result: InstanceResult) -> None:
        # A copy: the flow goes on changing its own object.
        copy = dataclasses.replace(result)
        with self._lock:
            self._rows[result.uuid] = copy
            self._told_since.add(result.uuid)

    def step_changed(self, step: str, state: str, message: str, *,
                     news: News | None = None,
                     instances: int | None = None) -> None:
        with self._lock:
            self._step = f"{step} {state.lower()}: {message}"
            if instances is not None or step == self._announcer:
                self._announcer = None if instances is None else step
                self._announced = instances
                self._told_since = set()

    def counts(self) -> dict[str, int]:
        _, _, rows, untold = self._snapshot()
        return _tally(rows, untold)

    def _snapshot(self) -> tuple[str, str, list[InstanceResult], int]:
        """Title, step, rows and the instances announced but not told
        yet, as of one moment."""
        with self._lock:
            untold = max((self._announced or 0) - len(self._told_since), 0)
            return (self._title, self._step, list(self._rows.values()),
                    untold)

    def render(self) -> "RenderableType":
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        title, step, rows, untold = self._snapshot()
        counts = _tally(rows, untold)
        table = Table()
        for column in ("Instance", "UUID", "State", "Destination",
                       "Elapsed", "Reason"):
            table.add_column(column, overflow="fold")
        for row in rows:
            kind = _standing(row)
            state = row.phase.value if kind == "in flight" else kind
            table.add_row(row.name or row.uuid, row.uuid[:8],
                          Text(state, style=_STYLES.get(kind, "")),
                          row.dest_host or "", self._elapsed(row, kind),
                          row.reason or "")
        tally = " | ".join(f"{name} {counts[name]}" for name in _COUNTS)
        return Group(Text(title, style="bold"), Text(f"step {step}"),
                     Text(tally), table)

    def _elapsed(self, row: InstanceResult, kind: str) -> str:
        if row.started_at is None:
            return ""
        # A retried instance keeps the end of its earlier attempt until
        # it ends again: while it runs, its clock runs.
        end = row.finished_at
        if kind == "in flight" or end is None:
            end = self._clock.now()
        return f"{(end - row.started_at).total_seconds():.1f}s"


class LiveView:
    """A ``Recorder`` that draws ``board`` on ``console``, redrawn in
    place four times a second from its first change until it is closed,
    when it draws the last frame and leaves it on the screen.

    Meanwhile, what is printed or logged on the console's stream goes
    above the view instead of through it. Nothing is drawn if no change
    comes (a run refused before its first step)."""

    def __init__(self, console: "Console", board: Board):
        from rich.live import Live

        self.board = board
        stream = console.file
        self._console = console
        self._live = Live(console=console, get_renderable=board.render,
                          refresh_per_second=4,
                          redirect_stdout=stream is sys.stdout,
                          redirect_stderr=stream is sys.stderr)
        self._lock = Lock()
        self._shown = False
        self._rerouted: list[logging.StreamHandler] = []

    def instance_changed(self, result: InstanceResult) -> None:
        self.board.instance_changed(result)
        self._show()

    def step_changed(self, step: str, state: str, message: str, *,
                     news: News | None = None,
                     instances: int | None = None) -> None:
        self.board.step_changed(step, state, message, instances=instances)
        self._show()

    def set_title(self, title: str) -> None:
        self.board.set_title(title)
        self._show()

    def _show(self) -> None:
        with self._lock:
            if self._shown:
                return
            self._shown = True
        from rich.file_proxy import FileProxy

        stream = self._console.file
        self._live.start(refresh=True)
        # The log handlers hold the stream itself, not sys.stderr.
        for handler in logging.getLogger().handlers:
            if (isinstance(handler, logging.StreamHandler)
                    and handler.stream is stream):
                handler.setStream(FileProxy(self._console, stream))
                self._rerouted.append(handler)

    def close(self) -> None:
        if not self._shown:
            return
        self._live.stop()
        for handler in self._rerouted:
            handler.setStream(self._console.file)

    def __enter__(self) -> "LiveView":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def terminal(stream: TextIO) -> "Console | None":
    """A console to draw on ``stream``, or None when it cannot redraw in
    place: not a terminal (a pipe, a file), or TERM=dumb."""
    if not stream.isatty():
        return None
    from rich.console import Console

    console = Console(file=stream, force_terminal=True)
    return None if console.is_dumb_terminal else console


@contextlib.contextmanager
def progress(title: str, clock: Clock, stream: TextIO,
             wanted: bool = True) -> Iterator[Recorder]:
    """The recorder that shows a run on ``stream``: the live view when
    ``wanted`` and ``stream`` is a terminal, else the progress lines."""
    console = terminal(stream) if wanted else None
    if console is None:
        yield ProgressPrinter(stream)
        return
    with LiveView(console, Board(title, clock)) as view:
        yield view
