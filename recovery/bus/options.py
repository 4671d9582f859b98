"""The message bus's options, as the sample config and the docs list
them: oslo.messaging's own (its ``list_opts``), less what recovery does
not read (its RPC options, ``[oslo_messaging_notifications] topics`` and
``retry``, the Kafka driver's: see recovery/conf/masakari.py).

They are registered by oslo.messaging itself when the engine opens the
bus (``get_notification_transport``), not with recovery's: loading
oslo.messaging in every process that reads a config would bring
eventlet to the threading backend's (``messaging.load``).
"""

import importlib

from oslo_config import cfg

from recovery.bus import messaging

#: group -> the option names recovery reads; None: all of the group's.
READ: dict[str, frozenset[str] | None] = {
    "DEFAULT": frozenset({"transport_url", "control_exchange"}),
    "oslo_messaging_notifications": frozenset({"driver", "transport_url"}),
    "oslo_messaging_rabbit": None,
}


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """``(group, options)`` pairs for oslo-config-generator."""
    messaging.load()
    pairs = []
    for group, opts in importlib.import_module(
            "oslo_messaging.opts").list_opts():
        name = group or "DEFAULT"
        if name not in READ:
            continue
        wanted = READ[name]
        pairs.append((name, [opt for opt in opts
                             if wanted is None or opt.dest in wanted]))
    return pairs
