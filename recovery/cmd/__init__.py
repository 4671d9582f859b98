"""Entry points.

Importing this package makes the process green, before anything imports
socket or threading; nothing outside ``recovery.cmd`` monkey-patches.
"""

from recovery import concurrency

concurrency.monkey_patch()
