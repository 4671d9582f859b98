"""IPMI fencing through pyghmi (IPMI 2.0, RMCP+ over UDP).

Power-off is chassis control "power down"; the proof is the chassis
power state read back as off.

pyghmi runs in a helper process, one per fencing (``python -m
recovery.fencing.ipmi``), never in the engine. pyghmi 1.6 keeps all its
sessions in process-wide state driven by whichever thread waits, and:

- a login to a BMC that answers the session opening but not the login
  is retried forever, so a call cannot be abandoned cleanly;
- a second login to a BMC while one is pending, in a monkey-patched
  process, spins the CPU and starves every green thread;
- a session to a BMC, once logged out or broken, is handed back to the
  next Command with the same credentials (given as str), which fails.

So the engine only talks JSON lines to the helper over pipes (the
credentials go through stdin, never argv or the environment), bounds
each exchange with ``call_bounded``, and kills the helper when a call
runs out of time: nothing of a hung BMC survives its fencing, and no
fencing affects another. ``_translate`` is the one place where pyghmi's
errors (reported by the helper) become FencingError.
"""

import json
import logging
import subprocess
import sys
from typing import IO
from typing import Any

from recovery import concurrency
from recovery.exception import FencingError
from recovery.fencing.fencer import BmcSettings
from recovery.fencing.fencer import Fencer
from recovery.fencing.fencer import Timing
from recovery.fencing.fencer import call_bounded
from recovery.fencing.fencer import detail_of

LOG = logging.getLogger(__name__)

# pyghmi reports refusals as text only (RAKP status strings, completion
# codes); these words mark the ones a new request cannot fix.
_REFUSAL_WORDS = ("password", "unauthorized", "privilege", "invalid role")
_REAP_TIMEOUT = 5.0


class HelperError(Exception):
    """An error the helper reported: pyghmi's exception type and text
    (None when pyghmi gave none, as when nothing answered)."""

    def __init__(self, kind: str, text: str | None) -> None:
        super().__init__(text)
        self.kind = kind
        self.text = text


class IpmiFencer(Fencer):
    driver = "ipmi"

    def __init__(self, settings: BmcSettings, timing: Timing) -> None:
        super().__init__(settings, timing)
        self._helper: _Helper | None = None

    def describe(self) -> str:
        return f"ipmi power-off of {self._target()}"

    def _target(self) -> str:
        address = self.settings.address
        if ":" in address:          # IPv6 literal
            address = f"[{address}]"
        return f"{address}:{self.settings.port}"

    def _send_off(self, seconds: float) -> None:
        self._call("off", seconds, "asking for power off")

    def _read_power(self, seconds: float) -> str:
        reply = self._call("power", seconds, "reading the power state")
        return str(reply["state"]).capitalize()          # "on" -> "On"

    def _close(self) -> None:
        helper, self._helper = self._helper, None
        if helper is not None:
            helper.finish()

    def _call(self, op: str, seconds: float, what: str) -> dict[str, Any]:
        try:
            if self._helper is None:
                self._helper = _Helper.start(self.settings)
            helper = self._helper
            return call_bounded(lambda: helper.ask(op), seconds)
        except Exception as exc:
            if not isinstance(exc, HelperError):
                # Timed out or died: a fresh helper for the next call.
                self._close_now()
            raise self._translate(exc, what) from exc

    def _close_now(self) -> None:
        helper, self._helper = self._helper, None
        if helper is not None:
            helper.kill()

    def _translate(self, exc: Exception, what: str) -> FencingError:
        """The one place pyghmi's errors become FencingError."""
        refused = False
        if isinstance(exc, HelperError):
            if exc.text is None:
                detail = f"{exc.kind}: no answer from the BMC"
            else:
                detail = f"{exc.kind}: {exc.text}"
                refused = any(word in exc.text.lower()
                              for word in _REFUSAL_WORDS)
        else:
            detail = detail_of(exc)
        return self._error(what, detail, refused=refused)


class _Helper:
    """The engine's end of one helper process."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._process = process

    @classmethod
    def start(cls, settings: BmcSettings) -> "_Helper":
        process = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, encoding="utf-8")
        helper = cls(process)
        helper._send({"address": settings.address, "port": settings.port,
                      "username": settings.username,
                      "password": settings.password.reveal()})
        return helper

    def ask(self, op: str) -> dict[str, Any]:
        """Send one request and return the reply (runs bounded)."""
        self._send({"op": op})
        line = self._stdout().readline()
        if not line:
            code = self._process.poll()
            raise FencingError(f"the IPMI helper process ended (exit "
                               f"status {code}) without an answer")
        reply = json.loads(line)
        if not reply["ok"]:
            raise HelperError(reply["kind"], reply["text"])
        return reply

    def finish(self) -> None:
        """Let the helper log out and exit; reap it in the background."""
        try:
            self._stdin().close()
        except OSError:
            pass
        concurrency.spawn(self._reap)

    def kill(self) -> None:
        self._process.kill()
        concurrency.spawn(self._reap)

    def _reap(self) -> None:
        try:
            self._process.wait(_REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for pipe in (self._process.stdin, self._process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()

    def _send(self, message: dict[str, Any]) -> None:
        stdin = self._stdin()
        stdin.write(json.dumps(message) + "\n")
        stdin.flush()

    def _stdin(self) -> IO[str]:
        assert self._process.stdin is not None
        return self._process.stdin

    def _stdout(self) -> IO[str]:
        assert self._process.stdout is not None
        return self._process.stdout


# -- the helper process -------------------------------------------------------

def serve(requests: IO[str], replies: IO[str]) -> None:
    """Answer the engine's requests for one BMC, one JSON line each.

    The first line holds the BMC's settings; then each line is
    ``{"op": "off"}`` or ``{"op": "power"}``. End of input: log out.
    """
    from pyghmi.ipmi import command

    settings = json.loads(requests.readline())
    session: Any = None
    for line in requests:
        op = json.loads(line)["op"]
        if op not in _OPERATIONS:
            _reply(replies, {"ok": False, "kind": "ValueError",
                             "text": f"unknown request {op!r}"})
            continue
        try:
            if session is None:
                # Credentials as bytes: pyghmi 1.6 keys its pending
                # sessions by the arguments but deletes them by their
                # bytes; given str, a broken session is handed back.
                session = command.Command(
                    bmc=settings["address"], port=settings["port"],
                    userid=settings["username"].encode("utf-8"),
                    password=settings["password"].encode("utf-8"))
            reply = _OPERATIONS[op](session)
        except Exception as exc:   # reported to the engine, translated there
            session = None          # log in again on the next request
            text = exc.args[0] if exc.args else str(exc)
            reply = {"ok": False, "kind": type(exc).__name__,
                     "text": None if text is None else str(text)}
        _reply(replies, reply)
    if session is not None:
        try:
            session.ipmi_session.logout()
        except Exception as exc:  # exiting anyway
            print(f"IPMI logout failed: {exc}", file=sys.stderr)


def _power_off(session: Any) -> dict[str, Any]:
    session.set_power("off", wait=False)
    return {"ok": True}


def _power_state(session: Any) -> dict[str, Any]:
    return {"ok": True, "state": session.get_power()["powerstate"]}


_OPERATIONS = {"off": _power_off, "power": _power_state}


def _reply(replies: IO[str], reply: dict[str, Any]) -> None:
    replies.write(json.dumps(reply) + "\n")
    replies.flush()


def main() -> None:
    replies = sys.stdout
    # pyghmi prints to stdout in places: keep the reply stream clean.
    sys.stdout = sys.stderr
    serve(sys.stdin, replies)


if __name__ == "__main__":
    main()
