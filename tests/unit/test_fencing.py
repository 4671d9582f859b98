"""Fencing without a BMC: configuration, secrets, the verify loop.

The loop is driven by a scripted fencer and the FakeClock (no sleeping);
the drivers' use of sushy and pyghmi by fakes of their entry points.
Real BMCs (emulated) are in tests/functional/test_fencing_bmc.py.
"""

import io
import json
import logging
import os
import threading

import pytest
import sushy
from oslo_config import cfg
from pyghmi import exceptions as pyghmi_exc
from sushy import exceptions as sushy_exc

from recovery import exception
from recovery.conf import fencing as fencing_conf
from recovery.fencing import BmcRefused
from recovery.fencing import BmcSettings
from recovery.fencing import Fencer
from recovery.fencing import Secret
from recovery.fencing import Timing
from recovery.fencing import Unreachable
from recovery.fencing import call_bounded
from recovery.fencing import ipmi as ipmi_driver
from recovery.fencing import load_fencing
from recovery.fencing import redfish as redfish_driver
from tests.unit.fakes import FakeClock

PASSWORD = "s3cret-Pa55%word"


def make_conf(tmp_path=None, ini: str | None = None,
              **options) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf([])
    if ini is not None:
        path = tmp_path / "fencing.ini"
        path.write_text(ini)
        os.chmod(path, 0o600)
        options["credentials_file"] = str(path)
    for name, value in options.items():
        conf.set_override(name, value, "fencing")
    return conf


def only_device(fence):
    """The fencer of a host fenced by one driver: one level, one device."""
    [(level, device)] = fence.devices
    assert level == 1
    return device.fencer


def settings_of(conf, host):
    fence = load_fencing(conf).for_host(host)
    return only_device(fence).settings if fence else None


# -- the credentials file ----------------------------------------------------

def test_no_driver_means_no_fencer():
    assert load_fencing(make_conf()).for_host("compute-1") is None


def test_defaults_alone_fence_every_host():
    conf = make_conf(driver="redfish", username="admin", password=PASSWORD,
                     address="https://{host}-bmc.example.com")
    fencer = only_device(load_fencing(conf).for_host("compute-1"))
    assert fencer.driver == "redfish"
    assert fencer.settings.address == "https://compute-1-bmc.example.com"
    assert fencer.settings.system is None
    assert fencer.settings.verify is True
    assert fencer.describe() == ("redfish power-off of https://compute-1-"
                                 "bmc.example.com (its only system)")


INI = """
[compute-*]
driver = ipmi
address = {host}-ipmi.example.com
username = pattern-user
password = pattern-pass

[compute-1*]
driver = ipmi
address = never-used
username = second-pattern
password = x

[compute-1]
driver = redfish
address = https://10.0.0.5:8443/redfish/v1/
system = abc
username = exact-user
password = %(literal)s

[storage-?]
driver = none
"""


def test_exact_name_wins_over_patterns(tmp_path):
    conf = make_conf(tmp_path, INI)
    settings = settings_of(conf, "compute-1")
    assert settings.driver == "redfish"
    assert settings.username == "exact-user"
    assert settings.address == "https://10.0.0.5:8443"
    assert settings.system == "/redfish/v1/Systems/abc"
    assert settings.password.reveal() == "%(literal)s"   # no interpolation


def test_first_matching_pattern_in_file_order_wins(tmp_path):
    conf = make_conf(tmp_path, INI)
    settings = settings_of(conf, "compute-12")
    assert settings.username == "pattern-user"
    assert settings.driver == "ipmi"
    assert settings.address == "compute-12-ipmi.example.com"
    assert settings.port == 623


def test_a_section_may_say_none(tmp_path):
    conf = make_conf(tmp_path, INI, driver="redfish",
                     address="https://{host}", username="u", password="p")
    assert load_fencing(conf).for_host("storage-1") is None


def test_unmatched_host_uses_the_default_driver(tmp_path):
    assert settings_of(make_conf(tmp_path, INI), "network-1") is None
    conf = make_conf(tmp_path, INI, driver="ipmi", address="{host}.ipmi",
                     username="u", password="p")
    assert settings_of(conf, "network-1").address == "network-1.ipmi"


def test_section_keys_fall_back_to_file_default_then_options(tmp_path):
    ini = ("[DEFAULT]\nusername = file-default\n"
           "[compute-*]\ndriver = ipmi\naddress = 10.0.0.9\nport = 6230\n")
    conf = make_conf(tmp_path, ini, username="conf-user", password="p")
    settings = settings_of(conf, "compute-3")
    assert settings.username == "file-default"
    assert settings.password.reveal() == "p"
    assert settings.port == 6230


