"""``/metrics`` of a running recovery-engine, scraped and parsed with
prometheus-client's own parser while it recovers a host of the fake
Nova: the counters move as the results say."""

import socket
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.functional.engine_process import EngineProcess

HOST = "compute-1"
TOKEN = "metrics-test-token-0123456789"


def scrape(port: int, token: str | None = None,
           host: str = "127.0.0.1") -> dict[tuple, float]:
    """Every sample: (name, sorted labels) -> value."""
    headers = {"X-Auth-Token": token} if token else {}
    req = urllib.request.Request(f"http://{host}:{port}/metrics",
                                 headers=headers)
    with urllib.request.urlopen(req, timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples}


def status(port: int, token: str | None = None,
           host: str = "127.0.0.1") -> int:
    try:
        scrape(port, token, host)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


def value(samples: dict[tuple, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_the_counters_follow_the_results(nova, engine):
    uuids = [nova.add_server(f"vm{n}", HOST) for n in range(8)]
    for uuid in uuids[:2]:
        nova.set_evacuation_outcome(uuid, "error")
    nova.fail_host(HOST)
    engine.start()
    before = scrape(engine.port)
    assert value(before, "recovery_armed") == 1
    assert value(before, "recovery_host_recoveries_in_flight") == 0
    assert value(before, "recovery_engine_loop_heartbeat_timestamp_seconds"
                 ) > 0
    for reason in ("all_down", "too_many_down"):
        assert value(before, "recovery_brake_engaged", reason=reason) == 0

    uuid = engine.post_host_down(HOST)
    engine.wait_status(uuid, "error", "failed", "finished")
    _, body = engine.request("GET", f"/v1/notifications/{uuid}/vmoves")
    table = {"recovered": 0, "failed": 0}
    for move in body["vmoves"]:
        table[{"succeeded": "recovered", "failed": "failed"}[
            move["status"]]] += 1
    assert table == {"recovered": 6, "failed": 2}

    after = scrape(engine.port)
    for outcome, count in table.items():
        assert value(after, "recovery_instances_total", outcome=outcome,
                     method="auto") == count
    assert value(after, "recovery_instance_recovery_seconds_count") == 6
    assert value(after, "recovery_host_recovery_seconds_count") >= 1
    assert value(after, "recovery_nova_requests_total",
                 kind="server.evacuate", result="ok") == len(
        nova.evacuate_calls)
    assert value(after, "recovery_nova_requests_total",
                 kind="server.lock", result="ok") == 8
    assert value(after, "recovery_nova_request_seconds_count",
                 kind="migration.list") >= 1
    stored = engine.store().get(uuid)
    assert value(after, "recovery_notifications", type="COMPUTE_HOST",
                 status=stored.status.value) == 1
    # Each engine that shares the store, as the store knows it.
    me = (("engine", engine.owner),)
    assert after[("recovery_engine_runs", me)] in (0, 1)
    assert after[("recovery_engine_silent_seconds", me)] < 60
    assert value(after, "recovery_lease_renewals_total",
                 result="lost") == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def token_engine(tmp_path, nova, api_host: str, metrics: str = ""):
    path = tmp_path / "token"
    path.write_text(TOKEN)
    return EngineProcess(tmp_path, nova.endpoint, extra=(
        f"\n[api]\nhost = {api_host}\nauth_strategy = token\n"
        f"token_file = {path}\nport = 0\n{metrics}"))


def test_on_a_loopback_api_metrics_need_no_token(nova, tmp_path):
    engine = token_engine(tmp_path, nova, "127.0.0.1")
    try:
        engine.start()
        assert status(engine.port) == 200
        # The rest of the API still asks for the token.
        assert engine.request("GET", "/v1/notifications")[0] == 401
    finally:
        engine.close()


def test_off_loopback_metrics_take_the_api_s_auth(nova, tmp_path):
    engine = token_engine(tmp_path, nova, "0.0.0.0")
    try:
        engine.start()
        assert status(engine.port) == 401
        assert status(engine.port, TOKEN) == 200
    finally:
        engine.close()


def test_metrics_on_their_own_address(nova, tmp_path):
    """Loopback: open; elsewhere: the API's auth."""
    loopback, anywhere = free_port(), free_port()
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    engine = token_engine(tmp_path / "a", nova, "127.0.0.1", (
        f"\n[metrics]\nhost = 127.0.0.1\nport = {loopback}\n"))
    other = token_engine(tmp_path / "b", nova, "127.0.0.1", (
        f"\n[metrics]\nhost = 0.0.0.0\nport = {anywhere}\n"))
    try:
        engine.start()
        other.start()
        assert status(loopback) == 200
        # Not on the API's port any more.
        assert status(engine.port) == 401
        assert status(anywhere) == 401
        assert status(anywhere, TOKEN) == 200
    finally:
        engine.close()
        other.close()
