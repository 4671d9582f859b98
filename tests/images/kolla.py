"""Kolla, as a deployment runs recovery's image: Kolla-Ansible's own
templates rendered into a config directory, and containers started the
way Kolla-Ansible starts them (``kolla_start``, host network, the config
directory at /var/lib/kolla/config_files, the log volume at
/var/log/kolla).

The templates are Kolla-Ansible's, read from its wheel (``tox -e images``
installs ``kolla-ansible`` without its dependencies, as a test tool):
masakari.conf.j2 and the masakari-api and masakari-engine config.json
templates of its masakari role, and the uwsgi.ini.j2 of its
service-uwsgi-config role. They are rendered with jinja2, as Ansible
renders them, with the variables a deployment without TLS, memcached or
a policy file gives them. ``merge`` is Kolla-Ansible's merge_configs: an
operator's override file (/etc/kolla/config/masakari.conf) over the
rendered file, option by option.
"""

from __future__ import annotations

import configparser
import contextlib
import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2

REPO = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = REPO / "containers" / "containers.conf"
ROLES = Path(sys.prefix) / "share" / "kolla-ansible" / "ansible" / "roles"
IMAGE = os.environ.get("RECOVERY_TEST_IMAGE", "localhost/recovery:latest")
CONFIG_DIR = "/var/lib/kolla/config_files"
# Seconds for one podman command that does not wait on a service.
PODMAN_TIMEOUT = 120


def _bool(value: Any) -> bool:
    """Ansible's ``bool`` filter, for the values these templates get."""
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "on", "1", "true")
    return bool(value)


def _not_rendered(name: str) -> Any:
    def fail(*args: Any) -> Any:
        raise AssertionError(f"Kolla-Ansible's filter {name} is not "
                             f"rendered here")
    return fail


def render(template: str, **variables: Any) -> str:
    """``template`` (a path under Kolla-Ansible's roles) rendered."""
    return render_file(ROLES / template, **variables)


def render_file(path: Path, **variables: Any) -> str:
    """A template rendered as Ansible renders it, every variable
    required."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    env.filters["bool"] = _bool
    # Kolla-Ansible's own filters, in blocks these variables leave out
    # (memcached): they must exist to compile, never to run.
    for name in ("kolla_address", "put_address_in_context"):
        env.filters[name] = _not_rendered(name)
    return env.from_string(path.read_text()).render(**variables)


def masakari_conf(service_name: str, *, listen_port: int, keystone: str,
                  database: dict[str, str], transport_url: str,
                  passwords: dict[str, str]) -> str:
    """masakari.conf.j2 for ``service_name`` (masakari-api or
    masakari-engine). ``database``: user, password, address, name, as
    Kolla-Ansible's masakari_database_* (a MariaDB URL)."""
    return render(
        "masakari/templates/masakari.conf.j2",
        service_name=service_name, masakari_logging_debug=False,
        api_interface_address="127.0.0.1", masakari_api_port=listen_port,
        rpc_transport_url=transport_url, notify_transport_url=transport_url,
        openstack_region_name="RegionOne",
        default_user_domain_id="default", default_project_domain_id="default",
        default_user_domain_name="Default",
        default_project_domain_name="Default",
        keystone_internal_url=keystone, keystone_public_url=keystone,
        nova_keystone_user="nova", nova_keystone_password=passwords["nova"],
        masakari_keystone_user="masakari",
        masakari_keystone_password=passwords["masakari"],
        openstack_cacert="",
        masakari_database_user=database["user"],
        masakari_database_password=database["password"],
        masakari_database_address=database["address"],
        masakari_database_name=database["name"],
        masakari_database_enable_tls_internal=False,
        database_connection_recycle_time=10, database_max_pool_size=2,
        enable_memcached=False, enable_ceilometer=False,
        om_enable_rabbitmq_tls=False, om_enable_rabbitmq_stream_fanout=False,
        masakari_coordination_backend="")


def config_json(service_name: str) -> str:
    """The role's config.json for ``service_name``."""
    return render(f"masakari/templates/{service_name}.json.j2",
                  container_config_directory=CONFIG_DIR,
                  kolla_copy_ca_into_containers=False)


