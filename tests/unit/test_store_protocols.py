"""Each consumer of the store depends on a small Protocol of the methods
it uses, beside it, not on ``Store`` and its 45 methods. Nothing checks a
Protocol at run time, so this does: the real ``Store`` satisfies every
one, name and parameters, and the in-memory stand-ins satisfy what they
stand in for. A method renamed, or a parameter changed, in the store
fails here, not in production.
"""

import ast
import importlib
import inspect
import pathlib
import typing

import pytest

import recovery
from recovery import confirming
from recovery import intake
from recovery import pacing
from recovery.api import app
from recovery.api import catalog
from recovery.api import hosts
from recovery.api import notifications
from recovery.db.store import Store
from recovery.engine import agreement
from recovery.engine import capacity
from recovery.engine import gates
from recovery.engine import hardware
from recovery.engine import holds
from recovery.engine import lease
from recovery.engine import reports
from recovery.engine import runner
from recovery.engine import service
from recovery.engine import simulation
from recovery.flows import ReservedHostStore
from tests.unit import test_races as races
from tests.unit import test_tolerance as tolerance

PROTOCOLS = [
    intake.HostRecords, intake.AcceptStore, intake.ByHandStore,
    notifications.NotificationStore, catalog.SegmentCatalog, app.APIStore,
    lease.Renewals, runner.RunStore, runner.ByHandRunStore,
    service.EngineStore, capacity.SegmentSource, capacity.EventLog,
    capacity.CapacityStore, simulation.SimulationStore,
    ReservedHostStore, reports.DetectorStore, gates.GateStore,
    holds.HoldStore, agreement.ViewStore, confirming.ConfirmStore,
    pacing.LagBook, hardware.HardwareStore, hosts.HostActionStore]

# What stands in for the store, and the Protocol it stands in for.
STAND_INS = [(capacity.Segments, ReservedHostStore),
             (races.ReservedStore, ReservedHostStore),
             (tolerance.Segment, ReservedHostStore)]

# Who may name ``Store``: what opens one and hands it out (the engine's
# server, the WSGI entry point, the command line's commands).
CONSUMERS = ["intake.py", "api", "flows", "engine/runner.py",
             "engine/service.py", "engine/lease.py", "engine/capacity.py",
             "engine/detector.py", "engine/fast_path.py",
             "engine/reports.py", "engine/gates.py", "engine/simulation.py",
             "engine/holds.py", "engine/agreement.py", "cmd/segments.py"]

ROOT = pathlib.Path(recovery.__file__).parent
P = inspect.Parameter


def methods(protocol: type) -> dict[str, typing.Callable]:
    """The methods ``protocol`` declares, its bases' included."""
    found = {}
    for cls in reversed(protocol.__mro__):
        if cls in (object, typing.Protocol, typing.Generic):
            continue
        found.update({name: value for name, value in vars(cls).items()
                      if inspect.isfunction(value)
                      and not name.startswith("_")})
    return found


def mismatches(wanted: typing.Callable, given: typing.Callable) -> list[str]:
    """How ``given`` cannot be called as ``wanted`` says it is: each
    parameter of ``wanted`` is in ``given``, where and as it is passed
    (a keyword-only one may be passed by position in ``given``), with a
    default when ``wanted`` has one; any other of ``given`` has one."""
    want = inspect.signature(wanted).parameters
    have = inspect.signature(given).parameters
    positional = [name for name, p in have.items()
                  if p.kind is P.POSITIONAL_OR_KEYWORD]
    found = []
    for index, (name, param) in enumerate(want.items()):
        other = have.get(name)
        if other is None:
            found.append(f"no parameter {name}")
        elif param.kind is P.POSITIONAL_OR_KEYWORD and (
                index >= len(positional) or positional[index] != name):
            found.append(f"{name} is not positional parameter {index}")
        elif param.kind is P.KEYWORD_ONLY and other.kind not in (
                P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD):
            found.append(f"{name} cannot be passed by keyword")
        elif param.default is not P.empty and other.default is P.empty:
            found.append(f"{name} has no default")
    found += [f"{name} is required" for name, p in have.items()
              if name not in want and p.default is P.empty
              and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]
    return found


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_the_store_satisfies_each_protocol(protocol):
    declared = methods(protocol)
    assert declared
    assert [name for name in declared if not hasattr(Store, name)] == []
    wrong = {name: mismatches(fn, getattr(Store, name))
             for name, fn in declared.items()}
    assert {name: why for name, why in wrong.items() if why} == {}


@pytest.mark.parametrize("stand_in, protocol", STAND_INS,
                         ids=lambda x: x.__name__)
def test_each_stand_in_is_called_as_the_store_is(stand_in, protocol):
    """A stand-in may leave out what its users never call (a plan claims
    no reserved host); what it has, it has as the Protocol says."""
    declared = methods(protocol)
    shared = [name for name in declared if hasattr(stand_in, name)]
    assert shared
    wrong = {name: mismatches(declared[name], getattr(stand_in, name))
             for name in shared}
    assert {name: why for name, why in wrong.items() if why} == {}


def test_a_changed_store_method_fails_the_check():
    """The check itself: a parameter renamed, made required or moved."""
    def wanted(self, uuid: str, *, holder: object) -> None: ...
    def renamed(self, ident: str, *, holder: object) -> None: ...
    def required(self, uuid: str, now: object, *, holder: object
                 ) -> None: ...
    def moved(self, *, uuid: str, holder: object) -> None: ...
    def widened(self, uuid: str, holder: object, now: object = None
                ) -> None: ...
    assert mismatches(wanted, renamed) == [
        "no parameter uuid", "ident is required"]
    assert mismatches(wanted, required) == ["now is required"]
    assert mismatches(wanted, moved) == ["uuid is not positional "
                                         "parameter 1"]
    assert mismatches(wanted, widened) == []


def names_store(path: pathlib.Path) -> bool:
    """Whether the module at ``path`` imports ``Store`` (the class)."""
    return any(isinstance(node, ast.ImportFrom)
               and node.module == "recovery.db.store"
               and any(alias.name == "Store" for alias in node.names)
               for node in ast.walk(ast.parse(path.read_text())))


def test_the_scan_sees_an_import_of_the_store():
    assert names_store(ROOT / "engine" / "server.py")


@pytest.mark.parametrize("where", CONSUMERS)
def test_consumers_name_a_protocol_not_the_store(where):
    path = ROOT / where
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    assert [str(f.relative_to(ROOT)) for f in files if names_store(f)] == []


def store_types() -> dict[type, list[str]]:
    """What each parameter named ``store`` in recovery/ is annotated
    with, and where: a function's or a method's, a string annotation's
    name read in its module."""
    found: dict[type, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("")
                          .parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs:
                if arg.arg == "store" and arg.annotation is not None:
                    names = vars(importlib.import_module(module))
                    kind = eval(ast.unparse(arg.annotation), names)
                    found.setdefault(kind, []).append(
                        f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_protocol_a_store_is_typed_with_is_checked():
    """A Protocol added beside a new consumer is checked above too."""
    typed = store_types()
    assert Store in typed and intake.AcceptStore in typed
    unchecked = {kind.__name__: where for kind, where in typed.items()
                 if kind not in (*PROTOCOLS, Store, typing.Any)}
    assert unchecked == {}
