"""The Ceph storage fence without a Ceph: its settings (each mistake one
line at load), the blocklist's answer as Ceph 16 gives it, which disks
a fence covers, and the storage addresses. The fence itself, on a real
Ceph, is in tests/functional/test_ceph_fence.py."""

import os
import sys

import pytest
from oslo_config import cfg

from recovery import exception
from recovery.conf import fencing as fencing_conf
from recovery.fencing import load_fencing
from recovery.fencing.ceph_client import Entry
from recovery.fencing.ceph_client import parse_blocklist
from recovery.fencing.ceph_host import disks
from recovery.fencing.ceph_host import resolve
from recovery.fencing.ceph_host import uncovered
from recovery.models import Server

UUID = "6f0c5c52-3d4e-4b55-9c0e-2f3c1d1b9a01"


def load(tmp_path, ini: str):
    path = tmp_path / "fencing.ini"
    path.write_text(ini)
    os.chmod(path, 0o600)
    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf([])
    conf.set_override("credentials_file", str(path), "fencing")
    return load_fencing(conf)


def device(tmp_path, **keys: str) -> str:
    """A credentials file: compute-1 fenced by [device:ceph] with these
    keys over working defaults (a readable ceph.conf and keyring)."""
    (tmp_path / "ceph.conf").write_text("[global]\n")
    (tmp_path / "keyring").write_text("[client.recovery]\n")
    values = {"driver": "ceph", "ceph_conf": str(tmp_path / "ceph.conf"),
              "keyring": str(tmp_path / "keyring"),
              "storage_address": "{host}-storage", **keys}
    lines = "".join(f"{key} = {value}\n" for key, value in values.items()
                    if value is not None)
    return f"[compute-1]\nlevel1 = ceph\n\n[device:ceph]\n{lines}"


def config_error(tmp_path, ini: str) -> str:
    with pytest.raises(exception.ConfigError) as error:
        load(tmp_path, ini)
    message = str(error.value)
    assert "\n" not in message
    return message


# -- settings: one line per mistake, at load --------------------------------

def test_a_keyring_that_does_not_exist(tmp_path):
    message = config_error(tmp_path, device(
        tmp_path, keyring="/nonexistent/ceph.client.recovery.keyring"))
    assert message == (
        f"{tmp_path}/fencing.ini [device:ceph] keyring: keyring "
        f"/nonexistent/ceph.client.recovery.keyring cannot be read: No "
        f"such file or directory")


def test_the_default_keyring_is_the_users(tmp_path):
    message = config_error(tmp_path, device(tmp_path, keyring=None,
                                            ceph_user="fence"))
    assert "keyring /etc/ceph/ceph.client.fence.keyring cannot be read" in (
        message)


def test_a_ceph_conf_that_does_not_exist(tmp_path):
    message = config_error(tmp_path, device(tmp_path,
                                            ceph_conf="/nonexistent.conf"))
    assert "ceph_conf: ceph.conf /nonexistent.conf cannot be read" in message


@pytest.mark.parametrize("expire", ["600", "3599.9", "-1", "a month", "inf"])
def test_an_expiry_under_an_hour_is_refused(tmp_path, expire):
    message = config_error(tmp_path, device(tmp_path, expire=expire))
    assert message.startswith(f"{tmp_path}/fencing.ini [device:ceph] "
                              f"expire: '{expire}'")


def test_an_unknown_key(tmp_path):
    message = config_error(tmp_path, device(tmp_path, expiry="86400"))
    assert "unknown key 'expiry'" in message


def test_a_ceph_key_in_another_drivers_section(tmp_path):
    message = config_error(tmp_path, (
        "[compute-1]\ndriver = redfish\naddress = https://bmc\n"
        "username = u\npassword = p\nexpire = 86400\n"))
    assert message == (f"{tmp_path}/fencing.ini [compute-1] expire: "
                       f"'expire' is a key of driver ceph only (set it in "
                       f"the section that says driver = ceph)")


def test_a_ceph_device_takes_no_bmc_keys(tmp_path):
    message = config_error(tmp_path, device(tmp_path, address="10.0.0.1"))
    assert "driver ceph takes no 'address'" in message


def test_the_storage_address_is_needed(tmp_path):
    message = config_error(tmp_path, device(tmp_path, storage_address=None))
    assert message.startswith("driver ceph needs 'storage_address'")


@pytest.mark.parametrize("address", ["http://x", "a b/c", "{hostname}"])
def test_a_storage_address_that_is_no_name(tmp_path, address):
    message = config_error(tmp_path, device(tmp_path,
                                            storage_address=address))
    assert "is not a host name or IP address" in message


def test_a_watch_timeout_must_be_positive(tmp_path):
    message = config_error(tmp_path, device(tmp_path, watch_timeout="0"))
    assert "'0' is not a watch timeout in seconds" in message