@pytest.mark.parametrize("verify, expected", [
    ("false", False), ("True", True), ("no", False)])
def test_verify_flags(tmp_path, verify, expected):
    ini = (f"[h]\ndriver = redfish\naddress = bmc\nusername = u\n"
           f"password = p\nverify = {verify}\n")
    assert settings_of(make_conf(tmp_path, ini), "h").verify is expected


def test_verify_may_be_a_ca_bundle(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")
    ini = (f"[h]\ndriver = redfish\naddress = bmc\nusername = u\n"
           f"password = p\nverify = {bundle}\n")
    assert settings_of(make_conf(tmp_path, ini), "h").verify == str(bundle)


def test_the_file_is_read_once(tmp_path):
    conf = make_conf(tmp_path, INI)
    fencing = load_fencing(conf)
    os.unlink(conf.fencing.credentials_file)
    assert only_device(fencing.for_host("compute-1")).driver == "redfish"


@pytest.mark.parametrize("ini, words", [
    ("[compute-1]\ndriver = redfish\naddress = bmc\nusername = u\n",
     ["[compute-1]", "'password'"]),
    ("[compute-*]\ndriver = ipmi\nusername = u\npassword = p\n",
     ["[compute-*]", "'address'"]),
    ("[compute-1]\ndriver = redfish\nadress = bmc\n",
     ["[compute-1]", "unknown key 'adress'"]),
    ("[compute-1]\ndriver = idrac\n", ["[compute-1] driver", "'idrac'"]),
    ("[h]\ndriver = ipmi\naddress = a\nusername = u\npassword = p\n"
     "port = 99999\n", ["[h] port", "'99999'"]),
    ("[h]\nverify = /no/such/bundle\n", ["[h] verify", "/no/such/bundle"]),
    ("[h]\ndriver = redfish\naddress = ftp://bmc\nusername = u\n"
     "password = p\n", ["[h] address", "ftp://bmc"]),
    ("[h]\ndriver = redfish\naddress = https://bmc/other\nusername = u\n"
     "password = p\n", ["[h] address", "has a path"]),
    ("[h]\ndriver = ipmi\naddress = ipmi://bmc\nusername = u\n"
     "password = p\n", ["[h] address", "not an IPMI address"]),
])
def test_bad_sections_are_refused_at_load(tmp_path, ini, words):
    conf = make_conf(tmp_path, ini)
    with pytest.raises(exception.ConfigError) as caught:
        load_fencing(conf)
    for word in words:
        assert word in str(caught.value)
    assert "fencing.ini" in str(caught.value)


def test_missing_file_names_the_option_and_path(tmp_path):
    conf = make_conf(credentials_file=str(tmp_path / "nope.ini"))
    with pytest.raises(exception.ConfigError,
                       match=r"\[fencing\] credentials_file .*nope.ini"):
        load_fencing(conf)


def test_syntax_error_does_not_quote_the_line(tmp_path):
    conf = make_conf(tmp_path, f"[h]\npassword {PASSWORD}\n")
    with pytest.raises(exception.ConfigError, match="not a valid INI") as c:
        load_fencing(conf)
    assert PASSWORD not in str(c.value)


def test_credentials_in_the_address_are_refused_unechoed(tmp_path):
    ini = (f"[h]\ndriver = redfish\naddress = https://root:{PASSWORD}@bmc\n"
           f"username = u\npassword = p\n")
    with pytest.raises(exception.ConfigError, match="holds credentials") as c:
        load_fencing(make_conf(tmp_path, ini))
    assert PASSWORD not in str(c.value)


def test_host_without_address_fails_at_for_host(tmp_path):
    conf = make_conf(tmp_path, INI, driver="redfish", username="u",
                     password="p")
    fencing = load_fencing(conf)           # the sections are complete
    with pytest.raises(exception.ConfigError) as caught:
        fencing.for_host("network-1")
    message = str(caught.value)
    assert "'address'" in message and "network-1" in message
    assert "[fencing] address" in message and "fencing.ini" in message


def test_world_readable_file_is_warned_about(tmp_path, caplog):
    conf = make_conf(tmp_path, INI)
    os.chmod(conf.fencing.credentials_file, 0o644)
    with caplog.at_level(logging.WARNING):
        load_fencing(conf)
    assert "chmod 600" in caplog.text


# -- secrets -----------------------------------------------------------------

def test_password_is_never_shown(tmp_path, caplog):
    ini = INI.replace("%(literal)s", PASSWORD)
    conf = make_conf(tmp_path, ini, password=PASSWORD)
    with caplog.at_level(logging.DEBUG):
        conf.log_opt_values(logging.getLogger("test"), logging.DEBUG)
        for host in ("compute-1", "compute-12"):
            fencer = only_device(load_fencing(conf).for_host(host))
            for text in (fencer.describe(), repr(fencer), str(fencer),
                         repr(fencer.settings), str(fencer.settings)):
                assert PASSWORD not in text
    assert PASSWORD not in caplog.text
    assert repr(Secret(PASSWORD)) == "'***'"
    assert f"{Secret(PASSWORD)}" == "***"


def test_library_messages_are_scrubbed():
    fencer = redfish_driver.RedfishFencer(bmc_settings("redfish"), TIMING)
    error = fencer._translate(sushy_exc.ConnectionError(
        url="https://bmc", error=f"echoed {PASSWORD}"), "reading")
    assert PASSWORD not in str(error) and "echoed ***" in str(error)
    fencer = ipmi_driver.IpmiFencer(bmc_settings("ipmi"), TIMING)
    error = fencer._translate(
        ipmi_driver.HelperError("IpmiException", f"bad {PASSWORD}"), "x")
    assert PASSWORD not in str(error)


# -- the verify loop ----------------------------------------------------------

TIMING = Timing(timeout=30.0, poll_interval=1.0, attempts=3)


def bmc_settings(driver: str = "fake") -> BmcSettings:
    return BmcSettings(host="compute-1", driver=driver, address="bmc",
                       username="admin", password=Secret(PASSWORD))


class ScriptedFencer(Fencer):
    """A BMC whose power reads Off from ``off_at`` (fake time) on."""

    driver = "fake"

    def __init__(self, clock: FakeClock, *, off_at: float | None = None,
                 send_errors=(), read_errors=(), timing=TIMING) -> None:
        super().__init__(bmc_settings(), timing)
        self.clock = clock
        self.off_at = off_at
        self.send_errors = list(send_errors)
        self.read_errors = list(read_errors)
        self.requests: list[float] = []
        self.reads = 0
        self.closed = False

    def describe(self) -> str:
        return "fake power-off of bmc"

    def _target(self) -> str:
        return "bmc"

    def _send_off(self, seconds: float) -> None:
        assert seconds > 0
        self.requests.append(self.clock.t)
        if self.send_errors:
            raise self.send_errors.pop(0)

    def _read_power(self, seconds: float) -> str:
        assert seconds > 0
        self.reads += 1
        if self.read_errors:
            raise self.read_errors.pop(0)
        if self.off_at is not None and self.clock.t >= self.off_at:
            return "Off"
        return "On"

    def _close(self) -> None:
        self.closed = True


def test_polls_until_off():
    clock = FakeClock()
    fencer = ScriptedFencer(clock, off_at=4.0)
    message = fencer.power_off(clock)
    assert message == "powered off through fake bmc, verified Off after 4.0 s"
    assert fencer.requests == [0.0]
    assert fencer.reads == 5 and clock.sleeps == [1.0] * 4
    assert fencer.closed


def test_power_still_on_resends_then_fails_at_the_deadline():
    clock = FakeClock()
    fencer = ScriptedFencer(clock)
    with pytest.raises(exception.FencingError) as caught:
        fencer.power_off(clock)
    assert not isinstance(caught.value, BmcRefused)
    assert fencer.requests == [0.0, 10.0, 20.0]   # an equal share each
    assert clock.t == 30.0
    assert str(caught.value) == (
        "fake power-off of bmc: power not verified Off within 30 s after "
        "3 power-off request(s); the power last read On")
    assert fencer.closed


def test_one_attempt_waits_the_whole_timeout():
    clock = FakeClock()
    fencer = ScriptedFencer(clock, off_at=25.0,
                            timing=Timing(30.0, 1.0, attempts=1))
    assert "after 25.0 s" in fencer.power_off(clock)
    assert fencer.requests == [0.0]


def test_a_second_request_is_reported():
    clock = FakeClock()
    fencer = ScriptedFencer(clock, off_at=12.0)
    assert fencer.power_off(clock).endswith(
        "(2 power-off requests, Off 2.0 s after the last one accepted, an "
        "earlier one 10.0 s without Off)")
    assert fencer.requests == [0.0, 10.0]
    # What the device's pacing learns: its lag is over 10 s (the first
    # request went that long with the power On), whether the BMC acted on
    # the first request at 12 s or restarted on the second.
    assert fencer.lag_seen == 10.0


def test_failed_request_still_waits_for_off():
    # The BMC may act on a request whose answer is lost.
    clock = FakeClock()
    fencer = ScriptedFencer(clock, off_at=2.0, send_errors=[
        exception.FencingError("fake: connection reset")])
    assert "verified Off after 2.0 s" in fencer.power_off(clock)
    assert fencer.requests == [0.0]


def test_read_errors_are_waited_through():
    clock = FakeClock()
    fencer = ScriptedFencer(clock, off_at=0.0, read_errors=[
        exception.FencingError("fake: timeout")] * 2)
    assert "verified Off after 2.0 s" in fencer.power_off(clock)


def test_last_error_is_in_the_failure():
    clock = FakeClock()
    errors = [exception.FencingError("fake power-off of bmc: no route")] * 3
    fencer = ScriptedFencer(clock, send_errors=errors,
                            read_errors=errors * 20)
    with pytest.raises(Unreachable,
                       match="last BMC error: no route; the BMC never "
                             "answered$"):
        fencer.power_off(clock)
    assert clock.t == 30.0


def test_a_bmc_that_answered_anything_is_not_unreachable():
    """A request accepted with the power never read, or a power read On:
    the BMC has power. Only a BMC that never answered is out of reach."""
    clock = FakeClock()
    unread = [exception.FencingError("fake power-off of bmc: no route")] * 60
    for fencer in (ScriptedFencer(clock, read_errors=unread),
                   ScriptedFencer(clock)):
        with pytest.raises(exception.FencingError) as caught:
            fencer.power_off(clock)
        assert not isinstance(caught.value, Unreachable)
        assert "never answered" not in str(caught.value)
    with pytest.raises(BmcRefused) as caught:
        ScriptedFencer(clock, send_errors=[BmcRefused("fake: 401")]
                       ).power_off(clock)
    assert not isinstance(caught.value, Unreachable)


@pytest.mark.parametrize("where", ["send_errors", "read_errors"])
def test_refusal_stops_at_once(where):
    clock = FakeClock()
    fencer = ScriptedFencer(clock, off_at=5.0,
                            **{where: [BmcRefused("fake: 401")]})
    with pytest.raises(BmcRefused, match="fake: 401"):
        fencer.power_off(clock)
    assert fencer.requests == [0.0]
    assert clock.t == 0.0 and fencer.closed


def test_failure_is_logged_without_password(caplog):
    clock = FakeClock()
    fencer = ScriptedFencer(clock, read_errors=[
        exception.FencingError("fake: refused")] * 40)
    with caplog.at_level(logging.DEBUG), \
            pytest.raises(exception.FencingError) as caught:
        fencer.power_off(clock)
    assert "Fencing compute-1 failed" in caplog.text
    for text in (caplog.text, str(caught.value), repr(caught.value)):
        assert PASSWORD not in text


# -- call_bounded -------------------------------------------------------------

def test_call_bounded_returns_and_raises():
    assert call_bounded(lambda: 42, 5.0) == 42
    with pytest.raises(KeyError):
        call_bounded(lambda: {}["x"], 5.0)


def test_call_bounded_gives_up_on_a_call_that_never_returns():
    release = threading.Event()
    with pytest.raises(exception.FencingError,
                       match="no answer from the BMC within 0.0 s"):
        call_bounded(release.wait, 0.0)
    release.set()     # lets the abandoned thread end


# -- the drivers' use of their libraries -------------------------------------

class FakeSystem:
    def __init__(self, states):
        self.states = list(states)
        self.power_state = None
        self.resets: list[str] = []

    def reset_system(self, value):
        self.resets.append(value)

    def refresh(self, force=True):
        self.power_state = self.states.pop(0)


def test_redfish_driver_uses_sushy_with_timeouts(monkeypatch):
    made = []
    system = FakeSystem([sushy.POWER_STATE_ON, sushy.POWER_STATE_OFF])

    class FakeSushy:
        def __init__(self, base_url, **kwargs):
            made.append((base_url, kwargs))

        def get_system(self, identity):
            assert identity == "/redfish/v1/Systems/1"
            return system

    monkeypatch.setattr(redfish_driver.sushy, "Sushy", FakeSushy)
    settings = BmcSettings(host="compute-1", driver="redfish",
                           address="https://bmc", username="admin",
                           password=Secret(PASSWORD),
                           system="/redfish/v1/Systems/1", verify=False)
    clock = FakeClock()
    fencer = redfish_driver.RedfishFencer(settings, TIMING)
    message = fencer.power_off(clock)
    assert message == ("powered off through redfish https://bmc/redfish/v1/"
                       "Systems/1, verified Off after 1.0 s")
    assert system.resets == [sushy.RESET_FORCE_OFF]
    [(url, kwargs)] = made                     # one connection
    assert url == "https://bmc" and kwargs["verify"] is False
    assert kwargs["read_timeout"] == kwargs["connect_timeout"] == 10.0
    assert kwargs["auth"]._password == PASSWORD


@pytest.mark.parametrize("error, refused", [
    (sushy_exc.ConnectionError(url="u", error="refused"), False),
    (sushy_exc.UnknownDefaultError(entity="ComputerSystem", error="2"),
     True),
    (sushy_exc.InvalidParameterValueError(parameter="value",
                                          value="ForceOff",
                                          valid_values=["On"]), True),
    (ValueError("odd JSON"), False),
])
def test_redfish_errors_are_translated(error, refused):
    fencer = redfish_driver.RedfishFencer(bmc_settings("redfish"), TIMING)
    translated = fencer._translate(error, "asking for ForceOff")
    assert isinstance(translated, exception.FencingError)
    assert isinstance(translated, BmcRefused) is refused
    assert str(translated).startswith("redfish power-off of bmc")


class FakeCommand:
    """pyghmi's Command, as the IPMI helper process uses it."""

    made: list[tuple] = []
    fail_login: list[Exception] = []

    def __init__(self, bmc, port, userid, password):
        FakeCommand.made.append((bmc, port, userid, password))
        if FakeCommand.fail_login:
            raise FakeCommand.fail_login.pop(0)
        self.state = "on"
        self.ipmi_session = self
        self.logged_out = False

    def set_power(self, state, wait=False):
        assert (state, wait) == ("off", False)
        self.state = "off"

    def get_power(self):
        return {"powerstate": self.state}

    def logout(self):
        FakeCommand.made.append("logout")


def test_ipmi_helper_serves_requests(monkeypatch):
    monkeypatch.setattr("pyghmi.ipmi.command.Command", FakeCommand)
    FakeCommand.made = []
    FakeCommand.fail_login = [pyghmi_exc.IpmiException(None)]
    requests = io.StringIO("\n".join(json.dumps(line) for line in [
        {"address": "10.0.0.7", "port": 6230, "username": "admin",
         "password": PASSWORD},
        {"op": "power"}, {"op": "off"}, {"op": "power"}, {"op": "boot"},
    ]) + "\n")
    replies = io.StringIO()
    ipmi_driver.serve(requests, replies)
    assert [json.loads(line) for line in replies.getvalue().splitlines()] == [
        {"ok": False, "kind": "IpmiException", "text": None},
        {"ok": True}, {"ok": True, "state": "off"},
        {"ok": False, "kind": "ValueError", "text": "unknown request 'boot'"},
    ]
    # A new login after the failed one; bytes credentials (see serve).
    login = ("10.0.0.7", 6230, b"admin", PASSWORD.encode())
    assert FakeCommand.made == [login, login, "logout"]


def test_ipmi_helper_errors_are_translated():
    fencer = ipmi_driver.IpmiFencer(bmc_settings("ipmi"), TIMING)
    assert fencer.describe() == "ipmi power-off of bmc:623"
    error = fencer._translate(
        ipmi_driver.HelperError("IpmiException", None), "reading")
    assert str(error) == ("ipmi power-off of bmc:623: reading: "
                          "IpmiException: no answer from the BMC")


@pytest.mark.parametrize("text, refused", [
    ("Incorrect password provided", True),
    ("Unauthorized name in RAKP2", True),
    ("Session no longer connected", False),
])
def test_ipmi_errors_are_translated(text, refused):
    fencer = ipmi_driver.IpmiFencer(bmc_settings("ipmi"), TIMING)
    translated = fencer._translate(
        ipmi_driver.HelperError("IpmiException", text), "reading")
    assert isinstance(translated, BmcRefused) is refused
    assert str(translated).endswith(f"reading: IpmiException: {text}")
