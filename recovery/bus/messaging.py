"""oslo.messaging, loaded for this process's backend, and its Notifier.

On the threading backend eventlet is never imported: oslo.messaging
reaches oslo.service, whose default backend is eventlet's, and futurist,
which imports eventlet whenever it is installed; ``concurrency`` imports
it so that both do without.

Its options are oslo.messaging's own, registered by
``get_notification_transport``: ``[DEFAULT] transport_url`` and
``control_exchange``, ``[oslo_messaging_notifications] driver``,
``topics``, ``transport_url``, and its drivers' (``[oslo_messaging_rabbit]``).
The default driver is oslo.messaging's: none, so nothing is sent.
"""

import types

from oslo_config import cfg

from recovery import concurrency
from recovery.bus.wire import TOPIC
from recovery.bus.wire import Message


def load() -> types.ModuleType:
    """``oslo_messaging``, imported for this process's backend."""
    return concurrency.import_library("oslo_messaging")


class BusSender:
    """Sends a ``Message`` as Masakari does (oslo.messaging's Notifier,
    the ``[oslo_messaging_notifications]`` driver and topics), once: the
    publisher's queue retries it."""

    def __init__(self, conf: cfg.ConfigOpts):
        messaging = load()
        transport = messaging.get_notification_transport(conf)
        # Masakari's topic, whatever [oslo_messaging_notifications]
        # topics says (its unversioned notifications' topics).
        self._notifier = messaging.Notifier(transport, retry=0,
                                            topics=[TOPIC])
        # No driver at all is oslo.messaging's default: noop too.
        self.enabled = bool(conf.oslo_messaging_notifications.driver
                            and self._notifier.is_enabled())

    def __call__(self, message: Message) -> None:
        notifier = self._notifier.prepare(publisher_id=message.publisher_id)
        getattr(notifier, message.priority)(
            _Context(message.context), message.event_type, message.payload)


class _Context(dict):
    """A message's context as oslo.messaging sends it: it drops a plain
    dict, and sends what a request context's ``redacted_copy`` gives.
    Recovery's hold no secret: sent as they are."""

    def redacted_copy(self) -> "_Context":
        return self
