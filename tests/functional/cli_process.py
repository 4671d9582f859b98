"""The ``recovery`` command as a real subprocess (green, as in production),
configured against a Nova endpoint (the fake or the real one)."""

import os
import subprocess
import sys

from tests.fakenova.placement import endpoint_for

LOCK_REASON = "Locked by recovery: host-failure evacuation"


def write_config(tmp_path, nova, threads=3, retries=3, poll_interval=0.05,
                 extra=""):
    """A config for ``nova`` (anything with an ``endpoint``)."""
    path = tmp_path / "recovery.conf"
    path.write_text(
        f"[DEFAULT]\nhost_failure_recovery_threads = {threads}\n\n"
        f"[host_failure]\npoll_interval = {poll_interval}\n"
        f"evacuation_timeout = 60\n{extra}\n"
        # As the real Nova harness: a heartbeat older than 3 s is gone.
        f"[safety]\nservice_down_time = 3\n\n"
        f"[nova]\nauth_type = admin_token\nendpoint = {nova.endpoint}\n"
        f"placement_endpoint_override = {endpoint_for(nova.endpoint)}\n"
        f"token = admin:admin:admin\ntimeout = 5\n"
        f"api_retries = {retries}\n"
        # No load balancer queues requests here: a request may reach Nova
        # at most 1 s past its timeout.
        f"late_request_margin = 1\n\n"
        f"[database]\nconnection = sqlite:///{tmp_path}/recovery.sqlite\n")
    return str(path)


def run_cli(config, *args):
    return subprocess.run(
        [sys.executable, "-m", "recovery.cmd.cli", "--config-file", config,
         *args], capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONWARNINGS": "ignore"})


def start_cli(config, *args):
    """The command in the background, to interrupt or race it."""
    return subprocess.Popen(
        [sys.executable, "-m", "recovery.cmd.cli", "--config-file", config,
         *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
