"""A three-node MariaDB Galera cluster on this machine, for the tests.

Each node is a ``mariadbd`` of its own (Debian's ``mariadb-server`` with
``galera-4``), run as the user the tests run as, with its data, socket and
log in a temporary directory and every port chosen free: nothing it does
touches the system's MariaDB on 3306. The first node bootstraps the
cluster; the two others join it by an rsync state transfer. A node can be
killed (SIGKILL, as a power cut) and started again (it rejoins by an
incremental transfer).

The cluster is started once per test module that asks for it, and torn
down completely at the end: every process ended, every file removed.
Where the binaries are missing, its tests are skipped (they fail under
CI, as tests/databases.py does for a missing server).
"""

import contextlib
import dataclasses
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest
import sqlalchemy as sa

from tests.databases import _skip_or_fail
from tests.databases import kill_mysql_sessions

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
MARIADBD = "/usr/sbin/mariadbd"
INSTALL_DB = "mariadb-install-db"
NODES = 3
# How long a node may take to start (a joiner: its state transfer too).
START_TIMEOUT = 60.0
# A node that stops answering is evicted after some 3 s (Galera's
# defaults: 15 s), so the survivors carry on quickly after a kill.
_PROVIDER_OPTIONS = ("evs.keepalive_period=PT0.5S;"
                     "evs.inactive_check_period=PT0.5S;"
                     "evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S;"
                     "evs.install_timeout=PT3S;gcache.size=64M;"
                     "pc.weight=1")


def _free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that are free now on 127.0.0.1."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclasses.dataclass
class Node:
    """One ``mariadbd`` of the cluster."""

    name: str
    root: str
    port: int
    gcomm_port: int
    ist_port: int
    sst_port: int
    proc: subprocess.Popen | None = None

    @property
    def datadir(self) -> str:
        return os.path.join(self.root, "data")

    @property
    def socket(self) -> str:
        return os.path.join(self.root, "mysqld.sock")

    @property
    def config(self) -> str:
        return os.path.join(self.root, "my.cnf")

    @property
    def log(self) -> str:
        return os.path.join(self.root, "error.log")

    def url(self, database: str | None = None) -> str:
        """Its SQLAlchemy URL over TCP, as an engine's [database]
        connection names it."""
        return sa.engine.URL.create(
            "mysql+pymysql", username="root", host="127.0.0.1",
            port=self.port, database=database,
            query={"charset": "utf8mb4"}).render_as_string(
                hide_password=False)

    def write_config(self, cluster_address: str) -> None:
        options = (f"gmcast.listen_addr=tcp://127.0.0.1:{self.gcomm_port};"
                   f"ist.recv_addr=127.0.0.1:{self.ist_port};"
                   f"{_PROVIDER_OPTIONS}")
        settings = {
            "datadir": self.datadir, "socket": self.socket,
            "port": self.port, "bind-address": "127.0.0.1",
            "pid-file": os.path.join(self.root, "mysqld.pid"),
            "log-error": self.log, "skip-name-resolve": "ON",
            "character-set-server": "utf8mb4",
            "collation-server": "utf8mb4_general_ci",
            # What Galera requires.
            "binlog_format": "ROW", "default_storage_engine": "InnoDB",
            "innodb_autoinc_lock_mode": 2,
            # Small and quick: a test cluster's data need not survive a
            # crash of the machine (each node's peers hold it).
            "innodb_buffer_pool_size": "64M",
            "innodb_log_file_size": "48M",
            "innodb_flush_log_at_trx_commit": 2,
            "performance_schema": "OFF", "max_connections": 300,
            "wsrep_on": "ON", "wsrep_provider": PROVIDER,
            "wsrep_cluster_name": "recovery-test",
            "wsrep_cluster_address": cluster_address,
            "wsrep_node_name": self.name,
            "wsrep_node_address": f"127.0.0.1:{self.gcomm_port}",
            "wsrep_provider_options": f'"{options}"',
            "wsrep_sst_method": "rsync",
            "wsrep_sst_receive_address": f"127.0.0.1:{self.sst_port}",
            "wsrep_slave_threads": 2,
        }
        lines = ["[mysqld]"] + [f"{k} = {v}" for k, v in settings.items()]
        with open(self.config, "w") as out:
            out.write("\n".join(lines) + "\n")

    def start(self, bootstrap: bool = False) -> None:
        """Start it; ``wait_synced`` waits for it to serve."""
        args = [MARIADBD, f"--defaults-file={self.config}",
                f"--user={_user()}"]
        if bootstrap:
            args.append("--wsrep-new-cluster")
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)

    def admin(self) -> sa.engine.Engine:
        """An engine on the node's unix socket, as the OS user (MariaDB's
        unix_socket authentication), outside transactions."""
        return sa.create_engine(
            "mysql+pymysql://root@localhost/",
            connect_args={"unix_socket": self.socket, "connect_timeout": 3},
            isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)

    def status(self, name: str) -> str | None:
        engine = self.admin()
        try:
            with engine.connect() as conn:
                row = conn.execute(sa.text(
                    "SHOW STATUS LIKE :name"), {"name": name}).first()
            return None if row is None else row[1]
        finally:
            engine.dispose()

    def wait_synced(self, size: int | None = None,
                    timeout: float = START_TIMEOUT) -> None:
        """Until the node serves, synced with a primary cluster (of
        ``size`` nodes, when given)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"galera {self.name} exited {self.proc.returncode}: "
                    f"{self.log_tail()}")
            try:
                if (self.status("wsrep_local_state_comment") == "Synced"
                        and self.status("wsrep_cluster_status") == "Primary"
                        and (size is None or self.status(
                            "wsrep_cluster_size") == str(size))):
                    return
            except sa.exc.DBAPIError:
                pass  # not up yet
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"galera {self.name} not synced after {timeout:g} s: "
                    f"{self.log_tail()}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL, as a power cut: no goodbye to its peers."""
        if self.proc is not None and self.proc.poll() is None:
            # Its whole group: a state transfer's script and rsync too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            with open(self.log, errors="replace") as log:
                return "".join(log.readlines()[-lines:])
        except OSError:
            return "(no log)"


