"""The documentation says what the code does (doc/source, api-ref/source).

The option and command-line references are generated from the code at
build time (``tox -e docs``); these tests hold the rest to the code
without building anything: each fails when a command, a metric, an API
field or an option exists in the code but not in the docs, or the other
way round, when a sample the docs show is not what the code prints, and
when a link between the pages (or from the README) leads nowhere.
"""

import ast
import datetime
import importlib.util
import io
import re
import sys
import types
from pathlib import Path

import pytest

from recovery import metrics as recovery_metrics
from recovery.cmd import commands
from recovery.cmd import live
from recovery.concurrency import Clock
from recovery.flows import selection
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase

ROOT = Path(__file__).parents[2]
DOC = ROOT / "doc" / "source"
API_REF = ROOT / "api-ref" / "source"
sys.path.insert(0, str(ROOT / "doc" / "ext"))
import cliparsers  # noqa: E402


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def fenced_blocks(text: str, language: str = "") -> list[str]:
    """The Markdown code blocks of ``language`` (any without it)."""
    return re.findall(rf"^```{language}[^\n]*\n(.*?)^```$", text,
                      re.M | re.S)


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    """The cells of the Markdown table rows whose first cell starts with
    ``first_cell``."""
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines()
            if line.startswith(f"| {first_cell}")]


# -- commands ---------------------------------------------------------------
def test_the_cli_page_lists_every_command_and_no_other():
    """Each command ``recovery`` takes (at every level) is a row of the
    command-line page's table, and each row a command it takes."""
    parsed = cliparsers.command_paths(commands.build_parser(), "recovery")
    page = read(DOC / "cli" / "index.md")
    listed = [row[0].strip("`") for row in table_rows(page, "`recovery ")]
    assert sorted(set(parsed) - set(listed)) == [], "not on the CLI page"
    assert sorted(set(listed) - set(parsed)) == [], "no such command"
    assert len(listed) == len(set(listed))


def test_the_cli_reference_is_generated_from_both_parsers():
    recovery_page = read(DOC / "cli" / "recovery.rst")
    engine_page = read(DOC / "cli" / "recovery-engine.rst")
    assert (".. cli-reference:: recovery.cmd.commands:build_parser"
            in recovery_page)
    assert ".. cli-reference:: cliparsers:engine_parser" in engine_page
    conf = read(DOC / "conf.py")
    assert '("cli/recovery", "recovery",' in conf
    assert '("cli/recovery-engine", "recovery-engine",' in conf
    engine = cliparsers.engine_parser()
    assert engine.prog == "recovery-engine"
    assert "--config-file" in engine.format_usage()


def test_recovery_s_exit_codes_are_the_ones_it_returns():
    """``recovery --help`` (and so the reference and the man page) lists
    each exit code the command returns, once, in order."""
    listed = [int(code) for code in
              re.findall(r"^  (\d+)  ", commands.EXIT_CODES, re.M)]
    assert listed == [commands.EXIT_OK, commands.EXIT_FAILED,
                      commands.EXIT_USAGE, commands.EXIT_REFUSED,
                      commands.EXIT_TIMEOUT]
    assert commands.build_parser().epilog == commands.EXIT_CODES


def test_recovery_engine_s_exit_codes_are_the_ones_it_returns():
    from recovery.cmd import engine
    from recovery.engine import server

    said = engine.__doc__[engine.__doc__.index("Exit codes"):]
    listed = {int(code) for code in re.findall(r"(?<![\w\[])(\d+) ", said)}
    returned = {value for name, value in vars(server).items()
                if name.startswith("EXIT_")}
    # 130: Ctrl-C while starting, the shell's convention (128 + SIGINT).
    assert listed == returned | {130}


# -- metrics ----------------------------------------------------------------
class _Store:
    """What the store's collector reads, one of each."""

    def count_notifications(self):
        return {("COMPUTE_HOST", "new"): 1}

    def engines(self):
        class Engine:
            name, runs, silent_for = "engine-1:1", [], 0.0
        return [Engine()]

    def arming(self):
        class Arming:
            armed = True
        return Arming()


