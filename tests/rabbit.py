"""RabbitMQ for the message-bus tests, and a real oslo.messaging
notification listener on it.

``require_rabbit``: the machine's RabbitMQ (127.0.0.1:5672, guest/guest,
as on CI); a test publishes on an exchange of its own (``exchange``) and
listens on a queue of the same name (a listener's pool), so tests never
see each other's messages; both are deleted when the test ends. (The
Notifier also declares the ``versioned_notifications.*`` queues, as for
Masakari: those are left alone.) Missing: skipped, or failed under
``CI=true``."""

import contextlib
import os
import queue
import signal
import socket
import subprocess
import time
import uuid

import kombu
import pytest
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery.bus import messaging
from recovery.bus import wire

URL = "rabbit://guest:guest@127.0.0.1:5672/"


def require_rabbit() -> str:
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
    except OSError as exc:
        message = f"no RabbitMQ on 127.0.0.1:5672 ({exc})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return URL


def exchange() -> str:
    return f"recovery-test-{uuid.uuid4().hex[:8]}"


def bus_conf(url: str, exchange: str) -> cfg.ConfigOpts:
    """A config that publishes with messagingv2 on ``exchange``."""
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([], project="recovery", default_config_files=[])
    messaging.load().get_notification_transport(conf)
    conf.set_override("transport_url", url)
    conf.set_override("control_exchange", exchange)
    conf.set_override("driver", ["messagingv2"],
                      group="oslo_messaging_notifications")
    return conf


def engine_config(url: str, exchange: str) -> str:
    """The lines that make a recovery-engine publish on ``exchange``."""
    return (f"\n[DEFAULT]\ntransport_url = {url}\n"
            f"control_exchange = {exchange}\n\n"
            f"[oslo_messaging_notifications]\ndriver = messagingv2\n")


class Endpoint:
    """What the listener receives: (priority, publisher_id, event_type,
    payload, context) in order."""

    def __init__(self):
        self.got = queue.Queue()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self.got.put(("info", publisher_id, event_type, payload, ctxt))

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self.got.put(("error", publisher_id, event_type, payload, ctxt))

    def until(self, done, timeout: float = 30.0) -> list[tuple]:
        """Every message received until ``done(received)`` is true."""
        received = []
        while not done(received):
            received.append(self.got.get(timeout=timeout))
        return received


@contextlib.contextmanager
def listening(conf: cfg.ConfigOpts, endpoint=None):
    """A notification listener on ``versioned_notifications`` of
    ``conf``'s exchange, for the ``with`` block, delivering to
    ``endpoint`` (default: a new ``Endpoint``)."""
    om = messaging.load()
    endpoint = endpoint or Endpoint()
    listener = om.get_notification_listener(
        om.get_notification_transport(conf), [om.Target(topic=wire.TOPIC)],
        [endpoint], executor="threading", pool=conf.control_exchange)
    listener.start()
    try:
        yield endpoint
    finally:
        listener.stop()
        listener.wait()
        _delete(conf.transport_url, conf.control_exchange)


def _delete(url: str, exchange: str) -> None:
    """The test's queue and exchange, off the shared broker."""
    with kombu.Connection(url.replace("rabbit://", "amqp://"),
                          connect_timeout=5) as connection:
        channel = connection.channel()
        channel.queue_delete(exchange)
        channel.exchange_delete(exchange)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class OwnBroker:
    """A RabbitMQ node of the test's own (Debian's rabbitmq-server, run
    as this user), on free ports with its files in ``workdir``: a test
    may stop it. Missing: skipped, or failed under ``CI=true``."""

    SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"

    def __init__(self, workdir):
        if not os.path.exists(self.SERVER):
            message = f"no {self.SERVER} (Debian's rabbitmq-server)"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"rabbit://guest:guest@127.0.0.1:{self.port}/"
        self.proc: subprocess.Popen | None = None

    def _env(self) -> dict[str, str]:
        base = self.workdir
        (base / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.port}\n")
        (base / "env.conf").write_text("")
        return {**os.environ, "HOME": str(base),
                "RABBITMQ_CONF_ENV_FILE": str(base / "env.conf"),
                "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
                "RABBITMQ_NODENAME": f"recovery-{base.name}@localhost",
                "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                "RABBITMQ_NODE_PORT": str(self.port),
                "RABBITMQ_DIST_PORT": str(_free_port()),
                "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
                "RABBITMQ_LOG_BASE": str(base / "log"),
                "RABBITMQ_LOGS": "-",
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "plugins"),
                "RABBITMQ_FEATURE_FLAGS_FILE": str(base / "feature_flags"),
                "RABBITMQ_PLUGINS_EXPAND_DIR": str(base / "plugins-expand"),
                "ERL_EPMD_ADDRESS": "127.0.0.1"}

    def start(self, timeout: float = 60.0) -> "OwnBroker":
        self.proc = subprocess.Popen(
            [self.SERVER], env=self._env(), start_new_session=True,
            stdout=open(self.workdir / "rabbit.log", "ab"),
            stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port),
                                         timeout=1).close()
                return self
            except OSError:
                if (self.proc.poll() is not None
                        or time.monotonic() > deadline):
                    raise RuntimeError(
                        f"RabbitMQ did not listen on {self.port}: see "
                        f"{self.workdir / 'rabbit.log'}") from None
                time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the node (its whole process group) and wait for it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout)
