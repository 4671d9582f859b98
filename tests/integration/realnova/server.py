"""Run a real Nova on 127.0.0.1, in its own process, for integration tests.

    python -m tests.integration.realnova.server --hosts 4 --port 0 \\
        --ready-file /tmp/nova.json [--report-interval 1] \\
        [--service-down-time 3]

Serves the compute API at ``http://127.0.0.1:PORT/v2.1`` (the novaclient
endpoint; authenticate with ``X-Auth-Token: user:project[:roles]``) and a
JSON control API on the same port under ``/_control``, and Placement
under ``/placement``:

- ``POST /_control/fail_host {"host": H}``: stop H's nova-compute;
- ``POST /_control/restore_host {"host": H}``: start a new one for H;
- ``POST /_control/set_task_state {"server": ID, "task_state": S}``;
- ``POST /_control/calls``: the compute API requests served so far, in
  arrival order (method, path, server action, status), as Nova saw them;
- ``POST /_control/stop``: exit.

When serving, it writes ``{"endpoint", "control"}`` to the ready
file (atomically). Nova runs in eventlet mode: patch before any import.
"""

from nova import monkey_patch  # isort: skip

monkey_patch.patch()  # noqa: E402 - must precede every other import

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from collections.abc import Iterable  # noqa: E402
from typing import Any  # noqa: E402

import eventlet  # noqa: E402
from eventlet import wsgi as eventlet_wsgi  # noqa: E402

from tests.integration.realnova.stack import REPORT_INTERVAL  # noqa: E402
from tests.integration.realnova.stack import SERVICE_DOWN_TIME  # noqa: E402
from tests.integration.realnova.stack import NovaStack  # noqa: E402

LOG = logging.getLogger("realnova")
CONTROL_PREFIX = "/_control/"
# Placement, beside the compute API at /v2.1 (tokens as Nova's: its
# noauth middleware takes "admin..." for an admin).
PLACEMENT_PREFIX = "/placement"

StartResponse = Callable[..., Any]


class ControlApp:
    """``/_control/<command>`` in JSON; every other path goes to Nova."""

    def __init__(self, stack: NovaStack, stop: Callable[[], None]) -> None:
        self._stack = stack
        self._nova = stack.app
        self._placement = stack.placement_app
        self._calls: list[dict[str, Any]] = []
        self._commands: dict[str, Callable[[dict[str, Any]], Any]] = {
            "fail_host": lambda b: stack.fail_host(b["host"]),
            "restore_host": lambda b: stack.restore_host(b["host"]),
            "set_task_state": lambda b: stack.set_task_state(
                b["server"], b.get("task_state")),
            "calls": lambda b: self._calls,
            "servers": lambda b: stack.servers(),
            "stop": lambda b: stop(),
        }

    def __call__(self, env: dict[str, Any],
                 start_response: StartResponse) -> Iterable[bytes]:
        path = env.get("PATH_INFO", "")
        if path.startswith(PLACEMENT_PREFIX):
            env["SCRIPT_NAME"] = PLACEMENT_PREFIX
            env["PATH_INFO"] = path[len(PLACEMENT_PREFIX):]
            return self._placement(env, start_response)
        if not path.startswith(CONTROL_PREFIX):
            return self._serve_nova(env, start_response)
        command = self._commands.get(path[len(CONTROL_PREFIX):])
        if command is None:
            return _reply(start_response, "404 Not Found",
                          {"error": f"no control command {path!r}"})
        try:
            length = int(env.get("CONTENT_LENGTH") or 0)
            body = json.loads(env["wsgi.input"].read(length) or b"{}")
            result = command(body)
        except (KeyError, ValueError) as exc:
            return _reply(start_response, "400 Bad Request",
                          {"error": f"{type(exc).__name__}: {exc}"})
        except Exception as exc:  # report, keep serving
            LOG.exception("control command %s failed", path)
            return _reply(start_response, "500 Internal Server Error",
                          {"error": f"{type(exc).__name__}: {exc}"})
        return _reply(start_response, "200 OK", {"ok": True,
                                                 "result": result})

    def _serve_nova(self, env: dict[str, Any],
                    start_response: StartResponse) -> Iterable[bytes]:
        """Pass the request to Nova, and log it as a call."""
        call: dict[str, Any] = {"method": env["REQUEST_METHOD"],
                                "path": env.get("PATH_INFO", ""),
                                "action": None, "status": None,
                                "time": time.time()}
        self._calls.append(call)
        if call["method"] == "POST" and call["path"].endswith("/action"):
            length = int(env.get("CONTENT_LENGTH") or 0)
            raw = env["wsgi.input"].read(length)
            env["wsgi.input"] = io.BytesIO(raw)
            try:
                call["action"] = next(iter(json.loads(raw)), None)
            except (ValueError, TypeError):
                pass  # Nova answers the malformed body itself

        def record_status(status: str, *args: Any) -> Any:
            call["status"] = int(status.split()[0])
            return start_response(status, *args)

        return self._nova(env, record_status)


def _reply(start_response: StartResponse, status: str,
           body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(data)))])
    return [data]


def _write_ready(path: str, info: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, path)


def _log_to_stderr() -> None:
    """Nova's logging fixture keeps logs in memory: show warnings too."""
    handler = logging.StreamHandler(sys.__stderr__)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--report-interval", type=int,
                        default=REPORT_INTERVAL,
                        help="seconds between two heartbeats of a compute")
    parser.add_argument("--service-down-time", type=int,
                        default=SERVICE_DOWN_TIME,
                        help="seconds without a heartbeat before Nova "
                             "reports a compute down")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    stack = NovaStack(args.hosts, report_interval=args.report_interval,
                      service_down_time=args.service_down_time)
    try:
        stack.setUp()
    except BaseException:  # the fixtures may have captured sys.stderr
        traceback.print_exc(file=sys.__stderr__)
        return 1
    _log_to_stderr()
    done = eventlet.event.Event()
    sock = eventlet.listen(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    app = ControlApp(stack, lambda: done.ready() or done.send(True))
    eventlet.spawn(eventlet_wsgi.server, sock, app, log_output=False,
                   debug=False)
    base = f"http://127.0.0.1:{port}"
    _write_ready(args.ready_file, {
        "endpoint": f"{base}/v2.1", "control": f"{base}/_control"})
    done.wait()
    eventlet.sleep(0.1)  # let the stop reply go out
    # Tearing the stack down cleanly takes long and helps no test.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
