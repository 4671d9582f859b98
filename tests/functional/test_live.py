"""``recovery host-failure`` on a real pseudo-terminal: the live view is
redrawn in place and leaves each instance's final row on the screen; off
a terminal, and with --format json, the output is the lines of before."""

import json

import pytest

from tests.fakenova import FakeNova
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config
from tests.functional.terminal import run_in_pty
from tests.functional.terminal import screen

FAILED = "compute-1"
COUNTS = "pending 0 | in flight 0 | recovered 4 | failed 1 | skipped 1"


@pytest.fixture
def cloud():
    """Six instances on compute-1: four recover, "doomed" fails, "shelved"
    is skipped. Evacuations take 0.4 s, two at a time: the view is drawn
    several times during the run."""
    with FakeNova(evacuation_latency=0.4) as fake:
        for host in (FAILED, "compute-2", "compute-3"):
            fake.add_compute(host)
        uuids = {f"vm-{n}": fake.add_server(f"vm-{n}", FAILED)
                 for n in range(4)}
        uuids["doomed"] = fake.add_server("doomed", FAILED)
        uuids["shelved"] = fake.add_server("shelved", FAILED,
                                           vm_state="shelved")
        fake.set_evacuation_outcome(uuids["doomed"], "error")
        fake.fail_host(FAILED)
        yield fake, uuids


def live_row(lines, name):
    """The cells of ``name``'s row in the live view's table (drawn with
    box characters, unlike the result table)."""
    [found] = [line for line in lines if line.startswith(f"│ {name} ")]
    return [cell.strip() for cell in found.strip("│").split("│")]


def test_the_live_view_ends_with_each_instance_s_row(cloud, tmp_path):
    fake, uuids = cloud
    code, written = run_in_pty(write_config(tmp_path, fake, threads=2),
                               "host-failure", FAILED)
    assert code == 1    # "doomed" failed
    lines = screen(written)
    shown = "\n".join(lines)
    for n in range(4):
        uuid = uuids[f"vm-{n}"]
        cells = live_row(lines, f"vm-{n}")
        assert cells[1:4] == [uuid[:8], "recovered",
                              fake.server(uuid)["host"]], shown
        assert cells[4].endswith("s") and cells[5] == ""
    assert live_row(lines, "doomed")[2] == "failed"
    assert "evacuation failed" in live_row(lines, "doomed")[5]
    assert live_row(lines, "shelved")[2:4] == ["skipped", ""]
    assert "step recover-instances failure: 4 recovered, 1 failed, " \
           "1 skipped" in lines
    # Redrawn in place: many frames were written, one is on the screen.
    assert written.count(b"in flight") > 2
    assert lines.count(COUNTS) == 1
    # The failure's log line went above the view, not through it.
    assert shown.index("(doomed) failed") < shown.index(COUNTS)
    # Then the result table, on stdout, as before.
    assert shown.index(COUNTS) < shown.index(
        f"Results for host {FAILED}: 4 recovered, 1 failed, 1 skipped")


def test_json_on_a_terminal_keeps_the_progress_lines(cloud, tmp_path):
    fake, uuids = cloud
    code, written = run_in_pty(write_config(tmp_path, fake, threads=2),
                               "host-failure", FAILED, "--format", "json")
    assert code == 1
    text = written.decode()
    assert "\x1b[" not in text      # no cursor moves, no colours
    assert f"vm-0 ({uuids['vm-0'][:8]}) recovered -> compute-" in text
    report = json.loads(text[text.index("\n{") + 1:text.rindex("}") + 1])
    assert report["summary"]["recovered"] == 4


def test_off_a_terminal_the_output_is_the_lines(cloud, tmp_path):
    fake, uuids = cloud
    proc = run_cli(write_config(tmp_path, fake, threads=2), "host-failure",
                   FAILED)
    assert proc.returncode == 1
    assert "\x1b" not in proc.stdout + proc.stderr
    assert f"vm-0 ({uuids['vm-0'][:8]}) locking" in proc.stderr
    assert proc.stdout.startswith(f"Results for host {FAILED}: ")
