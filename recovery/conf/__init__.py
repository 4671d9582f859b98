"""Every configuration option of ``recovery``, registered in one place.

Options are read at use time from the ``ConfigOpts`` object an entry point
builds and passes down; nothing reads a global at import time.
"""

from oslo_config import cfg

from recovery.conf import api
from recovery.conf import bus
from recovery.conf import capacity
from recovery.conf import database
from recovery.conf import default
from recovery.conf import detector
from recovery.conf import engine
from recovery.conf import fencing
from recovery.conf import host_drain
from recovery.conf import host_failure
from recovery.conf import instance_failure
from recovery.conf import masakari
from recovery.conf import metrics
from recovery.conf import nova
from recovery.conf import policy
from recovery.conf import process_failure
from recovery.conf import safety

_MODULES = (default, host_failure, nova, database, api, engine, fencing,
            safety, instance_failure, process_failure, detector, metrics,
            masakari, capacity, policy, bus, host_drain)


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register every option of the project on ``conf``."""
    for module in _MODULES:
        module.register_opts(conf)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Return ``(group, options)`` pairs for oslo-config-generator."""
    return [pair for module in _MODULES for pair in module.list_opts()]
