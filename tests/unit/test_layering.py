"""The layers, read from the source with ast (no module is imported to
check it, so an import inside a function counts too, and so does
``importlib.import_module`` of a name written out):

- no flow imports the store (recovery.db) or the engine: data flows from
  the engine into the flows, never back;
- the engine, the command line and the API import from recovery.flows
  only the entry points that recovery/flows/__init__.py exports, never a
  flow's internals;
- the command line wires no run of its own: its leases, claims and
  events are the runner's (recovery.engine.runner), as the engine's are;
- only recovery/concurrency.py imports threading, or eventlet;
- no module of recovery/ imports itself through others: no import cycle,
  not even one hidden in a function (Python runs a deferred import, so it
  only hides the cycle) or under ``if TYPE_CHECKING:`` (the type checker
  follows it, and the module it names is one the code depends on).
"""

import ast
import collections
import pathlib
from collections.abc import Collection
from collections.abc import Mapping

import pytest

import recovery
import recovery.flows

ROOT = pathlib.Path(recovery.__file__).parent


class Import:
    """One imported name: ``module`` (absolute) and, for ``from module
    import name``, the ``name``."""

    def __init__(self, path: pathlib.Path, line: int, module: str,
                 name: str | None):
        self.path, self.line = path, line
        self.module, self.name = module, name

    def targets(self) -> set[str]:
        """What it may load: the module, or the module's attribute or
        submodule."""
        if self.name is None:
            return {self.module}
        return {self.module, f"{self.module}.{self.name}"}

    def reaches(self, package: str) -> bool:
        return any(t == package or t.startswith(package + ".")
                   for t in self.targets())

    def __repr__(self) -> str:
        what = self.module if self.name is None else (
            f"from {self.module} import {self.name}")
        return f"{self.path.relative_to(ROOT.parent)}:{self.line}: {what}"


