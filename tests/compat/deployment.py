"""recovery-engine deployed as a cloud's ``instance-ha`` service.

The fake Keystone (tests/fakekeystone.py) issues the tokens; its catalog
has the Nova given as ``compute`` and the engine as ``instance-ha``; the
engine checks every token with it through keystonemiddleware (``[api]
auth_strategy = keystone``), as in a cloud. ``clouds.yaml`` has its two
users under the cloud names Masakari's functional tests read by default:
``devstack-admin`` (admin) and ``devstack`` (a member of ``demo``).
Their tokens are those the test Novas read (tests/integration/realnova
harness: ENGINE_TOKEN, OWNER_TOKEN).
"""

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path

from tests.fakekeystone import FakeKeystone
from tests.fakekeystone import nova_user
from tests.functional.engine_process import EngineProcess

ADMIN = nova_user("admin", "admin-secret", "admin", ("admin",))
DEMO = nova_user("demo", "demo-secret", "demo", ("member", "reader"))
# keystonemiddleware's own user, to validate the callers' tokens.
SERVICE = nova_user("recovery", "recovery-secret", "service", ("service",))
CLOUDS = {"devstack-admin": ADMIN, "devstack": DEMO}


@dataclasses.dataclass
class Deployment:
    keystone: FakeKeystone
    engine: EngineProcess
    clouds: Path

    def env(self) -> dict[str, str]:
        """An environment for clients: this clouds.yaml, no OS_* else."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("OS_")}
        return {**env, "OS_CLIENT_CONFIG_FILE": str(self.clouds)}


@contextlib.contextmanager
def deployed(workdir: Path, nova_endpoint: str,
             project_in_url: bool = True) -> Iterator[Deployment]:
    """The engine at ``/v1/<project_id>`` in the catalog (as clouds
    register Masakari), or at ``/v1``."""
    with FakeKeystone(nova_endpoint,
                      users=(ADMIN, DEMO, SERVICE)) as keystone:
        engine = EngineProcess(workdir, nova_endpoint, poll_interval=0.2,
                               extra=_keystone_auth(keystone.url))
        try:
            engine.start()
            path = "/v1/$(project_id)s" if project_in_url else "/v1"
            keystone.endpoints["instance-ha"] = (
                f"http://127.0.0.1:{engine.port}{path}")
            clouds = workdir / "clouds.yaml"
            clouds.write_text(json.dumps(_clouds(keystone.url)))
            yield Deployment(keystone, engine, clouds)
        finally:
            engine.close()


def _keystone_auth(url: str) -> str:
    return (f"\n[api]\nauth_strategy = keystone\n\n"
            f"[keystone_authtoken]\nwww_authenticate_uri = {url}\n"
            f"auth_url = {url}\nauth_type = password\n"
            f"username = {SERVICE.name}\npassword = {SERVICE.password}\n"
            f"project_name = {SERVICE.project}\nuser_domain_id = default\n"
            f"project_domain_id = default\ninterface = public\n"
            f"http_connect_timeout = 5\n")


def _clouds(url: str) -> dict:
    """clouds.yaml (JSON is YAML)."""
    return {"clouds": {name: {
        "auth_type": "password",
        "auth": {"auth_url": url, "username": user.name,
                 "password": user.password, "project_name": user.project,
                 "user_domain_id": "default",
                 "project_domain_id": "default"},
        "region_name": "RegionOne", "identity_api_version": "3",
        "api_timeout": 30,
    } for name, user in CLOUDS.items()}}
