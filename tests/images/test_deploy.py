"""The deployment files (deploy/, devstack/), checked offline: what can
be run here without Kubernetes, Kolla-Ansible or DevStack."""

import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from oslo_config import cfg

from recovery import conf as recovery_conf
from tests.bmc import free_port
from tests.fakenova.server import wait_until
from tests.images import kolla

pytestmark = pytest.mark.images

DEPLOY = kolla.REPO / "deploy"
KUBERNETES_VERSION = "1.30.0"


def test_the_kubernetes_manifests_validate():
    validate = Path(sys.executable).with_name("kubernetes-validate")
    assert validate.exists(), "tox -e images installs kubernetes-validate"
    done = subprocess.run(
        [str(validate), "--kubernetes-version", KUBERNETES_VERSION, "--strict",
         str(DEPLOY / "kubernetes" / "recovery.yaml")],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(
        (DEPLOY / "kubernetes" / "recovery.yaml").read_text())]
    assert kinds == ["Secret", "Job", "Deployment", "Deployment", "Service"]


def test_the_kolla_ansible_globals_name_its_own_variables():
    """Every variable the globals example sets is one Kolla-Ansible
    defines (a typo would be ignored by Ansible, silently)."""
    ansible = kolla.ROLES.parent
    defined = set()
    for path in [*(ansible / "group_vars" / "all").glob("*.yml"),
                 ansible / "roles" / "masakari" / "defaults" / "main.yml"]:
        defined |= set(re.findall(r"^([a-z_]+):", path.read_text(),
                                  re.MULTILINE))
    shipped = yaml.safe_load(
        (DEPLOY / "kolla-ansible" / "globals.yml").read_text())
    assert set(shipped) - defined == set()
    assert shipped["masakari_api_image_full"] == (
        shipped["masakari_engine_image_full"])


def test_the_openstack_helm_values_use_one_image():
    values = yaml.safe_load(
        (DEPLOY / "openstack-helm" / "values.yaml").read_text())
    assert len(set(values["images"]["tags"].values())) == 1
    assert set(values["images"]["tags"]) == {
        "masakari_api", "masakari_engine", "masakari_db_sync"}


def test_the_devstack_plugin_writes_a_config_recovery_reads(tmp_path):
    """plugin.sh's stack post-config, with DevStack's functions standing
    in: recovery.conf as it writes it, read by recovery's own options,
    and the catalog entry masakari-monitors look for."""
    conf_path = tmp_path / "recovery.conf"
    calls = tmp_path / "calls"
    script = f"""
set -eu
DEST={tmp_path} SERVICE_HOST=192.0.2.10 SERVICE_PROTOCOL=http
STACK_USER=stack ENABLE_DEBUG_LOG_LEVEL=True REGION_NAME=RegionOne
KEYSTONE_SERVICE_URI=http://192.0.2.10/identity SERVICE_PASSWORD=pw
SERVICE_PROJECT_NAME=service SERVICE_DOMAIN_NAME=Default
RECOVERY_CONF_DIR={tmp_path} RECOVERY_CONF={conf_path}
enable_service() {{ echo "enable_service $*" >> {calls}; }}
is_service_enabled() {{ [[ "$1" == recovery-engine ]]; }}
sudo() {{ "$@"; }}
install() {{ :; }}
iniset() {{ python3 -c '
import configparser, sys
path, section, option, value = sys.argv[1:]
parser = configparser.RawConfigParser()
parser.optionxform = str
parser.read(path)
if section != "DEFAULT" and not parser.has_section(section):
    parser.add_section(section)
parser.set(section, option, value)
parser.write(open(path, "w"))' "$@"; }}
configure_keystone_authtoken_middleware() {{
    iniset "$1" keystone_authtoken auth_type password
    iniset "$1" keystone_authtoken username "$2"
}}
database_connection_url() {{ echo "mysql+pymysql://root:db@127.0.0.1/$1"; }}
for f in create_service_user get_or_create_service get_or_create_endpoint; do
    eval "$f() {{ echo \\"$f \\$*\\" >> {calls}; }}"
done
source {kolla.REPO}/devstack/settings
source {kolla.REPO}/devstack/plugin.sh stack post-config
"""
    done = subprocess.run(["bash", "-c", script], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(["--config-file", str(conf_path)], project="recovery")
    assert (conf.api.host, conf.api.port) == ("192.0.2.10", 15868)
    assert conf.api.auth_strategy == "keystone"
    assert conf.database.connection == (
        "mysql+pymysql://root:db@127.0.0.1/recovery")
    assert conf.host_failure_recovery_threads == 3
    recorded = calls.read_text().splitlines()
    assert recorded == [
        "enable_service recovery-engine",
        "create_service_user masakari admin",
        "get_or_create_service masakari instance-ha OpenStack High "
        "Availability (recovery)",
        "get_or_create_endpoint instance-ha RegionOne "
        "http://192.0.2.10:15868/v1/$(tenant_id)s"]


def _manifests() -> list[dict]:
    return list(yaml.safe_load_all(
        (DEPLOY / "kubernetes" / "recovery.yaml").read_text()))


def _container(kind: str, name: str) -> dict:
    for manifest in _manifests():
        if (manifest["kind"], manifest["metadata"]["name"]) == (kind, name):
            return manifest["spec"]["template"]["spec"]["containers"][0]
    raise AssertionError(f"no {kind} {name}")


def test_the_kubernetes_job_and_api_commands_run_in_the_image(
        image, postgresql_url, tmp_path):
    """The manifests' own commands (their args: the image's entrypoint,
    dumb-init, stays PID 1), in the image under podman, with the
    Secret's recovery.conf where a test must change it (the database
    here; a static token, as no Keystone answers): the Job upgrades the
    schema, and the API Deployment's uWSGI (on a free port of loopback
    rather than 0.0.0.0:15868) answers its readiness and liveness
    probes."""
    secret = _manifests()[0]["stringData"]
    token = tmp_path / "token"
    token.write_text("a-token-for-the-test-only\n")
    (tmp_path / "recovery.conf").write_text(kolla.merge(
        secret["recovery.conf"],
        f"[database]\nconnection = {postgresql_url}\n\n[api]\n"
        f"auth_strategy = token\ntoken_file = /etc/recovery/token\n"))
    for path in (tmp_path, token, tmp_path / "recovery.conf"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    mount = ("--volume", f"{tmp_path}:/etc/recovery:ro")
    job = _container("Job", "recovery-db-upgrade")
    done = kolla.podman("run", "--rm", "--network", "host", *mount, image,
                        *job["args"], check=False)
    assert done.returncode == 0, done.stdout + done.stderr

    api = _container("Deployment", "recovery-api")
    port = free_port()
    command = [f"127.0.0.1:{port}" if arg == "0.0.0.0:15868" else arg
               for arg in api["args"]]
    assert command != api["args"]
    env = [arg for e in api["env"]
           for arg in ("--env", f"{e['name']}={e['value']}")]
    with kolla.detached(f"recovery-test-k8s-api-{port}", *mount, *env,
                        image, *command) as name:
        for probe in (api["readinessProbe"], api["livenessProbe"]):
            url = f"http://127.0.0.1:{port}{probe['httpGet']['path']}"
            wait_until(lambda url=url: _status(url) == 200, 60,
                       interval=0.2, what=f"{url} to answer 200"
                       + kolla.podman("logs", name, check=False).stderr)


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None
