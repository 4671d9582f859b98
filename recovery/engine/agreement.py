"""The engines' views of a host, for the evidence rule of a storage
fence (``recovery.flows`` names what it needs: ``EngineViews``): read
from the probe views every engine keeps in the store, and judged by the
fast path's majority (``silence.agreements``). An engine that suspects
its own network has withdrawn its views: it counts as a live engine
that does not see the host silent."""

from collections.abc import Collection
from typing import Protocol

from recovery.db.control import ProbeViews
from recovery.engine.silence import Agreement
from recovery.engine.silence import agreements
from recovery.flows import Settings
from recovery.identity import this_process


class ViewStore(Protocol):
    """The engines' probe views, as the store keeps them."""

    def probe_views(self, hosts: Collection[str], *, window: float,
                    fresh: float, live_within: float) -> ProbeViews: ...


class StoreAgreement:
    """Whether a majority of the live engines see a host silent, as the
    fast path judges it, for windows of any length."""

    def __init__(self, store: ViewStore, settings: Settings,
                 name: str | None = None):
        """``name``: this process's, which counts among the live engines
        when it is one of them (an operator's run is not)."""
        self.store, self.settings = store, settings
        self.name = name or this_process()

    def agreement(self, host: str, window: float) -> Agreement:
        views = self.store.probe_views(
            [host], window=window, fresh=self.settings.views_fresh,
            live_within=self.settings.engine_lease)
        # agreements() counts the engine it is told of as live: this
        # process if the registry knows it, else one the registry knows
        # (a command line is not an engine).
        me = self.name
        if me not in views.live and views.live:
            me = min(views.live)
        return agreements(views, me)[host]