def _user() -> str:
    """Who the nodes run as: MariaDB's own user when the tests run as
    root. Not root itself: the rsync state transfer's daemon, run as root,
    would write as "nobody"."""
    if os.getuid() == 0:
        return "mysql"
    return pwd.getpwuid(os.getuid()).pw_name


def _own(path: str) -> None:
    """Give ``path``, and what is in it, to the nodes' user."""
    entry = pwd.getpwnam(_user())
    for top, dirs, files in os.walk(path):
        for name in [top] + [os.path.join(top, f) for f in dirs + files]:
            os.chown(name, entry.pw_uid, entry.pw_gid)


class GaleraCluster:
    """Three nodes in one cluster, started by ``start`` and ended, with
    their files, by ``close``."""

    def __init__(self, size: int = NODES):
        # Socket paths are short: keep the tree out of pytest's tmp.
        self.root = tempfile.mkdtemp(prefix="galera-", dir="/tmp")
        ports = _free_ports(4 * size)
        self.nodes = [
            Node(f"node{n + 1}", os.path.join(self.root, f"node{n + 1}"),
                 *ports[4 * n:4 * n + 4]) for n in range(size)]
        self.started_in: float | None = None

    def start(self) -> "GaleraCluster":
        began = time.monotonic()
        address = "gcomm://" + ",".join(
            f"127.0.0.1:{n.gcomm_port}" for n in self.nodes)
        os.chmod(self.root, 0o755)
        for node in self.nodes:
            os.makedirs(node.root, mode=0o755)
            node.write_config(address)
            _own(node.root)
        first, *joiners = self.nodes
        subprocess.run(
            [INSTALL_DB, f"--defaults-file={first.config}",
             f"--user={_user()}", "--auth-root-authentication-method=socket",
             "--skip-test-db"], check=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, timeout=120)
        for node in joiners:
            # The same system tables as the first: the state transfer
            # replaces them anyway.
            shutil.copytree(first.datadir, node.datadir)
            _own(node.datadir)
        first.start(bootstrap=True)
        first.wait_synced()
        # TCP access for the tests and the engines, replicated to the
        # joiners by their state transfer.
        engine = first.admin()
        with engine.connect() as conn:
            conn.exec_driver_sql(
                "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'")
            conn.exec_driver_sql(
                "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
        engine.dispose()
        # One joiner at a time: a donor serves one transfer at once.
        for node in joiners:
            node.start()
            node.wait_synced()
        self.wait_size(len(self.nodes))
        self.started_in = time.monotonic() - began
        return self

    def wait_size(self, size: int, timeout: float = START_TIMEOUT) -> None:
        for node in self.nodes:
            if node.alive:
                node.wait_synced(size, timeout)

    def heal(self) -> None:
        """Start again any node a test killed, and wait for the whole
        cluster."""
        for node in self.nodes:
            if not node.alive:
                node.start()
                node.wait_synced()
        self.wait_size(len(self.nodes))

    def close(self) -> None:
        for node in self.nodes:
            node.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- databases -----------------------------------------------------------
    @contextlib.contextmanager
    def database(self):
        """A new database on the cluster (created on one node, there on
        all), dropped at the end: its name."""
        name = f"recovery_galera_{uuid.uuid4().hex[:12]}"
        engine = self.nodes[0].admin()
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(
                    f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
            yield name
        finally:
            live = next((n for n in self.nodes if n.alive), None)
            if live is not None:
                engine.dispose()
                engine = live.admin()
                with engine.connect() as conn:
                    kill_mysql_sessions(conn, name)
                    conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
            engine.dispose()


def _missing() -> str | None:
    if not os.path.exists(PROVIDER):
        return f"Galera's provider {PROVIDER} (apt-get install galera-4)"
    if not os.path.exists(MARIADBD) or shutil.which(INSTALL_DB) is None:
        return "mariadbd and mariadb-install-db (apt-get install " \
               "mariadb-server)"
    if shutil.which("rsync") is None:
        return "rsync, for the joiners' state transfer (apt-get install " \
               "rsync)"
    return None


@pytest.fixture(scope="module")
def galera():
    """A running three-node Galera cluster, for the module's tests
    (``heal()`` starts again a node a test killed)."""
    missing = _missing()
    if missing:
        _skip_or_fail(f"galera tier: needs {missing}")
    cluster = _started()
    try:
        print(f"galera: three nodes synced in {cluster.started_in:.1f} s")
        yield cluster
    finally:
        cluster.close()


def _started(tries: int = 2) -> GaleraCluster:
    """A started cluster; a second one, on other ports, if the first
    fails to start (a port taken meanwhile by another process)."""
    for attempt in range(1, tries + 1):
        cluster = GaleraCluster()
        try:
            return cluster.start()
        except (RuntimeError, subprocess.SubprocessError) as exc:
            cluster.close()
            if attempt == tries:
                raise
            print(f"galera: the cluster did not start ({exc}); again")
    raise AssertionError("unreachable")
