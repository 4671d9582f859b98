"""A Masakari ``masakari.conf`` read as it is (recovery/conf/masakari.py):
each option Masakari and recovery share reaches recovery's option under
Masakari's name and group, Masakari's Nova user becomes ``[nova]``'s
password auth, and each option recovery does not read is logged once,
with its reason."""

import importlib.util
import logging
import pathlib

import pytest
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery.conf import masakari

TOOL = pathlib.Path(__file__).parents[2] / "tools" / "masakari_conf_table.py"


def load(tmp_path, text: str) -> cfg.ConfigOpts:
    """recovery's options, read from ``text`` as ``--config-file``."""
    path = tmp_path / "masakari.conf"
    path.write_text(text)
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="recovery",
         default_config_files=[])
    return conf


def table_tool():
    spec = importlib.util.spec_from_file_location("masakari_conf_table",
                                                  TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (Masakari's group, name, value as written) -> (recovery's group, option,
# value read).
MAPPED = [
    ("DEFAULT", "host_failure_recovery_threads", "7",
     "DEFAULT", "host_failure_recovery_threads", 7),
    ("host_failure", "evacuate_all_instances", "false",
     "host_failure", "evacuate_all_instances", False),
    ("host_failure", "ignore_instances_in_error_state", "true",
     "host_failure", "ignore_instances_in_error_state", True),
    ("host_failure", "add_reserved_host_to_aggregate", "true",
     "host_failure", "add_reserved_host_to_aggregate", True),
    ("host_failure", "service_disable_reason", "Masakari detected it",
     "host_failure", "service_disable_reason", "Masakari detected it"),
    ("host_failure", "ha_enabled_instance_metadata_key", "HA",
     "host_failure", "ha_enabled_instance_metadata_key", "HA"),
    ("instance_failure", "process_all_instances", "true",
     "instance_failure", "process_all_instances", True),
    ("process_failure", "service_disable_reason", "process down",
     "process_failure", "disable_reason", "process down"),
    ("DEFAULT", "duplicate_notification_detection_interval", "42",
     "api", "duplicate_notification_detection_interval", 42),
    ("DEFAULT", "masakari_api_listen", "192.0.2.10",
     "api", "host", "192.0.2.10"),
    ("DEFAULT", "masakari_api_listen_port", "15869", "api", "port", 15869),
    ("oslo_middleware", "max_request_body_size", "4096",
     "api", "max_request_body_size", 4096),
    ("DEFAULT", "wait_period_after_evacuation", "95",
     "host_failure", "evacuation_timeout", 95.0),
    ("DEFAULT", "verify_interval", "2", "host_failure", "poll_interval", 2.0),
    ("DEFAULT", "os_region_name", "RegionTwo", "nova", "region_name",
     "RegionTwo"),
    ("DEFAULT", "nova_api_insecure", "true", "nova", "insecure", True),
    ("DEFAULT", "nova_ca_certificates_file", "/etc/ssl/ca.pem",
     "nova", "cafile", "/etc/ssl/ca.pem"),
    ("database", "connection", "mysql+pymysql://m:p@db/masakari",
     "database", "connection", "mysql+pymysql://m:p@db/masakari"),
    ("database", "max_pool_size", "3", "database", "max_pool_size", 3),
]


@pytest.mark.parametrize("group,name,value,ours,option,expected", MAPPED,
                         ids=[f"{m[0]}.{m[1]}" for m in MAPPED])
def test_a_masakari_option_reaches_recoverys(tmp_path, group, name, value,
                                            ours, option, expected):
    conf = load(tmp_path, f"[{group}]\n{name} = {value}\n")
    read = conf if ours == "DEFAULT" else conf[ours]
    assert read[option] == expected


def test_recoverys_own_name_wins(tmp_path):
    conf = load(tmp_path, "[DEFAULT]\nmasakari_api_listen_port = 15869\n"
                          "os_region_name = Masakari\n\n"
                          "[api]\nport = 15870\n\n"
                          "[nova]\nregion_name = Recovery\n")
    assert (conf.api.port, conf.nova.region_name) == (15870, "Recovery")


KOLLA_USER = """[DEFAULT]
os_region_name = RegionOne
os_user_domain_name = default
os_project_domain_name = default
os_privileged_user_tenant = service
os_privileged_user_auth_url = http://keystone.example:5000
os_privileged_user_name = nova
os_privileged_user_password = n0va-secret
"""


def test_masakaris_nova_user_is_novas_password_auth(tmp_path):
    conf = load(tmp_path, KOLLA_USER)
    masakari.adopt(conf)
    auth = ks_loading.load_auth_from_conf_options(conf, "nova")
    assert conf.nova.auth_type == "password"
    elements = auth.get_cache_id_elements()
    assert {key: value for key, value in elements.items()
            if value is not None} == {
        "auth_url": "http://keystone.example:5000", "username": "nova",
        "password": "n0va-secret", "project_name": "service",
        "user_domain_name": "default", "project_domain_name": "default"}


def test_masakaris_domains_default_as_in_masakari(tmp_path):
    conf = load(tmp_path, "[DEFAULT]\nos_privileged_user_name = nova\n")
    masakari.adopt(conf)
    assert (conf.nova.user_domain_name, conf.nova.project_domain_name) == (
        "default", "default")


def test_novas_own_auth_wins_over_masakaris_user(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=masakari.LOG.name)
    conf = load(tmp_path, KOLLA_USER + "\n[nova]\nauth_type = admin_token\n"
                                       "endpoint = http://nova:8774\n"
                                       "token = t\n")
    masakari.adopt(conf)
    auth = ks_loading.load_auth_from_conf_options(conf, "nova")
    assert type(auth).__name__ == "Token"
    assert "username" not in conf.nova
    assert lines(caplog) == [(logging.INFO, (
        "Masakari options [DEFAULT] os_privileged_user_* are not used: "
        "[nova] names its own auth"))]


def test_a_config_without_masakaris_user_keeps_novas_defaults(conf):
    masakari.adopt(conf)
    assert conf.nova.auth_type is None
    assert conf.nova.valid_interfaces == ["internal", "public"]


@pytest.mark.parametrize("info,expected", [
    ("compute:nova:publicURL", ("compute", "nova", ["public"])),
    ("compute::internalURL", ("compute", None, ["internal"])),
    ("compute:nova:admin", ("compute", "nova", ["admin"])),
])
def test_masakaris_catalog_entry_is_novas_default(tmp_path, info, expected):
    conf = load(tmp_path, f"[DEFAULT]\nnova_catalog_admin_info = {info}\n")
    masakari.adopt(conf)
    nova = conf.nova
    assert (nova.service_type, nova.service_name,
            nova.valid_interfaces) == expected


def test_novas_own_catalog_options_win(tmp_path):
    conf = load(tmp_path, "[DEFAULT]\n"
                          "nova_catalog_admin_info = compute:nova:publicURL\n"
                          "\n[nova]\nvalid_interfaces = internal\n")
    masakari.adopt(conf)
    assert conf.nova.valid_interfaces == ["internal"]


@pytest.mark.parametrize("info", ["compute:publicURL", "compute:nova:",
                                  ":nova:publicURL"])
def test_a_malformed_catalog_entry_is_a_config_error(tmp_path, info):
    conf = load(tmp_path, f"[DEFAULT]\nnova_catalog_admin_info = {info}\n")
    with pytest.raises(exception.ConfigError,
                       match="nova_catalog_admin_info.*compute:nova"):
        masakari.adopt(conf)


# Each option set -> the level of its one line.
IGNORED = [
    ("taskflow", "connection", "mysql+pymysql://m:secret@db/masakari",
     logging.INFO),
    ("coordination", "backend_url", "etcd3+http://etcd:2379", logging.INFO),
    ("DEFAULT", "wait_period_after_service_update", "180", logging.INFO),
    ("DEFAULT", "masakari_topic", "ha_engine", logging.INFO),
    ("DEFAULT", "rpc_response_timeout", "60", logging.INFO),
    ("oslo_messaging_notifications", "topics", "notifications",
     logging.INFO),
    ("DEFAULT", "wait_period_after_power_off", "120", logging.WARNING),
    ("instance_failure", "ha_enabled_instance_metadata_key", "HA",
     logging.WARNING),
    ("taskflow_driver_recovery_flows", "host_auto_failure_recovery_tasks",
     "pre:['disable_compute_service_task']", logging.WARNING),
    ("wsgi", "ssl_cert_file", "/etc/cert.pem", logging.WARNING),
    ("wsgi", "keep_alive", "false", logging.INFO),
    ("DEFAULT", "collect-timing", "true", logging.INFO),
    ("database", "slave_connection", "mysql+pymysql://r@db/masakari",
     logging.INFO),
]


def lines(caplog) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name == masakari.LOG.name]


@pytest.mark.parametrize("group,name,value,level", IGNORED,
                         ids=[f"{i[0]}.{i[1]}" for i in IGNORED])
def test_an_unused_option_says_so_once(tmp_path, caplog, group, name, value,
                                       level):
    caplog.set_level(logging.INFO, logger=masakari.LOG.name)
    conf = load(tmp_path, f"[{group}]\n{name} = {value}\n")
    masakari.adopt(conf)
    masakari.adopt(conf)        # the engine loads Nova twice
    reason = masakari.unused(group, name).reason
    assert lines(caplog) == [
        (level, f"Masakari option [{group}] {name} is not used: {reason}")]
    assert "secret" not in caplog.text


def test_options_recovery_reads_are_not_called_unused(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=masakari.LOG.name)
    conf = load(tmp_path, KOLLA_USER + "debug = true\n"
                          "masakari_api_listen = 127.0.0.1\n\n"
                          "[database]\nconnection = sqlite://\n"
                          "max_retries = -1\n\n"
                          "[host_failure]\nevacuate_all_instances = true\n\n"
                          "[keystone_authtoken]\nauth_type = password\n"
                          "memcached_servers = m:11211\n\n"
                          "[healthcheck]\ndetailed = true\n")
    masakari.adopt(conf)
    assert lines(caplog) == []


def test_every_masakari_option_has_a_verdict():
    """Masakari 22's every option (and what Kolla-Ansible writes) is read
    by recovery, under its name or another, or in the table of unused
    ones; none is both."""
    tool = table_tool()
    verdicts = tool.verdicts()
    assert [key for key in tool.options() if key not in verdicts] == []
    read = [(group, name) for group, name in tool.options()
            if not verdicts[(group, name)].startswith("not used")]
    assert [key for key in read if masakari.unused(*key)] == []


def test_no_unused_entry_is_read_by_recovery():
    """No option recovery registers, under its name or a deprecated one,
    falls under an entry of the unused table."""
    names = []
    for group, opt in table_tool().recovery_options():
        names.append((group, opt.dest))
        names += [(old.group or group, old.name)
                  for old in opt.deprecated_opts]
    assert [key for key in names if masakari.unused(*key)] == []


def test_every_unused_entry_names_a_masakari_option():
    options = table_tool().options()
    for entry in masakari.UNUSED:
        for pattern in entry.names:
            one = masakari.Unused(entry.group, (pattern,), entry.reason)
            assert any(one.matches(group, name) for group, name in options), (
                entry.group, pattern)


def test_the_table_lists_every_option_once():
    table = table_tool().table()
    assert "UNCLASSIFIED" not in table
    assert "| [taskflow] `connection` | not used: the taskflow" in table
    assert ("| [DEFAULT] `masakari_api_listen` | read as [api] host |"
            in table)


def test_the_docs_show_the_table():
    """The table on the "Switching from Masakari" page is the tool's: an
    option mapped or dropped without the page saying so fails here."""
    page = (TOOL.parents[1] / "doc" / "source" / "admin"
            / "masakari.md").read_text(encoding="utf-8")
    assert table_tool().table().strip() in page


def test_an_oslo_config_that_keeps_its_files_elsewhere_fails_nothing(
        tmp_path, caplog):
    """The files' options are oslo.config's private state: a release that
    keeps them elsewhere lists none, and says so, rather than stop the
    engine's start."""
    conf = load(tmp_path, "[taskflow]\nconnection = sqlite://\n")
    conf._namespace = object()
    with caplog.at_level(logging.WARNING):
        assert masakari._set_in_files(conf) == []
    assert "Cannot tell which Masakari options" in caplog.text
