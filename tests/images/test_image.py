"""The image itself: what it runs as, what it carries, and what it must
not carry."""

import io
import json
import re
import tarfile

import pytest

from tests.bmc import free_port
from tests.fakenova.server import wait_until
from tests.images.kolla import detached
from tests.images.kolla import podman

pytestmark = pytest.mark.images

# Directories a deployment mounts or fills at run time, and the build's
# secrets: the image has no file there (a config with credentials would
# be in every container).
RUNTIME_CONFIG = ("etc/masakari/", "etc/recovery/",
                  "var/lib/kolla/config_files/")
# An ini option that carries a credential, with a value.
CREDENTIAL = re.compile(
    rb"^\s*(password|secret|token|connection|transport_url)\s*=\s*\S",
    re.IGNORECASE | re.MULTILINE)


def test_the_service_user_and_what_fencing_needs(image):
    inspected = json.loads(podman("image", "inspect", image).stdout)[0]
    assert inspected["Config"]["User"] == "masakari"
    assert inspected["Config"]["Cmd"] == ["kolla_start"]
    ran = podman("run", "--rm", image, "sh", "-c",
                 "id -un; for c in fence_ipmilan fence_redfish fence_kdump"
                 " ipmitool healthcheck_curl kolla_start masakari-engine"
                 " recovery uwsgi; do command -v $c || exit 1; done;"
                 " python3 -c 'import rados, rbd'")
    lines = ran.stdout.split()
    assert lines[0] == "masakari"
    assert len(lines) == 10, ran.stdout


def test_no_secret_in_the_image(image, tmp_path):
    inspected = json.loads(podman("image", "inspect", image).stdout)[0]
    names = [e.split("=", 1)[0] for e in inspected["Config"]["Env"]]
    assert not [n for n in names if re.search(
        "PASSWORD|SECRET|TOKEN|KEY|CERT|CREDENTIAL", n)], names
    archive = tmp_path / "image.tar"
    podman("image", "save", "--format", "docker-archive", "--output",
           str(archive), image, timeout=300)
    found = []
    with tarfile.open(archive) as outer:
        for member in outer:
            if not member.name.endswith(".tar"):
                continue
            layer = outer.extractfile(member)
            assert layer is not None
            with tarfile.open(fileobj=io.BytesIO(layer.read())) as inner:
                for entry in inner:
                    path = entry.name.lstrip("./")
                    if not entry.isfile():
                        continue
                    if path.startswith(RUNTIME_CONFIG) or path.startswith(
                            "run/secrets/") or "pip.conf" in path:
                        found.append(path)
                    elif path.startswith("etc/") and path.endswith(
                            (".conf", ".ini")):
                        text = inner.extractfile(entry).read()
                        if CREDENTIAL.search(text):
                            found.append(path)
    assert found == []


def test_the_engine_logs_to_stdout_and_stops_on_sigterm(image, tmp_path):
    """Outside Kolla (Kubernetes, a plain podman run), with no log file
    configured: the engine's log lines are the container's stdout, and
    a stop (SIGTERM, through dumb-init) ends it cleanly."""
    port = free_port()
    (tmp_path / "recovery.conf").write_text(
        f"[api]\nhost = 127.0.0.1\nport = {port}\nauth_strategy = noauth\n"
        f"\n[database]\nconnection = sqlite:////var/lib/masakari/r.sqlite\n"
        f"\n[nova]\nauth_type = none\n"
        f"endpoint_override = http://127.0.0.1:9/v2.1\n")
    tmp_path.chmod(0o755)  # the masakari user reads it
    conf = "/etc/recovery/recovery.conf"
    with detached(f"recovery-test-engine-{port}",
                  "--volume", f"{tmp_path}:/etc/recovery:ro", image, "sh",
                  "-c", f"recovery --config-file {conf} db upgrade"
                  f" && exec recovery-engine --config-file {conf}") as name:
        # "Serving on": the engine runs, its own stop handlers in place
        # ("Listening on", logged earlier, is before them).
        wait_until(lambda: f"Serving on 127.0.0.1:{port}" in podman(
            "logs", name).stdout, 60, interval=0.2,
            what="the engine's log line on stdout")
        # Kolla's PID 1, which passes the stop on to the engine.
        assert podman("exec", name, "cat", "/proc/1/comm").stdout == (
            "dumb-init\n")
        podman("stop", "--time", "30", name, timeout=60)
        state = json.loads(podman("inspect", name).stdout)[0]["State"]
        logs = podman("logs", name)
        assert state["ExitCode"] == 0, logs.stdout + logs.stderr
        assert "recovery.engine [-] Stopped" in logs.stdout
