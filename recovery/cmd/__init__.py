"""Entry points.

Each ``main()`` monkey-patches the process first thing, then imports the
rest; importing this package, or an entry point's module, patches nothing
(the unit tests stay on plain threads).
"""
