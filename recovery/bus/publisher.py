"""Publishing off the recovery's path: a bounded queue and one task.

``publish`` never waits: it appends to the queue, or, when the queue
holds ``[notifications] queue_size`` messages already (the bus is down or
slow), drops the message and counts it (``recovery_bus_dropped_total``,
and one log line per run of drops). The task sends the queue's head
through oslo.messaging's Notifier, retrying it every ``RETRY`` seconds
while the bus is away: one log line when the bus goes, one when it is
back. The drops are also told to ``on_dropped`` (the engine records an
event) from the task, once the bus takes messages again, and at the
stop. What is queued when the process stops is sent for up to ``DRAIN``
seconds, then lost.
"""

import collections
import logging
from collections.abc import Callable

from recovery import concurrency
from recovery.bus.wire import Message
from recovery.metrics import METRICS

LOG = logging.getLogger(__name__)

# Seconds between two tries of a message while the bus is away.
RETRY = 1.0
# Seconds the process's stop waits for the queue to empty.
DRAIN = 5.0

Send = Callable[[Message], None]
# Told how many messages were dropped since it was last told.
Dropped = Callable[[int], None]


class Publisher:
    def __init__(self, send: Send, clock: concurrency.Clock, *,
                 size: int, retry: float = RETRY,
                 on_dropped: Dropped | None = None):
        self._send = send
        self._on_dropped = on_dropped
        self._told = 0
        self._clock = clock
        self._size = size
        self._retry = retry
        self._lock = concurrency.Lock()
        self._queue: collections.deque[Message] = collections.deque()
        self._ready = concurrency.Event()
        # Set while the queue is empty: what the stop waits for.
        self._empty = concurrency.Event()
        self._empty.set()
        self._stopping = concurrency.Event()
        self._down = False
        self._dropping = False
        self.dropped = 0
        self._task: concurrency.Task | None = None

    def publish(self, message: Message) -> None:
        """Queue ``message``; never blocks, never raises."""
        with self._lock:
            full = len(self._queue) >= self._size
            if full:
                self.dropped += 1
            else:
                self._queue.append(message)
                self._empty.clear()
            first_drop, self._dropping = full and not self._dropping, full
        if full:
            METRICS.bus_dropped.inc()
            if first_drop:
                LOG.warning("The notification queue is full (%d): dropping "
                            "%s and what follows until it has room",
                            self._size, message.event_type)
        else:
            self._ready.set()

    def start(self) -> "Publisher":
        self._task = concurrency.spawn(self._run)
        return self

    def stop(self, timeout: float = DRAIN) -> None:
        """Send what is queued for up to ``timeout`` seconds, then stop."""
        self._clock.wait(self._empty, timeout)
        self._stopping.set()
        self._ready.set()
        if self._task is not None:
            self._task.wait(timeout)
        self._tell_dropped()
        if self.pending():
            LOG.warning("%d notification(s) not sent to the bus at stop",
                        self.pending())

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._clock.wait(self._ready, self._retry)
            while not self._stopping.is_set():
                with self._lock:
                    head = self._queue[0] if self._queue else None
                    if head is None:
                        self._ready.clear()
                        self._empty.set()
                if head is None or not self._sent(head):
                    break
                with self._lock:
                    self._queue.popleft()
                self._tell_dropped()

    def _tell_dropped(self) -> None:
        with self._lock:
            count, self._told = self.dropped - self._told, self.dropped
        if count and self._on_dropped is not None:
            try:
                self._on_dropped(count)
            except Exception as exc:
                LOG.warning("Could not record %d dropped notification(s): "
                            "%s", count, exc)

    def _sent(self, message: Message) -> bool:
        try:
            self._send(message)
        except Exception as exc:
            if not self._down:
                self._down = True
                LOG.warning("The message bus is unavailable (%s); "
                            "notifications wait in the queue (up to %d) "
                            "and are retried every %g s", exc, self._size,
                            self._retry)
            self._clock.wait(self._stopping, self._retry)
            return False
        if self._down:
            self._down = False
            LOG.warning("The message bus is back; %d notification(s) "
                        "queued", self.pending())
        return True