def imports(package: str, root: pathlib.Path = ROOT) -> list[Import]:
    """Every import in every module under recovery/``package`` (or under
    another package's ``root``)."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [Import(path, node.lineno, alias.name, None)
                          for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(node, path, root)
                found += [Import(path, node.lineno, module, alias.name)
                          for alias in node.names]
            elif _imports_by_name(node):
                found.append(Import(path, node.lineno, node.args[0].value,
                                    None))
    return found


def _imports_by_name(node: ast.AST) -> bool:
    """``importlib.import_module("name")`` or ``__import__("name")``."""
    if not (isinstance(node, ast.Call) and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)):
        return False
    called = node.func
    return ((isinstance(called, ast.Attribute)
             and called.attr == "import_module")
            or (isinstance(called, ast.Name)
                and called.id in ("import_module", "__import__")))


def _absolute(node: ast.ImportFrom, path: pathlib.Path,
              root: pathlib.Path = ROOT) -> str:
    if not node.level:
        return node.module or ""
    package = path.relative_to(root.parent).with_suffix("").parts[:-1]
    base = list(package[:len(package) - node.level + 1])
    return ".".join(base + ([node.module] if node.module else []))


def test_the_scan_sees_every_kind_of_import():
    """The test itself: absolute, from, relative and in-function imports
    all count, so the checks below cannot pass by missing one."""
    found = imports("api")
    assert any(i.reaches("recovery.db") for i in found)
    assert any(i.module == "recovery.api.segments"
               and i.name == "SegmentAPI" for i in found)
    relative = ast.parse("from .census import Census\n"
                         "from . import base\n").body
    path = ROOT / "flows" / "host_failure.py"
    assert [_absolute(node, path) for node in relative] == [
        "recovery.flows.census", "recovery.flows"]
    by_name = ast.parse("importlib.import_module('eventlet.wsgi')\n"
                        "__import__('eventlet')\n"
                        "importlib.import_module(name)\n")
    assert [node.args[0].value for node in ast.walk(by_name)
            if _imports_by_name(node)] == ["eventlet.wsgi", "eventlet"]
    assert any(i.module == "eventlet.wsgi" for i in imports("."))


def test_no_flow_imports_the_store_or_the_engine():
    wrong = [i for i in imports("flows")
             if i.reaches("recovery.db") or i.reaches("recovery.engine")]
    assert wrong == []


@pytest.mark.parametrize("package", ["engine", "cmd", "api"])
def test_only_the_flows_entry_points_are_imported(package):
    exported = set(recovery.flows.__all__)
    # The exports are callables and classes, not the flows' modules.
    assert not [name for name in exported
                if (ROOT / "flows" / f"{name}.py").exists()]
    wrong = [i for i in imports(package) if i.reaches("recovery.flows")
             and not (i.module == "recovery.flows" and i.name in exported)]
    assert wrong == []


def test_the_command_line_runs_through_the_runner():
    wiring = ("recovery.engine.lease", "recovery.db.claims",
              "recovery.db.events")
    wrong = [i for i in imports("cmd") if any(i.reaches(m) for m in wiring)]
    assert wrong == []


# The rooms of doc/source/admin/design.md ("The rooms"): which rooms each
# may import. "base" is every module directly in recovery/.
ROOMS = {
    "cmd": {"wsgi", "engine", "api", "flows", "fencing", "nova", "bus",
            "policies", "db", "conf", "base"},
    "wsgi": {"api", "db", "nova", "conf", "base"},
    "engine": {"api", "flows", "fencing", "nova", "bus", "db", "conf",
               "base"},
    "api": {"policies", "bus", "db", "conf", "base"},
    "flows": {"fencing", "nova", "base"},
    "fencing": {"conf", "base"},
    "nova": {"conf", "base"},
    "bus": {"db", "base"},
    "policies": set(),
    "db": {"conf", "base"},
    "conf": {"base"},
    "base": {"nova", "bus", "db", "conf"},
}

def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "recovery" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in ROOMS else "base"


def test_each_room_imports_only_the_rooms_the_design_names():
    wrong = []
    for source, targets in import_graph().items():
        room = _room(source)
        wrong += [f"{source} -> {target}" for target in sorted(targets)
                  if _room(target) not in (room, None)
                  and _room(target) not in ROOMS[room]]
    assert wrong == []
    graph = import_graph()

    def reached(room: str, other: str) -> set[str]:
        return {t for s, ts in graph.items() if _room(s) == room
                for t in ts if _room(t) == other}

    # The base's imports of the store and the bus are the intake's (the
    # segments' data classes, and its notification.create events), and
    # the options import nothing of recovery's but its errors.
    assert reached("base", "db") == {"recovery.db.segments"}
    assert {s for s, ts in graph.items() if _room(s) == "base"
            and any(_room(t) in ("db", "bus") for t in ts)} == {
                "recovery.intake"}
    assert reached("conf", "base") <= {"recovery.exception"}


@pytest.mark.parametrize("module", ["threading", "eventlet"])
def test_only_concurrency_imports_threads(module):
    wrong = [i for i in imports(".") if i.reaches(module)
             and i.path != ROOT / "concurrency.py"]
    assert wrong == []


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    """``recovery.db.store``; a package's __init__ is the package."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """Which modules under ``root`` each one imports. An import reaches
    the module it loads: ``from pkg import name`` the submodule when
    ``name`` is one, else ``pkg`` (a package: its __init__);
    ``from pkg.mod import name`` the module ``pkg.mod``."""
    modules = {_module_name(path, root)
               for path in root.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for imported in imports(".", root):
        source = _module_name(imported.path, root)
        target = imported.module if imported.name is None else (
            f"{imported.module}.{imported.name}")
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != source:
            graph[source].add(target)
    return graph


def _shortest_cycle(graph: Mapping[str, Collection[str]],
                    start: str) -> list[str] | None:
    """The shortest path from ``start`` back to it (breadth first)."""
    came_from: dict[str, str] = {}
    queue = collections.deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return path[::-1]
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    return None


def cycles(graph: Mapping[str, Collection[str]]) -> list[list[str]]:
    """Every module's shortest cycle, each cycle once (starting at its
    least name), shortest first."""
    found = set()
    for start in graph:
        cycle = _shortest_cycle(graph, start)
        if cycle:
            first = cycle.index(min(cycle))
            found.add(tuple(cycle[first:] + cycle[:first]))
    return [list(c) for c in sorted(found, key=lambda c: (len(c), c))]


def _shown(found: list[list[str]]) -> str:
    return "\n".join(" -> ".join([*cycle, cycle[0]]) for cycle in found)


def test_the_cycle_finder_finds_each_cycle_shortest_first():
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": {"a", "d"}, "d": {"d"},
             "e": {"a"}, "f": set()}
    assert cycles(graph) == [["d"], ["a", "b"], ["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_import_graph_follows_every_kind_of_import(tmp_path):
    """A package with a cycle through a deferred import, a TYPE_CHECKING
    import and ``from pkg import submodule``, and imports that reach a
    package's __init__ or a module's attribute."""
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    sources = {
        "__init__.py": "from pkg.sub import low\n",
        "top.py": "def later():\n    from pkg import mid\n",
        "mid.py": "from typing import TYPE_CHECKING\n"
                  "if TYPE_CHECKING:\n    from .sub.low import Thing\n",
        "sub/__init__.py": "",
        "sub/low.py": "import pkg.top\nfrom pkg import sub\n"
                      "from pkg.sub import low\nimport os\n",
    }
    for name, text in sources.items():
        (root / name).write_text(text)
    graph = import_graph(root)
    assert graph == {
        "pkg": {"pkg.sub.low"}, "pkg.top": {"pkg.mid"},
        "pkg.mid": {"pkg.sub.low"}, "pkg.sub": set(),
        "pkg.sub.low": {"pkg.top", "pkg.sub"}}
    assert _shown(cycles(graph)) == (
        "pkg.mid -> pkg.sub.low -> pkg.top -> pkg.mid")


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, f"import cycles, shortest first:\n{_shown(found)}"
