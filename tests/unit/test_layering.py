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
- only recovery/concurrency.py imports threading, or eventlet.
"""

import ast
import pathlib

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


def imports(package: str) -> list[Import]:
    """Every import in every module under recovery/``package``."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [Import(path, node.lineno, alias.name, None)
                          for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(node, path)
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


def _absolute(node: ast.ImportFrom, path: pathlib.Path) -> str:
    if not node.level:
        return node.module or ""
    package = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
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


@pytest.mark.parametrize("module", ["threading", "eventlet"])
def test_only_concurrency_imports_threads(module):
    wrong = [i for i in imports(".") if i.reaches(module)
             and i.path != ROOT / "concurrency.py"]
    assert wrong == []
