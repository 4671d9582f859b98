"""An IPMI BMC for tests on pyghmi's server side; run by tests.bmc.ipmi.

``python -m tests.bmc._ipmi_server --port P --username U --state FILE
--control FILE [--lag S]`` serves IPMI 2.0 (RMCP+) on 127.0.0.1:P/udp.

- The power starts On; a power-off applies ``--lag`` seconds later.
- FILE ``--control`` (JSON, re-read on every use) holds the password it
  accepts and ``ignore_power_off`` (accept the request, keep the power).
- FILE ``--state`` (JSON, replaced atomically) holds the power and when a
  pending power-off applies; it is written once listening (readiness).

Two fixes to pyghmi 1.6.19's server, which only implements SHA-1 RAKP:
it refuses another authentication algorithm in its open-session response
(pyghmi's client proposes SHA-256 first, then retries with SHA-1; a
server that accepts SHA-256 makes the client crash in RAKP2), and it
answers RAKP2 "unauthorized name" to an unknown user (instead of
silence, on which the client logs in again forever).
"""

import argparse
import json
import os
import sys
import time

import pyghmi.ipmi.bmc as pyghmi_bmc
import pyghmi.ipmi.private.constants as constants
import pyghmi.ipmi.private.serversession as serversession

AUTH_SHA1 = 1
NO_CIPHER_SUITE_MATCH = 0x11
UNAUTHORIZED_NAME = 0x0D


class Sha1OnlySession(serversession.ServerSession):
    def create_open_session_response(self, request):
        # request: tag, role, 2 reserved, console session id (4), then the
        # authentication payload whose 5th byte is the algorithm.
        if request[12] != AUTH_SHA1:
            self.clientsessionid = request[4:8]
            return bytearray([request[0], NO_CIPHER_SUITE_MATCH, 0, 0]
                             ) + request[4:8]
        return super().create_open_session_response(request)

    def _got_rakp1(self, data):
        username = bytes(data[28:]).decode("utf-8", "replace")
        if data[27] and self.authdata.get(username) is None:
            self.send_payload(
                bytearray([data[0], UNAUTHORIZED_NAME, 0, 0])
                + self.clientsessionid,
                constants.payload_types["rakp2"], retry=False)
            return
        super()._got_rakp1(data)


class Control:
    """The control file, read on every use: the test changes it live."""

    def __init__(self, path: str, username: str) -> None:
        self.path = path
        self.username = username

    def read(self) -> dict:
        with open(self.path, encoding="utf-8") as handle:
            return json.load(handle)

    def get(self, username: str) -> str | None:
        # pyghmi looks passwords up with authdata.get(username).
        if username != self.username:
            return None
        return self.read()["password"]


class EmulatedBmc(pyghmi_bmc.Bmc):
    def __init__(self, control: Control, state_path: str, lag: float,
                 port: int) -> None:
        super().__init__(control, port=port, address="127.0.0.1")
        self.control = control
        self.state_path = state_path
        self.lag = lag
        self.power = "On"
        self.off_at: float | None = None
        self.save()

    def sessionless_data(self, data, sockaddr):
        packet = bytearray(data)
        if (len(packet) >= 22 and packet[0] == 6
                and packet[2:4] == b"\xff\x07" and packet[4] == 6
                and packet[5] == 16):      # RMCP+ open session request
            Sha1OnlySession(self.authdata, self.kg, sockaddr,
                            self.serversocket, packet[16:], self.uuid,
                            bmc=self)
            return
        super().sessionless_data(data, sockaddr)

    def get_power_state(self):
        if self.off_at is not None and time.time() >= self.off_at:
            self.power, self.off_at = "Off", None
            self.save()
        return self.power.lower()

    def power_off(self):
        if self.control.read().get("ignore_power_off"):
            return 0
        if self.power == "On" and self.off_at is None:
            self.off_at = time.time() + self.lag
            self.save()
        return 0

    def power_on(self):
        self.power, self.off_at = "On", None
        self.save()
        return 0

    def save(self) -> None:
        partial = self.state_path + ".partial"
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump({"power": self.power, "off_at": self.off_at}, handle)
        os.replace(partial, self.state_path)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--username", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--control", required=True)
    parser.add_argument("--lag", type=float, default=0.5)
    args = parser.parse_args()
    bmc = EmulatedBmc(Control(args.control, args.username), args.state,
                  args.lag, args.port)
    bmc.listen()
    return 0


if __name__ == "__main__":
    sys.exit(main())
