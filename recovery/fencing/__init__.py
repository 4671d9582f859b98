"""Fencing: power a failed host off through its BMC, and prove it.

An instance must not run twice. Before anything of a failed host is
evacuated, its BMC is asked to cut the power and the power state is read
back until the BMC says Off; if that cannot be shown within
``[fencing] timeout``, nothing is evacuated (``FencingError``).

``load_fencing(conf)`` reads ``[fencing]`` and the credentials file once
and checks them; ``Fencing.for_host(host)`` picks the host's settings
(exact section, else first matching pattern, else ``[fencing]``) and
returns its ``HostFence``: levels of devices, tried in order until every
device of one proves the host off (one level of one device for a plain
``driver``), or None for driver ``none``.

The drivers (``redfish``, ``ipmi``, ``fence_agent`` for any installed
ClusterLabs fence agent) are imported only when a host needs them, so
sushy and pyghmi are imported by their own module only. Each driver
module is the one place where its library's (or agent's) errors become
``FencingError``. Passwords are held in ``Secret`` and never appear in a
message, a log line, a repr or a command line.

The parts: ``credentials`` (each host's settings, from ``[fencing]``
and the credentials file), ``credentials_file`` (reading that file),
``values`` (one setting, where it was written, and its checks),
``devices`` (a device's fencer built from its settings), ``levels`` (a
host's levels and devices), ``fencer`` (the power-off-and-verify loop
every driver shares), ``secret``, and one module per driver
(``agent`` with its ``ipmitool_shim``). This face names what the rest
of recovery uses.
"""

from recovery.fencing.credentials import Fencing
from recovery.fencing.credentials import load_fencing
from recovery.fencing.fencer import BmcRefused
from recovery.fencing.fencer import BmcSettings
from recovery.fencing.fencer import DeviceKind
from recovery.fencing.fencer import Fencer
from recovery.fencing.fencer import StorageFence
from recovery.fencing.fencer import Timing
from recovery.fencing.fencer import Unreachable
from recovery.fencing.fencer import call_bounded
from recovery.fencing.levels import DeviceAttempt
from recovery.fencing.levels import DeviceCheck
from recovery.fencing.levels import HostFence
from recovery.fencing.levels import Level
from recovery.fencing.levels import Proof
from recovery.fencing.secret import Secret

__all__ = ["BmcRefused", "BmcSettings", "DeviceAttempt", "DeviceCheck",
           "DeviceKind", "Fencer", "Fencing", "HostFence", "Level", "Proof",
           "Secret", "StorageFence", "Timing", "Unreachable", "call_bounded",
           "load_fencing"]
