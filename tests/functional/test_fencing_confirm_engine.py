"""``recovery-engine`` end to end: a host failure whose fencing fails is
given up; an operator's confirmation over the engine's own API (its
Nova, as the engine's server wires it) re-opens it, the engine takes it
up at once, not at a retry's backoff, and the confirmation proves the
host off: its instance moves."""

from recovery.events import EventKind
from tests.bmc import free_port
from tests.bmc import write_sections
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

HOST = "compute-1"
WHY = "rack B7 lost its PDU: the host is dark, checked on site"


def test_a_confirmation_takes_the_given_up_run_up_at_once(nova, tmp_path):
    credentials = write_sections(tmp_path / "bmc.conf", {HOST: {
        "driver": "redfish", "address": f"http://127.0.0.1:{free_port()}",
        "username": "admin", "password": "secret"}})
    engine = EngineProcess(tmp_path, nova.endpoint, extra=(
        "retry_max_attempts = 1\n\n"
        f"[fencing]\ncredentials_file = {credentials}\ntimeout = 1\n"
        f"poll_interval = 0.2\n"))
    try:
        server = nova.add_server("vm", HOST)
        nova.fail_host(HOST)
        engine.start()
        uuid = engine.post_host_down(HOST)
        given_up = engine.wait_status(uuid, "failed")
        assert "gave up after 1 attempts" in given_up["message"]

        status, body = engine.request("POST", f"/v1/fencing/{HOST}/confirm",
                                      {"reason": WHY})
        assert status == 200, body
        assert body["confirmation"]["notification_uuid"] == uuid
        assert body["confirmation"]["checked"].endswith(
            "no liveness probe to ask ([detector] liveness_probe is not "
            "set)")

        def second_attempt():
            kinds = [(e.kind, e.message) for e in store.events(uuid)]
            confirmed = kinds.index((EventKind.CONFIRMED.value, WHY))
            return [m for k, m in kinds[confirmed:]
                    if k == EventKind.CLAIMED.value]

        store = engine.store()
        try:
            (claimed,) = wait_until(second_attempt, timeout=5,
                                    what="the engine's second attempt")
        finally:
            store.close()
        assert claimed.startswith("attempt 2 starts on ")
        # The confirmation is its proof: the instance moves.
        done = engine.wait_status(uuid, "finished", "failed", "error")
        assert done["status"] == "finished", done["message"]
        assert (f"{HOST}: 1 recovered (proved off: confirmed off by "
                f"operator (noauth API) at ") in done["message"]
        assert nova.server(server)["host"] != HOST
    finally:
        engine.close()