def metrics_in_code() -> dict[str, tuple[str, set[str]]]:
    """Every metric the process exports: its name as scraped (a counter's
    with ``_total``), its type and its labels."""
    found = {}
    metrics = recovery_metrics.Metrics()
    for metric in vars(metrics).values():
        if isinstance(metric, recovery_metrics.prometheus_client.metrics
                      .MetricWrapperBase):
            name = metric._name + ("_total" if metric._type == "counter"
                                   else "")
            found[name] = (metric._type, set(metric._labelnames))
    for family in recovery_metrics._StoreCollector(_Store()).collect():
        labels = set(family.samples[0].labels)
        found[family.name] = (family.type, labels)
    return found


def metrics_in_docs() -> dict[str, tuple[str, set[str]]]:
    """The observing page's table: name, type and labels (the backticked
    words of the labels cell, outside the parentheses of their values)."""
    page = read(DOC / "admin" / "observing.md")
    return {name.strip("`"): (type_, set(re.findall(
                r"`(\w+)`", re.sub(r"\([^)]*\)", "", labels))))
            for name, type_, labels, _ in table_rows(page, "`recovery_")}


def test_every_metric_is_in_the_metrics_table_and_every_row_a_metric():
    code, docs = metrics_in_code(), metrics_in_docs()
    assert sorted(set(code) - set(docs)) == [], "not in the table"
    assert sorted(set(docs) - set(code)) == [], "no such metric"
    for name, (type_, labels) in code.items():
        assert docs[name] == (type_, labels), name


# -- API fields -------------------------------------------------------------
def view_fields() -> dict[str, list[str]]:
    """The keys of the dict each view of recovery/api/views.py returns
    (``workflow_details``: those of one step)."""
    tree = ast.parse(read(ROOT / "recovery" / "api" / "views.py"))
    fields = {}
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Dict) and len(node.keys) > 1:
                keys = [k.value for k in node.keys
                        if isinstance(k, ast.Constant)]
                fields.setdefault(function.name, keys)
        # A step's state and progress are set as its events come.
        fields[function.name] = fields.get(function.name, []) + [
            node.slice.value for node in ast.walk(function)
            if isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.slice, ast.Constant)]
    return fields


def api_ref_views() -> dict[str, list[str]]:
    """The parameters of each response block marked ``.. views.NAME``."""
    found = {}
    for path in API_REF.glob("*.inc"):
        for name, block in re.findall(
                r"^\.\. views\.(\w+)\n\n\.\. rest_parameters:: "
                r"parameters\.yaml\n\n((?:   - .*\n)+)", read(path), re.M):
            found[name] = re.findall(r"   - ([\w-]+):", block)
    return found


def test_the_api_ref_shows_each_field_of_each_view_and_no_other():
    code, docs = view_fields(), api_ref_views()
    shown = {"notification", "event", "vmove", "segment", "host",
             "workflow_details", "confirmation"}
    assert shown <= set(code)
    assert set(docs) == shown
    for view in shown:
        # The block names the wrapper ("segment: segment") first.
        documented = [name for name in docs[view] if name != view]
        assert sorted(documented) == sorted(code[view]), view


def test_every_api_ref_parameter_is_defined_and_used():
    defined = set(re.findall(r"^([\w-]+):$", read(API_REF /
                                                  "parameters.yaml"), re.M))
    used = set()
    for path in API_REF.glob("*.inc"):
        used |= set(re.findall(r"^   - [\w-]+: ([\w-]+)$", read(path),
                               re.M))
    assert sorted(used - defined) == [], "not in parameters.yaml"
    assert sorted(defined - used) == [], "defined, never used"


def test_the_api_ref_has_every_resource():
    methods = set()
    for path in API_REF.glob("*.inc"):
        methods |= set(re.findall(r"^\.\. rest_method:: (\w+ \S+)$",
                                  read(path), re.M))
    segment, host = "/v1/segments/{segment_id}", "/hosts/{host_id}"
    notification = "/v1/notifications/{notification_id}"
    assert methods == {
        "GET /", "GET /v1", "GET /healthcheck",
        "GET /v1/segments", "POST /v1/segments", f"GET {segment}",
        f"PUT {segment}", f"DELETE {segment}",
        f"GET {segment}/hosts", f"POST {segment}/hosts",
        f"GET {segment}{host}", f"PUT {segment}{host}",
        f"DELETE {segment}{host}",
        "GET /v1/notifications", "POST /v1/notifications",
        f"GET {notification}", f"GET {notification}/vmoves",
        f"GET {notification}/vmoves/{{vmove_id}}",
        f"GET {notification}/events",
        "POST /v1/fencing/{hostname}/confirm",
        "POST /v1/host-actions/{hostname}/drain",
        "POST /v1/host-actions/{hostname}/bring-back"}


