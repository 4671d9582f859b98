"""The publisher's queue: bounded, drops counted, one line when the bus
goes and one when it is back; publish never waits for the bus."""

import logging

from recovery import concurrency
from recovery.bus import wire
from recovery.bus.publisher import RETRY
from recovery.bus.publisher import Publisher
from recovery.metrics import METRICS
from tests.unit.fakes import FakeClock


def _message(n):
    return wire.Message("info", f"e.{n}", {}, "p:h")


def test_a_full_queue_drops_and_counts_without_waiting(caplog):
    before = METRICS.bus_dropped._value.get()
    publisher = Publisher(lambda m: None, concurrency.Clock(), size=2)
    for n in range(5):
        publisher.publish(_message(n))
    assert publisher.pending() == 2 and publisher.dropped == 3
    assert METRICS.bus_dropped._value.get() - before == 3
    assert caplog.text.count("queue is full") == 1


class DownBus:
    """A bus that refuses every message until it is brought back; then it
    takes them, and ``delivered`` is set once ``expected`` have gone."""

    def __init__(self, expected: int):
        self.sent: list[str] = []
        self.expected = expected
        self.down = concurrency.Event()
        self.down.set()
        self.tried = concurrency.Event()
        self.delivered = concurrency.Event()

    def send(self, message) -> None:
        if self.down.is_set():
            self.tried.set()
            raise ConnectionError("broker down")
        self.sent.append(message.event_type)
        if len(self.sent) == self.expected:
            self.delivered.set()

    def come_back(self) -> None:
        """Once the publisher has tried it, and waits: it then takes
        the queue."""
        assert self.tried.wait(5)
        self.down.clear()
        assert self.delivered.wait(5)


def test_the_bus_going_and_coming_back_is_two_lines(caplog):
    """The retries wait on the injected clock: no real time passes."""
    caplog.set_level(logging.WARNING)
    bus = DownBus(expected=3)
    clock = FakeClock()
    publisher = Publisher(bus.send, clock, size=10).start()
    for n in range(3):
        publisher.publish(_message(n))
    bus.come_back()
    publisher.stop(timeout=5)
    assert bus.sent == ["e.0", "e.1", "e.2"]
    assert caplog.text.count("bus is unavailable") == 1
    assert caplog.text.count("bus is back") == 1
    # Every wait between tries was the retry interval, on the clock.
    assert clock.sleeps and set(clock.sleeps) == {RETRY}


def test_the_drops_are_told_once_the_bus_takes_messages_again():
    told = []
    bus = DownBus(expected=1)
    publisher = Publisher(bus.send, FakeClock(), size=2,
                          on_dropped=told.append).start()
    for n in range(6):
        publisher.publish(_message(n))
    assert bus.tried.wait(5)
    assert told == []           # not while the bus is away
    bus.come_back()
    publisher.stop(timeout=5)
    assert told == [4]
