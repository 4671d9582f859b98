"""Recovery flows: orchestration only. Nova calls go through recovery.nova;
time and concurrency through recovery.concurrency.

What the engine and the CLI use of the flows is exported here, and only
this: the flows' entry points, what a flow runs with (``Env``,
``Settings``, the engine's ``EvacuationWatcher``) and the recovery
methods of a host (``placement_for_host``).
No flow imports the store: what a flow needs from it is passed in, as
data (a journal, a restart history) or as a small protocol (the claims of
reserved hosts).
"""

from recovery.flows.context import Env
from recovery.flows.context import Settings
from recovery.flows.drain import drain_host
from recovery.flows.home import bring_back
from recovery.flows.host_failure import recover_host
from recovery.flows.host_return import return_host
from recovery.flows.instance_failure import restart_instance
from recovery.flows.placement import ReservedHostStore
from recovery.flows.placement import for_host as placement_for_host
from recovery.flows.plan import Plan
from recovery.flows.process_failure import handle_process_event
from recovery.flows.tolerance import Cloud
from recovery.flows.tolerance import Group
from recovery.flows.tolerance import Tolerance
from recovery.flows.tolerance import failures_tolerated
from recovery.flows.tolerance import if_each_failed
from recovery.flows.tolerance import simulate
from recovery.flows.watcher import EvacuationWatcher

__all__ = ["Cloud", "Env", "EvacuationWatcher", "Group", "Plan",
           "ReservedHostStore", "Settings", "Tolerance", "bring_back",
           "drain_host",
           "failures_tolerated", "handle_process_event", "if_each_failed",
           "placement_for_host", "recover_host", "restart_instance",
           "return_host", "simulate"]