# -- options ----------------------------------------------------------------
def sample_options() -> set[tuple[str, str]]:
    """(group, name) of every option in the generated sample file, which
    CI holds to the registered options, deprecated names included."""
    options, group = set(), None
    for line in read(ROOT / "etc" / "recovery.conf").splitlines():
        if match := re.match(r"\[(\w+)\]$", line):
            group = match[1]
        elif match := re.match(r"#(\w+) =", line):
            options.add((group, match[1]))
        elif match := re.match(r"# Deprecated group/name - \[(\w+)\]/(\w+)",
                               line):
            options.add((match[1], match[2]))
    return options | keystone_authtoken_plugin_options()


def keystone_authtoken_plugin_options() -> set[tuple[str, str]]:
    """keystonemiddleware reads its own credentials with the auth plugin
    ``[keystone_authtoken] auth_type`` names: the plugin's options are
    loaded at run time, so the sample file cannot list them."""
    from keystoneauth1 import loading

    return {("keystone_authtoken", option.dest)
            for plugin in ("password", "v3applicationcredential")
            for option in loading.get_plugin_loader(plugin).get_options()}


def doc_pages() -> list[Path]:
    return sorted(DOC.rglob("*.md"))


def test_every_option_the_pages_name_exists():
    """``[group] name`` in the prose, and each key of a configuration
    example whose sections are all option groups (not the fencing
    credentials file), is an option recovery registers."""
    options = sample_options()
    groups = {group for group, _ in options}
    masakari_table = set(read(DOC / "admin" / "masakari.md").splitlines())
    named, unknown = 0, []
    for path in doc_pages():
        text = read(path)
        prose = "\n".join(line for line in text.splitlines()
                          if not line.startswith("| [")
                          or line not in masakari_table)
        for group, name in re.findall(r"`?\[(\w+)\]`?\s+`(\w+)`", prose):
            named += 1
            if (group, name) not in options:
                unknown.append(f"{path.name}: [{group}] {name}")
        for block in fenced_blocks(text, "ini"):
            sections = re.findall(r"^\[(\S+)\]$", block, re.M)
            if not set(sections) <= groups:
                continue
            group = None
            for line in block.splitlines():
                if match := re.match(r"\[(\w+)\]$", line):
                    group = match[1]
                elif match := re.match(r"#? ?(\w+) = ", line):
                    named += 1
                    if (group, match[1]) not in options:
                        unknown.append(f"{path.name}: [{group}] {match[1]}")
    assert named > 50
    assert unknown == []


def test_the_option_reference_is_generated_from_every_namespace():
    page = read(DOC / "configuration" / "config-reference.rst")
    assert (".. show-options::\n   :config-file: "
            "etc/oslo-config-generator/recovery.conf") in page
    assert ('config_generator_config_file = '
            '"../../etc/oslo-config-generator/recovery.conf"'
            in read(DOC / "conf.py"))


