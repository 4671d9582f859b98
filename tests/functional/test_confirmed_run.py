"""recovery-engine, a real process, against the fake Nova: a host whose
BMC is out of reach is held, and the operator's confirmation, recorded
in the store, is the proof its next attempt goes on with: asked by the
run before any fencing device, and named in its events."""

import contextlib
import datetime

from tests.bmc import free_port
from tests.bmc import write_sections
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

HOST = "compute-1"


def test_a_held_host_moves_on_its_operator_s_confirmation(nova, tmp_path):
    uuid = nova.add_server("vm", HOST)
    nova.fail_host(HOST)
    credentials = write_sections(tmp_path / "fencing.ini", {HOST: {
        "driver": "redfish", "address": f"http://127.0.0.1:{free_port()}",
        "username": "admin", "password": "secret"}})
    # Held, then retried only in an hour: the confirmation makes it due.
    engine = EngineProcess(
        tmp_path, nova.endpoint,
        extra=f"retry_backoff = 3600\n\n"
              f"[fencing]\ncredentials_file = {credentials}\n"
              f"timeout = 1\nattempts = 1\npoll_interval = 0.2\n")
    try:
        engine.start()
        notification = engine.post_host_down(HOST)
        held = engine.wait_status(notification, "error")
        assert f"{HOST} could not be proved off" in held["message"]
        assert nova.evacuate_calls == []
        with contextlib.closing(engine.store()) as store:
            store.confirm_fenced(HOST, "alice", "its PDU is off",
                                 datetime.datetime.now(datetime.UTC))
        done = engine.wait_status(notification, "finished", timeout=60)
        with contextlib.closing(engine.store()) as store:
            fenced = [e.message for e in store.events(kinds=["fenced"])]
    finally:
        engine.close()
    assert wait_until(lambda: nova.server(uuid)["host"] != HOST)
    assert len(fenced) == 1
    assert fenced[0].startswith("confirmed off by alice at ")
    assert fenced[0].endswith(" UTC: its PDU is off")
    assert done["message"].endswith(f"(proved off: {fenced[0]})")