def test_without_the_bindings_the_error_names_the_packages(tmp_path,
                                                          monkeypatch):
    monkeypatch.setitem(sys.modules, "rados", None)   # import fails
    message = config_error(tmp_path, device(tmp_path))
    assert message.startswith("fencing driver ceph needs Ceph's Python "
                              "bindings (")
    assert "install python3-rados and python3-rbd" in message


# -- the blocklist's answer --------------------------------------------------

def test_blocklist_ls_is_two_arrays_back_to_back():
    out = (b'[{"addr":"127.0.0.10:0/0","until":"2026-12-28T22:43:41+0000"},'
           b'{"addr":"[2001:db8::5]:0/3812","until":"2026-11-29T00:40:21"}]'
           b'[{"range":"10.0.0.0/24","until":"2026-11-29T00:40:21"}]')
    assert parse_blocklist(out) == [
        Entry("127.0.0.10:0/0", "2026-12-28T22:43:41+0000"),
        Entry("[2001:db8::5]:0/3812", "2026-11-29T00:40:21")]
    assert parse_blocklist(b"") == []
    with pytest.raises(exception.FencingError, match="not its JSON list"):
        parse_blocklist(b"127.0.0.10:0/0 2026-12-28T22:43:41+0000\n")


@pytest.mark.parametrize("addr, ip, client", [
    ("127.0.0.10:0/0", "127.0.0.10", True),
    ("127.0.0.10:0/2914641195", "127.0.0.10", True),
    ("[2001:db8:0::5]:0/12", "2001:db8::5", True),
    ("10.0.0.4:6801/1234", "10.0.0.4", False),     # a daemon's
])
def test_an_entry_names_its_ip_and_whether_a_client_is_meant(addr, ip,
                                                              client):
    assert (Entry(addr, "").ip, Entry(addr, "").client) == (ip, client)


# -- which disks a fence covers ---------------------------------------------

def server(**disks) -> Server:
    return Server(id=UUID, name="vm", host="compute-1", vm_state="active",
                  task_state=None, status="ACTIVE", locked=False,
                  locked_reason=None, metadata={}, **disks)


IMAGES = {"vms": {f"{UUID}_disk", f"{UUID}_disk.swap", "other_disk"},
          "volumes": {"volume-v1"}, "volumes-ssd": {"volume-v2"}}


@pytest.mark.parametrize("disks_, pool, expected", [
    ({"image_id": "img"}, "vms", None),
    ({"image_id": "img", "swap_mb": 512, "ephemeral_gb": 1}, "vms", None),
    ({"volume_ids": ("v1", "v2")}, None, None),
    ({"image_id": "img"}, None,
     "its root disk (from image img) is taken as local: no ephemeral_pool "
     "is declared for this Ceph fence"),
    ({"image_id": "img"}, "other",
     f"its root disk {UUID}_disk is not in Ceph pool other (a local disk?)"),
    ({"volume_ids": ("v1",), "swap_mb": 512}, None,
     "its swap disk (512 MB) is taken as local: no ephemeral_pool is "
     "declared for this Ceph fence"),
    ({"volume_ids": ("v1",), "ephemeral_gb": 10}, None,
     "its ephemeral disk (10 GB) is taken as local: no ephemeral_pool is "
     "declared for this Ceph fence"),
    ({"volume_ids": ("v1", "v9")}, None,
     "volume v9: no image volume-v9 in Ceph pool(s) volumes, volumes-ssd"),
    ({}, "vms", "Nova shows no root disk (neither an image nor a volume)"),
])
def test_coverage_names_each_disk_that_is_not_on_this_ceph(disks_, pool,
                                                            expected):
    assert uncovered(server(**disks_), pool, ("volumes", "volumes-ssd"),
                     IMAGES) == expected


def test_volumes_without_volume_pools_are_not_covered():
    assert uncovered(server(volume_ids=("v1",)), "vms", (), IMAGES) == (
        "volume v1 is taken as not on this Ceph: no volume_pools are "
        "declared")


def test_the_disks_whose_watchers_count():
    found = disks([server(image_id="img", volume_ids=("v2", "v9"))], "vms",
                  ("volumes", "volumes-ssd"), IMAGES)
    assert found == [("vms", f"{UUID}_disk"), ("vms", f"{UUID}_disk.swap"),
                     ("volumes-ssd", "volume-v2")]


# -- storage addresses -------------------------------------------------------

def test_literal_addresses_and_names_resolve_in_order_once_each():
    assert resolve(["10.0.0.5", "localhost", "127.0.0.1", "2001:db8::1"],
                   5.0, "dev")[:2] == ["10.0.0.5", "127.0.0.1"]
    assert resolve(["2001:0db8::1"], 5.0, "dev") == ["2001:db8::1"]


def test_a_name_that_does_not_resolve_is_named():
    with pytest.raises(exception.FencingError,
                       match="dev: storage address compute-1.invalid does "
                             "not resolve"):
        resolve(["compute-1.invalid"], 5.0, "dev")
