"""Versioned notifications on the message bus, as Masakari publishes
them, and the owner's notification of each instance recovered.

One publisher per process, started by the engine's service
(``start``); until then, and with ``[oslo_messaging_notifications]
driver`` unset (``noop``), ``publish`` does nothing. ``publish`` never
blocks the caller: see ``publisher``.
"""

import logging

from oslo_config import cfg

from recovery import concurrency
from recovery.bus.messaging import BusSender
from recovery.bus.publisher import Dropped
from recovery.bus.publisher import Publisher
from recovery.bus.wire import Message

LOG = logging.getLogger(__name__)

_PUBLISHER: Publisher | None = None


def start(conf: cfg.ConfigOpts, clock: concurrency.Clock,
          on_dropped: Dropped | None = None) -> bool:
    """Start this process's publisher if a driver is configured; True if
    it publishes. ``on_dropped``: told of the messages dropped."""
    global _PUBLISHER
    sender = BusSender(conf)
    if not sender.enabled:
        return False
    _PUBLISHER = Publisher(sender, clock, on_dropped=on_dropped,
                           size=conf.notifications.queue_size).start()
    LOG.info("Publishing notifications on the message bus (%s)",
             ", ".join(conf.oslo_messaging_notifications.driver))
    return True


def stop() -> None:
    """Send what is queued (a few seconds at most), then stop."""
    global _PUBLISHER
    publisher, _PUBLISHER = _PUBLISHER, None
    if publisher is not None:
        publisher.stop()


def publish(message: Message) -> None:
    """Queue ``message`` for the bus, if this process publishes."""
    publisher = _PUBLISHER
    if publisher is not None:
        publisher.publish(message)
