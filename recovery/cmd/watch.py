"""``recovery notifications watch UUID``: follow a run of recovery-engine
(or of another ``recovery host-failure``) as it happens.

The run's process writes its journal and step events to the store; this
reads them back twice a second and shows each change: the live view on
a terminal, one line per change anywhere else. It ends when the
notification does: ``finished``, ``failed`` or ``ignored``. ``error`` is
not an end, since recovery-engine retries it.
"""

import argparse
import datetime
import functools
from collections.abc import Callable
from typing import TextIO

from recovery.cmd import live
from recovery.cmd.output import ProgressPrinter
from recovery.concurrency import Clock
from recovery.db.store import Store
from recovery.notification import Notification
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Recorder
from recovery.waiting import wait_for

POLL_INTERVAL = 0.5
ENDED = frozenset({Status.FINISHED, Status.FAILED, Status.IGNORED})
# Statuses written when an attempt ends, after its last change.
_ATTEMPT_ENDED = ENDED | {Status.ERROR}


def status_line(item: Notification) -> str:
    line = (f"notification {item.uuid} ({item.type} {item.event} "
            f"{item.hostname}): {item.status.value}, attempt "
            f"{item.attempts}")
    if item.message:
        line += f": {item.message}"
    if item.status is Status.ERROR:
        line += " (recovery-engine retries it)"
    return line


class Follower:
    """Tells ``recorder`` what changed in the run of notification ``uuid``
    since the last ``poll``, in the order it happened, and ``say`` each
    change of the notification's status."""

    def __init__(self, store: Store, uuid: str, recorder: Recorder,
                 say: Callable[[str], None]):
        self._store = store
        self._uuid = uuid
        self._recorder = recorder
        self._say = say
        self._steps_told = 0
        self._instances: dict[str, InstanceResult] = {}
        self._status = ""

    def poll(self) -> Notification | None:
        """One look at the store; the notification once it has ended."""
        # The notification first: once it has ended, its journal was
        # complete before this read, so the reads below see all of it.
        item = self._store.get(self._uuid)
        status = status_line(item)
        changed = status != self._status
        self._status = status
        if changed and item.status not in _ATTEMPT_ENDED:
            self._say(status)
        for _, tell in sorted(self._changes(), key=lambda c: c[0]):
            tell()
        if changed and item.status in _ATTEMPT_ENDED:
            self._say(status)
        return item if item.status in ENDED else None

    def _changes(self) -> list[tuple[datetime.datetime,
                                     Callable[[], None]]]:
        """(when, tell) for each step event and journal write not told
        yet; only an instance's latest write is seen."""
        steps = self._store.step_events(self._uuid)
        changes = [(event.created_at, functools.partial(
            self._recorder.step_changed, event.step, event.state,
            event.message, instances=event.instances))
            for event in steps[self._steps_told:]]
        self._steps_told = len(steps)
        for entry in self._store.journal_entries(self._uuid):
            if self._instances.get(entry.result.uuid) != entry.result:
                self._instances[entry.result.uuid] = entry.result
                changes.append((entry.updated_at, functools.partial(
                    self._recorder.instance_changed, entry.result)))
        return changes


def follow(store: Store, uuid: str, clock: Clock, timeout: float,
           stream: TextIO) -> Notification:
    """Show the run of notification ``uuid`` on ``stream`` until it ends;
    return it then. Raises ``WaitTimeout`` after ``timeout`` seconds,
    and ``NotFound`` for an unknown ``uuid`` (before showing anything)."""
    console = live.terminal(stream)
    if console is None:
        say = functools.partial(print, file=stream, flush=True)
        return _until_ended(Follower(store, uuid, ProgressPrinter(stream),
                                     say), uuid, clock, timeout)
    board = live.Board(f"notification {uuid}", clock)
    with live.LiveView(console, board) as view:
        return _until_ended(Follower(store, uuid, view, view.set_title),
                            uuid, clock, timeout)


def _until_ended(follower: Follower, uuid: str, clock: Clock,
                 timeout: float) -> Notification:
    return wait_for(follower.poll, what=f"notification {uuid} to end",
                    timeout=timeout, interval=POLL_INTERVAL, clock=clock)


def add_parser(actions: argparse._SubParsersAction) -> None:
    """``notifications watch``, among the ``notifications`` actions."""
    parser = actions.add_parser(
        "watch", help="Follow a run live until it ends.",
        description="Show each change of the run as it happens (a table "
                    "redrawn in place on a terminal, one line per change "
                    "otherwise) until the notification is finished, "
                    "failed or ignored; 'error' is not an end, since "
                    "recovery-engine retries it. Exit code: 0 finished "
                    "or ignored with no failed instance, 1 failed or an "
                    "instance failed, 2 unknown notification, 4 not "
                    "ended within --timeout.")
    parser.add_argument("uuid")
    parser.add_argument("--timeout", type=_seconds, default=3600.0,
                        help="Give up after this many seconds "
                             "(default: 3600); the run goes on.")


def _seconds(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: not a positive number "
                                         f"of seconds")
    return value
