"""The engines' views of a host as the evidence rule reads them: the
fast path's majority, over the probe views the engines keep in the
store, for any window."""

from recovery.db.control import ProbeViews
from recovery.engine.agreement import StoreAgreement
from tests.unit.fakes import settings


class Views:
    """The store's views: ``silent`` engines see compute-1 silent."""

    def __init__(self, live, silent):
        self.views = ProbeViews(frozenset(live),
                                {"compute-1": frozenset(silent)})
        self.asked = []

    def probe_views(self, hosts, *, window, fresh, live_within):
        self.asked.append((list(hosts), window, fresh, live_within))
        return self.views


def test_a_majority_of_the_live_engines_for_the_window_asked():
    store = Views({"e1", "e2", "e3"}, {"e1", "e2"})
    run = settings(views_fresh=3.0, engine_lease=30.0)
    agreement = StoreAgreement(store, run, name="e3").agreement(
        "compute-1", 30.0)
    assert agreement.reached
    assert agreement.describe() == ("2 of 3 live engine(s) see it silent "
                                    "(e1, e2), 2 needed")
    assert store.asked == [(["compute-1"], 30.0, 3.0, 30.0)]


def test_an_operator_s_run_is_not_counted_as_an_engine():
    """The command line's process is not in the registry: the majority
    is the engines'. An engine that withdrew its views still counts."""
    store = Views({"e1", "e2", "e3"}, {"e1", "e2"})
    agreement = StoreAgreement(store, settings(), name="cli:42").agreement(
        "compute-1", 3.0)
    assert agreement.reached and len(agreement.live) == 3
    withdrawn = Views({"e1", "e2", "e3"}, {"e1"})
    assert not StoreAgreement(withdrawn, settings(), name="cli:42").agreement(
        "compute-1", 3.0).reached


def test_no_live_engine_is_no_agreement():
    agreement = StoreAgreement(Views(set(), set()), settings(),
                               name="cli:42").agreement("compute-1", 3.0)
    assert not agreement.reached
    assert agreement.describe() == ("0 of 1 live engine(s) see it silent, "
                                    "1 needed")