# -- samples ----------------------------------------------------------------
def load_demo():
    spec = importlib.util.spec_from_file_location(
        "demo", ROOT / "tools" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    return demo


class _Nova:
    """What tools/demo.py asks of its Nova, answered at once."""
    endpoint = "http://127.0.0.1:8774/v2.1"

    def server(self, uuid):
        return {"OS-EXT-STS:task_state": None, "locked": False,
                "locked_reason": None, "OS-EXT-SRV-ATTR:host": "compute-2",
                "status": "ACTIVE"}

    def service(self, host):
        return {"state": "up", "forced_down": False, "status": "enabled",
                "disabled_reason": None}

    def fail_host(self, host):
        pass

    def wait_service(self, host, state):
        pass

    def restore_host(self, host):
        pass

    def stop(self):
        pass


def test_the_quickstart_page_shows_what_the_demo_runs(monkeypatch):
    """The first recovery page lists the commands tools/demo.py runs, in
    its order, and the README's two quickstart commands; the demo's
    Nova is stood in for: only its commands are recorded."""
    demo = load_demo()
    ran = []
    monkeypatch.setattr(demo, "start_nova", lambda: (
        _Nova(), {name: name for name, *_ in demo.INSTANCES}))
    monkeypatch.setattr(demo, "recovery", lambda bin_dir, config, *args: (
        ran.append("recovery --config-file recovery.conf "
                   + " ".join(args)) or 0))
    assert demo.demo("/nowhere") == 0
    page = read(DOC / "first-recovery.md")
    shown = [line for block in fenced_blocks(page, "console")
             for line in block.splitlines() if line.startswith("$ ")]
    assert [line.removeprefix("$ ") for line in shown] == ran
    hosts = {host for _, host, *_ in demo.INSTANCES}
    prose = " ".join(page.split())
    assert f"boots {len(demo.INSTANCES)} instances" in prose
    assert f"{len(hosts)} nova-compute services" in prose
    assert f"`recovery host-failure {demo.FAILED_HOST}`" in prose
    quickstart = fenced_blocks(read(ROOT / "README.md"), "sh")[0]
    assert fenced_blocks(page, "sh")[0] == quickstart
    assert [line.split()[:2] for line in quickstart.splitlines()] == [
        ["python3", "tools/demo.py"], ["python3", "tools/test.py"]]


LIVE_VIEW = [
    # name, uuid, outcome, destination, seconds, reason
    ("shelved", "efd9a4c1", Outcome.SKIPPED, None, None,
     # The reason a shelved instance is skipped with, as a run gives it.
     selection.skip_reason(types.SimpleNamespace(vm_state="shelved"),
                           None)),
    ("vm-1", "0a119bd6", Outcome.RECOVERED, "compute-2", 0.5, None),
    ("vm-0", "bd1b5f6d", Outcome.RECOVERED, "compute-3", 0.6, None),
    ("doomed", "3bef8092", Outcome.FAILED, None, 0.4,
     "evacuation failed: instance is error on compute-1 (Rebuild failed "
     "on the destination (set_evacuation_outcome error))"),
    ("paused", "0363dca4", Outcome.RECOVERED, "compute-3", 0.8, None),
    ("vm-3", "bf18ae62", Outcome.RECOVERED, "compute-2", 0.5, None),
    ("vm-2", "816fc0b7", Outcome.RECOVERED, "compute-2", 0.6, None),
]


def test_the_live_view_sample_is_what_the_view_draws():
    """The screen the observing page shows is the live view's last frame
    of those seven instances, drawn by recovery/cmd/live.py on a
    100-column terminal."""
    from rich.console import Console

    start = datetime.datetime(2026, 11, 22, 10, 0,
                              tzinfo=datetime.timezone.utc)
    board = live.Board("host-failure compute-1", Clock())
    for name, short, outcome, dest, seconds, reason in LIVE_VIEW:
        board.instance_changed(InstanceResult(
            uuid=f"{short}-0000-4000-8000-000000000000", name=name,
            source_host="compute-1", original_state="active",
            dest_host=dest, outcome=outcome, reason=reason,
            phase=Phase.DONE if seconds else Phase.PENDING,
            started_at=start if seconds else None,
            finished_at=(start + datetime.timedelta(seconds=seconds)
                         if seconds else None)))
    board.step_changed("recover-instances", "FAILURE",
                       "5 recovered, 1 failed, 1 skipped")
    screen = io.StringIO()
    Console(file=screen, width=100, color_system=None).print(board.render())
    page = read(DOC / "admin" / "observing.md")
    shown = [block for block in fenced_blocks(page)
             if block.startswith("host-failure compute-1\n")]
    assert shown == [screen.getvalue()]


# -- links ------------------------------------------------------------------
def slug(heading: str) -> str:
    """The anchor myst-parser (and GitHub) make of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", read(path), flags=re.M | re.S)
    return {slug(m) for m in re.findall(r"^#+ (.*)$", text, re.M)}


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```$", "", read(path), flags=re.M | re.S)
    return [link for link in re.findall(r"\]\(([^)\s]+)\)", text)
            if not re.match(r"[a-z]+:", link)]


@pytest.mark.parametrize("path", [ROOT / "README.md", *doc_pages(),
                                  *sorted(API_REF.glob("*.md"))],
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    """Each link to a file of the project leads to it, and each anchor to
    a heading of the page it names (Sphinx's -n checks the built tree;
    this checks the README too, and needs no build)."""
    broken = []
    for link in relative_links(path):
        target, _, anchor = link.partition("#")
        page = (path.parent / target).resolve() if target else path
        if not page.exists():
            broken.append(link)
        elif anchor and anchor not in anchors(page):
            broken.append(link)
    assert broken == []
