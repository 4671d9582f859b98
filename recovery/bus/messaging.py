"""oslo.messaging, loaded for this process's backend, and its Notifier.

On the threading backend eventlet is never imported: oslo.messaging
reaches oslo.service, whose default backend is eventlet's, and futurist,
which imports eventlet whenever it is installed; ``concurrency`` imports
it so that both do without.

Its options are oslo.messaging's own, registered by
``get_notification_transport``: ``[DEFAULT] transport_url`` and
``control_exchange``, ``[oslo_messaging_notifications] driver``,
``topics``, ``transport_url``, and its drivers' (``[oslo_messaging_rabbit]``).
The default driver is oslo.messaging's: none, so nothing is sent;
``messagingv2`` and ``messaging`` are the drivers recovery sends with.
"""

import datetime
import logging
import types
import uuid

from oslo_config import cfg

from recovery import concurrency
from recovery.bus.wire import ERROR
from recovery.bus.wire import INFO
from recovery.bus.wire import TOPIC
from recovery.bus.wire import Message

LOG = logging.getLogger(__name__)


def load() -> types.ModuleType:
    """``oslo_messaging``, imported for this process's backend."""
    return concurrency.import_library("oslo_messaging")


class BusSender:
    """Sends a ``Message`` as oslo.messaging's ``messagingv2`` (or
    ``messaging``) driver does, on ``versioned_notifications.<priority>``
    of the transport's exchange, once: the publisher's queue retries it.

    Through the transport, not a Notifier: a Notifier's driver logs a
    failed send (with its traceback) and returns, so a bus that is away
    would lose every message, and log each. The rabbit driver's own
    lines about a failed send are held back (the publisher says once
    that the bus is away, and why)."""

    def __init__(self, conf: cfg.ConfigOpts):
        messaging = load()
        self._transport = messaging.get_notification_transport(conf)
        drivers = set(conf.oslo_messaging_notifications.driver)
        self._version = (2.0 if "messagingv2" in drivers
                         else 1.0 if "messaging" in drivers else None)
        self.enabled = self._version is not None
        if drivers - {"messagingv2", "messaging", "noop"}:
            LOG.warning("[oslo_messaging_notifications] driver: only "
                        "messagingv2 and messaging are used, not %s",
                        ", ".join(sorted(drivers)))
        self._targets = {priority: messaging.Target(
            topic=f"{TOPIC}.{priority}") for priority in (INFO, ERROR)}
        logging.getLogger(_RABBIT_LOG).addFilter(_QUIET)

    def __call__(self, message: Message) -> None:
        sent = {"message_id": str(uuid.uuid4()),
                "publisher_id": message.publisher_id,
                "event_type": message.event_type,
                "priority": message.priority.upper(),
                "payload": message.payload,
                "timestamp": str(datetime.datetime.now(
                    datetime.timezone.utc).replace(tzinfo=None))}
        with _QUIET:
            self._transport._send_notification(
                self._targets[message.priority], message.context, sent,
                version=self._version, retry=0)


_RABBIT_LOG = "oslo.messaging._drivers.impl_rabbit"


class _Quiet(logging.Filter):
    """Holds back the rabbit driver's records while a send is under way
    (the publisher's task is the one sender)."""

    def __init__(self) -> None:
        super().__init__()
        self._sending = False

    def __enter__(self) -> None:
        self._sending = True

    def __exit__(self, *exc_info: object) -> None:
        self._sending = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not self._sending


_QUIET = _Quiet()
