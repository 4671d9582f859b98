"""Both fencing drivers against emulated BMCs (see tests/bmc).

Redfish is the real sushy-emulator (its fake driver applies a power-off
1-11 s after the request); IPMI a pyghmi BMC (0.5 s). The failure cases
use a 3 s timeout and must end within it, with the BMC's own words and
never the password.
"""

import logging
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from oslo_config import cfg

from recovery.concurrency import Clock
from recovery.conf import fencing as fencing_conf
from recovery.exception import FencingError
from recovery.fencing import BmcRefused
from recovery.fencing import Fencer
from recovery.fencing import load_fencing
from tests.bmc import ROOT
from tests.bmc import free_port
from tests.bmc import write_credentials_file
from tests.bmc.fixtures import fast_redfish_bmc  # noqa: F401
from tests.bmc.fixtures import ipmi_bmc  # noqa: F401
from tests.bmc.fixtures import redfish_bmc  # noqa: F401

HOST = "compute-1"
TIMEOUT = 3.0
SLACK = 1.0        # seconds past the timeout a failure may take to report
FAILING = dict(timeout=TIMEOUT, attempts=2, poll_interval=0.5)

# What each BMC (or its client library) says to a wrong password.
REFUSAL = {"redfish": "Incorrect username or password",
           "ipmi": "Incorrect password provided"}


@pytest.fixture(params=["redfish", "ipmi"])
def bmc(request):
    return request.getfixturevalue(f"{request.param}_bmc")


def write_config(tmp_path, credentials: dict[str, str], **options) -> str:
    """A recovery.conf whose credentials file names HOST."""
    ini = tmp_path / "fencing.ini"
    ini.write_text("".join(f"{k} = {v}\n" for k, v in credentials.items()))
    ini.write_text(f"[{HOST}]\n" + ini.read_text())
    ini.chmod(0o600)
    lines = [f"credentials_file = {ini}"]
    lines += [f"{name} = {value}" for name, value in options.items()]
    path = tmp_path / "recovery.conf"
    path.write_text("[fencing]\n" + "\n".join(lines) + "\n")
    return str(path)


def fencer_for(tmp_path, bmc, **options) -> Fencer:
    ini = write_credentials_file(tmp_path / "fencing.ini", {HOST: bmc})
    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf([])
    conf.set_override("credentials_file", str(ini), "fencing")
    for name, value in options.items():
        conf.set_override(name, value, "fencing")
    return load_fencing(conf).for_host(HOST)


def fails(fencer: Fencer, password: str, caplog) -> FencingError:
    """Run power_off expecting FencingError within TIMEOUT (+ SLACK)."""
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), \
            pytest.raises(FencingError) as caught:
        fencer.power_off(Clock())
    assert time.monotonic() - started <= TIMEOUT + SLACK
    for text in (str(caught.value), repr(caught.value), caplog.text):
        assert password not in text
    return caught.value


def test_power_off_is_verified(bmc, tmp_path, caplog):
    # Two shares of 15 s: the emulator's worst lag (11 s) fits in one.
    fencer = fencer_for(tmp_path, bmc, attempts=2)
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG):
        message = fencer.power_off(Clock())
    elapsed = time.monotonic() - started
    print(f"{bmc.driver}: Off verified after {elapsed:.1f} s")
    assert message.startswith(f"powered off through {bmc.driver} ")
    assert "verified Off after" in message
    assert "power-off requests" not in message       # one request did it
    assert bmc.power_state() == "Off"
    assert bmc.password not in caplog.text


def test_refused_credentials(bmc, tmp_path, caplog):
    bmc.refuse()
    started = time.monotonic()
    error = fails(fencer_for(tmp_path, bmc, **FAILING), bmc.password, caplog)
    assert isinstance(error, BmcRefused)
    assert time.monotonic() - started < TIMEOUT / 2   # not retried
    assert REFUSAL[bmc.driver] in str(error)
    assert bmc.power_state() == "On"


def test_hanging_bmc(bmc, tmp_path, caplog):
    bmc.hang()
    started = time.monotonic()
    error = fails(fencer_for(tmp_path, bmc, **FAILING), bmc.password, caplog)
    assert time.monotonic() - started >= TIMEOUT - 0.1
    assert not isinstance(error, BmcRefused)
    assert "no answer from the BMC within" in str(error)
    assert "after 2 power-off request(s)" in str(error)


def test_power_stays_on(bmc, tmp_path, caplog):
    bmc.ignore_power_off()
    error = fails(fencer_for(tmp_path, bmc, **FAILING), bmc.password, caplog)
    assert "the power last read On" in str(error)
    assert "after 2 power-off request(s)" in str(error)
    assert bmc.power_state() == "On"


@pytest.mark.parametrize("driver, address, expected", [
    ("redfish", "http://127.0.0.1:{tcp}", "Connection refused"),
    ("ipmi", "127.0.0.1", "no answer from the BMC"),
], ids=["redfish", "ipmi"])
def test_nothing_answers(tmp_path, caplog, driver, address, expected):
    credentials = {"driver": driver,
                   "address": address.format(tcp=free_port()),
                   "port": str(free_port(socket.SOCK_DGRAM)),
                   "username": "admin", "password": "not-shown-anywhere"}
    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf(["--config-file", write_config(tmp_path, credentials, **FAILING)])
    error = fails(load_fencing(conf).for_host(HOST), "not-shown-anywhere",
                  caplog)
    assert expected in str(error)


GREEN_FENCING = textwrap.dedent("""
    import sys

    from recovery import concurrency

    concurrency.monkey_patch()

    from oslo_config import cfg

    from recovery.conf import fencing as fencing_conf
    from recovery.exception import FencingError
    from recovery.fencing import load_fencing

    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf(["--config-file", sys.argv[1]])
    assert concurrency.is_green()
    try:
        print(load_fencing(conf).for_host(sys.argv[2]).power_off(
            concurrency.Clock()))
    except FencingError as exc:
        print("FencingError:", exc)
""")


@pytest.fixture(params=["fast_redfish", "ipmi"])
def quick_bmc(request):
    return request.getfixturevalue(f"{request.param}_bmc")


@pytest.mark.parametrize("hang", [False, True], ids=["off", "hang"])
def test_monkey_patched_process(quick_bmc, tmp_path, hang):
    """The engine is green: both libraries must work, and be bounded,
    under eventlet (pyghmi runs its own I/O thread)."""
    if hang:
        quick_bmc.hang()
    config = write_config(tmp_path, quick_bmc.credentials(), **FAILING)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", GREEN_FENCING, config, HOST],
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    if hang:
        assert result.stdout.startswith("FencingError:"), result.stdout
        assert "no answer from the BMC" in result.stdout
        assert elapsed < TIMEOUT + SLACK + 3     # + interpreter start
    else:
        assert "verified Off" in result.stdout, result.stdout + result.stderr
        assert quick_bmc.power_state() == "Off"
    assert quick_bmc.password not in result.stdout + result.stderr
