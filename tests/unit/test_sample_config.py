"""etc/recovery.conf is generated; this fails when it is stale."""

import os

from oslo_config import generator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_sample_config_is_current(tmp_path):
    generated = tmp_path / "recovery.conf"
    generator.main(["--config-file",
                    os.path.join(ROOT, "etc/oslo-config-generator/"
                                       "recovery.conf"),
                    "--output-file", str(generated)])
    with open(os.path.join(ROOT, "etc/recovery.conf")) as committed:
        assert committed.read() == generated.read_text(), (
            "etc/recovery.conf is stale: run 'tox -e genconfig'")


def test_sample_lists_nova_auth_and_adapter_options():
    with open(os.path.join(ROOT, "etc/recovery.conf")) as sample:
        text = sample.read()
    for option in ("#auth_type", "#auth_url", "#application_credential_id",
                   "#endpoint_override", "#region_name", "#valid_interfaces",
                   "#timeout = 30", "#host_failure_recovery_threads = 3"):
        assert option in text
