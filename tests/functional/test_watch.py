"""``recovery notifications watch UUID`` following a running
recovery-engine's run to its end: a real engine process, the fake Nova,
the command as a subprocess (off a terminal: one line per change; on a
pseudo-terminal: the live view)."""

from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config
from tests.functional.terminal import run_in_pty
from tests.functional.terminal import screen

HOST = "compute-1"


def test_watch_exits_0_when_the_run_finishes(nova, engine):
    uuids = [nova.add_server(f"vm{n}", HOST) for n in range(4)]
    nova.fail_host(HOST)
    engine.start()
    uuid = engine.post_host_down(HOST)
    proc = run_cli(engine.config, "notifications", "watch", uuid,
                   "--timeout", "60")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for n, server in enumerate(uuids):
        final = (f"vm{n} ({server[:8]}) recovered -> "
                 f"{nova.server(server)['host']}")
        assert lines.count(final) == 1, proc.stdout
    assert lines[-1].startswith(
        f"notification {uuid} (COMPUTE_HOST STOPPED {HOST}): finished")
    assert "[recover-instances] success: 4 recovered" in lines


def test_watch_exits_1_when_an_instance_failed(nova, engine):
    doomed = nova.add_server("doomed", HOST)
    nova.add_server("vm0", HOST)
    nova.set_evacuation_outcome(doomed, "error")
    nova.fail_host(HOST)
    # The watch looks twice a second, and its first look may come a few
    # seconds after the notification: the 'error' between the attempts
    # lasts long enough (retry_backoff) for it to be seen.
    engine.write_config(nova.endpoint, 5, "retry_max_attempts = 2\n",
                        retry_backoff=8)
    engine.start()
    uuid = engine.post_host_down(HOST)
    proc = run_cli(engine.config, "notifications", "watch", uuid,
                   "--timeout", "60")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    # The first attempt's error is retried: the watch goes on.
    assert any(line.endswith("(recovery-engine retries it)")
               and ": error, attempt 1: " in line for line in lines), \
        proc.stdout
    assert f"doomed ({doomed[:8]}) failed: evacuation failed" in (
        proc.stdout)
    assert ": failed, attempt 2: " in lines[-1]


def test_watch_on_a_terminal_draws_the_live_view(nova, engine):
    uuids = [nova.add_server(f"vm{n}", HOST) for n in range(3)]
    nova.fail_host(HOST)
    engine.start()
    uuid = engine.post_host_down(HOST)
    code, written = run_in_pty(engine.config, "notifications", "watch",
                               uuid, "--timeout", "60")
    assert code == 0
    lines = screen(written)
    assert lines[0].startswith(f"notification {uuid} (COMPUTE_HOST "
                               f"STOPPED {HOST}): finished")
    for n, server in enumerate(uuids):
        assert any(line.startswith(f"│ vm{n} ") and "recovered" in line
                   and nova.server(server)["host"] in line
                   for line in lines), "\n".join(lines)


def test_watch_gives_up_at_its_timeout(nova, engine):
    nova.add_server("vm0", HOST)
    nova.fail_host(HOST)
    engine.start()
    # Disarmed: the notification waits, 'new', for 'recovery arm'.
    assert run_cli(engine.config, "disarm", "--reason", "test").returncode \
        == 0
    uuid = engine.post_host_down(HOST)
    proc = run_cli(engine.config, "notifications", "watch", uuid,
                   "--timeout", "1")
    assert proc.returncode == 4
    assert proc.stdout.startswith(f"notification {uuid} (COMPUTE_HOST "
                                  f"STOPPED {HOST}): new")
    assert f"gave up after 1s waiting for notification {uuid} to end; " \
           f"the run goes on" in proc.stderr


def test_watch_of_an_unknown_notification_exits_2(fake_nova, tmp_path):
    proc = run_cli(write_config(tmp_path, fake_nova), "notifications",
                   "watch", "no-such-uuid")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("recovery: error: no notification "
                                   "no-such-uuid")