def uwsgi_ini(port: int, workers: int = 2) -> str:
    """masakari-api-uwsgi.ini: the service-uwsgi-config role's template,
    with the masakari role's variables (tasks/config.yml) and the module
    its masakari_services names."""
    return render(
        "service-uwsgi-config/templates/uwsgi.ini.j2",
        service_uwsgi_config_host="127.0.0.1",
        service_uwsgi_config_http_port=port,
        service_uwsgi_config_tls_backend=False,
        service_uwsgi_config_log_dir="masakari",
        service_uwsgi_config_log_file="masakari-api-uwsgi.log",
        service_uwsgi_config_log_file_chmod="644",
        service_uwsgi_config_module="masakari.wsgi.api:application",
        service_uwsgi_config_uid="masakari",
        service_uwsgi_config_workers=workers,
        service_uwsgi_config_socket_port="",
        service_uwsgi_config_worker_timeout=80,
        kolla_base_distro="debian")


def merge(rendered: str, override: str) -> str:
    """Kolla-Ansible's merge_configs: ``override``'s options replace or
    join ``rendered``'s, section by section."""
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment, method-assign]
    parser.read_string(rendered)
    parser.read_string(override)
    out = io.StringIO()
    parser.write(out)
    return out.getvalue()


def podman(*args: str, timeout: float = PODMAN_TIMEOUT,
           check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)})
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit "
                             f"{result.returncode}\n{result.stderr}")
    return result


@contextlib.contextmanager
def detached(name: str, *options_and_image: str) -> Iterator[str]:
    """``podman run --detach --name NAME --network host ...``; the
    container is removed when the block ends. Yields its name."""
    podman("run", "--detach", "--name", name, "--network", "host",
           *options_and_image)
    try:
        yield name
    finally:
        podman("rm", "--force", "--time", "5", name, check=False)


class Service:
    """One Kolla service's container: its config directory (what
    Kolla-Ansible writes to /etc/kolla/<service>/) and a named volume for
    /var/log/kolla (Kolla-Ansible's kolla_logs), which starts with the
    image's /var/log/kolla."""

    def __init__(self, workdir: Path, service_name: str,
                 files: dict[str, str]) -> None:
        self.service_name = service_name
        self.name = f"recovery-test-{service_name}-{uuid.uuid4().hex[:8]}"
        self.config = workdir / service_name
        self.volume = f"{self.name}-logs"
        self.config.mkdir()
        for name, text in files.items():
            (self.config / name).write_text(text)

    def _run(self, *options: str, timeout: float = PODMAN_TIMEOUT,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        environment = ("KOLLA_CONFIG_STRATEGY=COPY_ALWAYS",
                       f"KOLLA_SERVICE_NAME={self.service_name}")
        return podman(
            "run", *options, *(arg for e in environment
                               for arg in ("--env", e)),
            "--name", self.name, "--network", "host",
            "--volume", f"{self.config}:{CONFIG_DIR}:ro",
            "--volume", f"{self.volume}:/var/log/kolla", IMAGE,
            timeout=timeout, check=check)

    def bootstrap(self, timeout: float = 120) -> subprocess.CompletedProcess:
        """The bootstrap container: KOLLA_BOOTSTRAP set (empty), run to
        its end, removed."""
        return self._run("--rm", "--env", "KOLLA_BOOTSTRAP=",
                         timeout=timeout, check=False)

    def start(self) -> None:
        self._run("--detach")

    def running(self) -> bool:
        state = podman("inspect", "--format", "{{.State.Running}}",
                       self.name, check=False)
        return state.stdout.strip() == "true"

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *command, check=False)

    def output(self) -> str:
        """What the container wrote to stdout and stderr (kolla_start's
        lines, and a service's own when it logs there)."""
        logs = podman("logs", self.name, check=False)
        return logs.stdout + logs.stderr

    def log_files(self) -> str:
        """Everything the service wrote under /var/log/kolla."""
        found = podman("volume", "inspect", "--format", "{{.Mountpoint}}",
                       self.volume, check=False)
        if found.returncode != 0:
            return ""
        logs = Path(found.stdout.strip())
        return "".join(f"== {path}\n{path.read_text(errors='replace')}"
                       for path in sorted(logs.rglob("*")) if path.is_file())

    def env(self) -> list[str]:
        inspected = json.loads(podman("inspect", self.name).stdout)
        return list(inspected[0]["Config"]["Env"])

    def remove(self) -> None:
        podman("rm", "--force", "--time", "5", self.name, check=False)
        podman("volume", "rm", "--force", self.volume, check=False)
