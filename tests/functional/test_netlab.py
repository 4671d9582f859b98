"""The network-namespace lab (tests/netlab.py): a test host answers on
its ports until it loses power, then is silent (packets vanish, nothing
refuses); an engine namespace reaches the database and Nova through its
proxies and no test host at all; a BMC that powers off takes the host's
link and nova-compute with it; nothing is left behind."""

import base64
import errno
import json
import re
import socket
import subprocess
import sys
import urllib.request

import sqlalchemy as sa

from tests.bmc.redfish import RedfishBmc
from tests.fakenova import FakeNova
from tests.fakenova.server import wait_until
from tests.netlab import ip
from tests.netlab import netlab  # noqa: F401

TIMEOUT = 1.0


def connect(address: str, port: int, timeout: float = TIMEOUT) -> str:
    """"answered", "timeout", or the errno's name."""
    try:
        socket.create_connection((address, port), timeout=timeout).close()
    except TimeoutError:
        return "timeout"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc))
    return "answered"


def test_a_host_answers_until_it_loses_power(netlab):  # noqa: F811
    computes = []
    host = netlab.add_host(
        "compute-1", ports=(22, 16509),
        stop_compute=lambda name: computes.append(("stop", name)),
        start_compute=lambda name: computes.append(("start", name)))
    assert host.address.startswith("10.231.")
    assert [connect(host.address, port) for port in (22, 16509)] == [
        "answered", "answered"]
    assert connect(host.address, 2222) == "ECONNREFUSED"

    host.power_loss()
    assert computes == [("stop", "compute-1")]
    # Silence, not a refusal: the packets vanish.
    assert connect(host.address, 22) == "timeout"
    host.power_loss()                   # idempotent
    assert computes == [("stop", "compute-1")]

    host.restore()
    assert computes == [("stop", "compute-1"), ("start", "compute-1")]
    assert connect(host.address, 22) == "answered"

    host.cut_link()                     # nova-compute keeps running
    assert connect(host.address, 16509) == "timeout"
    host.restore(compute=False)
    assert connect(host.address, 16509) == "answered"
    assert len(computes) == 2


def test_an_engine_namespace_reaches_its_proxies_and_no_host(
        netlab, postgresql_url):  # noqa: F811
    host = netlab.add_host("compute-1")
    engine = netlab.engine_namespace()
    with FakeNova() as nova:
        script = (
            "import json, socket, sys, urllib.request\n"
            "import sqlalchemy as sa\n"
            "endpoint, database, address = sys.argv[1:]\n"
            "root = endpoint.rsplit('/', 1)[0] + '/'\n"
            "with urllib.request.urlopen(root, timeout=5) as answer:\n"
            "    versions = json.load(answer)['versions']\n"
            "with sa.create_engine(database).connect() as conn:\n"
            "    one = conn.exec_driver_sql('SELECT 1').scalar()\n"
            "try:\n"
            "    socket.create_connection((address, 22), timeout=2)\n"
            "    host = 'answered'\n"
            "except OSError as exc:\n"
            "    host = type(exc).__name__ + ' ' + str(exc.errno)\n"
            "print(json.dumps([len(versions), one, host]))\n")
        done = subprocess.run(engine.command([
            sys.executable, "-c", script, engine.endpoint(nova.endpoint),
            engine.database_url(postgresql_url), host.address]),
            capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    versions, one, reached = json.loads(done.stdout)
    assert versions >= 1 and one == 1
    # The unreachable route: refused at once, by this side's own kernel.
    assert reached == f"OSError {errno.EHOSTUNREACH}"
    # From the root namespace the host answers all the while.
    assert connect(host.address, 22) == "answered"
    # Its proxies listen on its side of the veth only.
    assert all(p.listen_host == engine.namespace.gateway
               for p in engine.proxies) and len(engine.proxies) == 2
    database = sa.engine.make_url(engine.database_url(postgresql_url))
    assert database.host == engine.namespace.gateway


def test_a_bmc_powering_off_takes_the_link_and_nova_compute(
        netlab, tmp_path):  # noqa: F811
    stopped = []
    host = netlab.add_host("compute-1", stop_compute=stopped.append)
    with RedfishBmc(tmp_path / "bmc", fast=True) as bmc:
        host.link_bmc(bmc)
        assert host.link_up and connect(host.address, 22) == "answered"
        force_off(bmc)
        wait_until(lambda: not host.link_up, 10, what="the link down")
        assert bmc.power_state() == "Off"
    assert stopped == ["compute-1"]
    assert connect(host.address, 22) == "timeout"


def force_off(bmc: RedfishBmc) -> None:
    token = base64.b64encode(
        f"{bmc.username}:{bmc.password}".encode()).decode()
    request = urllib.request.Request(
        f"{bmc.address}{bmc.system}/Actions/ComputerSystem.Reset",
        data=json.dumps({"ResetType": "ForceOff"}).encode(), method="POST",
        headers={"Authorization": f"Basic {token}",
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status in (200, 202, 204)


def test_close_deletes_every_namespace_and_veth(netlab):  # noqa: F811
    netlab.add_host("compute-1")
    netlab.engine_namespace()
    names = list(netlab._namespaces)
    netlab.close()
    left = set(re.findall(r"\brt\d+[he]\d+\b",
                          ip("netns", "list") + ip("-o", "link", "show")))
    assert left.isdisjoint(names), left


def test_two_hosts_do_not_share_an_address(netlab):  # noqa: F811
    first = netlab.add_host("compute-1", ports=(22,))
    second = netlab.add_host("compute-2", ports=(22,))
    assert first.address != second.address
    first.power_loss()
    assert connect(second.address, 22) == "answered"
    assert connect(first.address, 22) == "timeout"
