"""Storage fencing on Ceph: the failed host's client addresses are
blocklisted, so that none of its guests can write to an RBD image again,
even if the host still runs.

The fence is ``osd blocklist add`` of each of the host's storage
addresses (``storage_address``: ``{host}`` templates resolved with
getaddrinfo, every address, or literal IPs) for ``expire`` seconds,
proved by reading ``osd blocklist ls`` back until every address is
listed. It only protects the instances whose every disk is an RBD image
of this cluster (``coverage``): the host itself may still run.

Which addresses: the configured ones, resolved at each fencing. The
addresses Ceph shows as watchers of the host's images are not added:
they are evidence (``watchers``), and a watcher seen from an address
that is not configured is a mistake in ``storage_address`` to fix, not
an address to guess. An entry for a whole address (``IP:0/0``) covers
every client of the host, those that are not watching anything yet
too.

``unfence`` (host-return) removes the host's entries and the
``IP:0/NONCE`` entries librbd added when the evacuated instances broke
the host's locks (rbd_blocklist_on_break_lock), and reads back that none
is left: stale entries are not left behind.

The cephx user needs (verified on Ceph 16): mon ``allow service mon r,
allow service osd r, allow command "osd blocklist"``, and osd ``profile
rbd-read-only pool=P`` for each pool it checks (``ephemeral_pool``,
``volume_pools``). librados is reached through ``ceph_client``, every
call bounded. No key is ever read, logged or put on a command line:
librados reads the keyring file.
"""

import configparser
import dataclasses
import logging
from collections.abc import Callable
from collections.abc import Sequence

from recovery import concurrency
from recovery.exception import FencingError
from recovery.exception import WaitTimeout
from recovery.fencing import ceph_host
from recovery.fencing.ceph_client import Cluster
from recovery.fencing.ceph_client import Entry
from recovery.fencing.ceph_client import Options
from recovery.fencing.ceph_client import normal_ip
from recovery.fencing.fencer import Check
from recovery.fencing.fencer import DeviceKind
from recovery.fencing.fencer import Fencer
from recovery.fencing.fencer import Timing
from recovery.metrics import METRICS
from recovery.models import Server
from recovery.pacing import Lag
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

# The caps recovery's cephx user needs on the monitors (docs: Fencing).
MON_CAPS = ('allow service mon r, allow service osd r, '
            'allow command "osd blocklist"')
# Each of its pools' (ephemeral_pool, volume_pools).
OSD_CAPS = "profile rbd-read-only pool={pool}"
# What the monitor answers a blocklist command without an address:
# access denied before it reads the command when the caps lack it, or
# "unable to parse address" when they allow it. Nothing is changed.
_DENIED, _UNPARSED = -13, -22


@dataclasses.dataclass(frozen=True)
class CephSettings:
    """One host's Ceph fence."""

    host: str
    conf: str                        # ceph.conf (the monitors)
    user: str                        # cephx id (client.<user>)
    keyring: str
    addresses: tuple[str, ...]       # templates ({host} put in) or IPs
    expire: float                    # seconds each entry lasts
    ephemeral_pool: str | None       # Nova's images_type = rbd pool
    volume_pools: tuple[str, ...]    # Cinder's RBD pools
    watch_timeout: float             # Ceph's osd_client_watch_timeout


class CephFencer(Fencer):
    driver = "ceph"
    kind = DeviceKind.STORAGE

    def __init__(self, settings: CephSettings, timing: Timing) -> None:
        super().__init__(settings, timing)  # type: ignore[arg-type]
        self.settings: CephSettings = settings  # type: ignore[assignment]
        self.watch_timeout = settings.watch_timeout
        self._options = Options(settings.conf, settings.user,
                                settings.keyring, timing.timeout)

    def describe(self) -> str:
        return (f"ceph blocklist of {', '.join(self.settings.addresses)} "
                f"(client.{self.settings.user}, {self.settings.conf})")

    def addresses(self) -> list[str]:
        """The host's storage addresses, resolved now; FencingError
        naming a name that does not resolve."""
        return ceph_host.resolve(self.settings.addresses,
                                 self.timing.timeout, self.describe())

    def _cluster(self, clock: concurrency.Clock) -> Cluster:
        return Cluster(self._options, clock,
                       clock.monotonic() + self.timing.timeout,
                       self.describe())

    # -- the fence ------------------------------------------------------------
    def power_off(self, clock: concurrency.Clock,
                  lag: Lag | None = None) -> str:
        """Blocklist every address, then read ``osd blocklist ls`` back
        until each is listed: what was done, the cluster, the expiry and
        the read-back. FencingError (``Unreachable`` when no monitor
        answered) otherwise. A blocklist is not paced: ``lag`` is never
        given (only power devices have one)."""
        started = clock.monotonic()
        host = self.settings.host
        LOG.info("Fencing %s: %s", host, self.describe())
        try:
            proof = self._fence(clock, started)
        except FencingError as exc:
            METRICS.fencing.labels(self.driver, "not_blocklisted").inc()
            LOG.error("Fencing %s failed: %s", host, exc)
            raise
        METRICS.fencing.labels(self.driver, "blocklisted").inc()
        LOG.info("Fencing %s: %s", host, proof)
        return proof

    def _fence(self, clock: concurrency.Clock, started: float) -> str:
        addresses = self.addresses()
        expire = self.settings.expire
        with self._cluster(clock) as cluster:
            fsid = cluster.fsid()
            before = _whole(cluster.blocklist(), addresses)
            # A JSON float: Ceph 16 refuses an integer (EINVAL).
            cluster.blocklist_each("add", addresses, expire=float(expire))
            listed = self._read_back(clock, cluster, addresses)
        until = sorted({entry.until for entry in listed})
        proof = (f"blocklisted {', '.join(addresses)} on Ceph cluster {fsid} "
                 f"for {expire:.0f} s (until {', '.join(until)}); read back "
                 f"in osd blocklist ls as "
                 f"{', '.join(entry.addr for entry in listed)} after "
                 f"{clock.monotonic() - started:.1f} s")
        if before:
            # Ceph 16 keeps an entry's expiry when it is added again.
            LOG.warning("Fencing %s: %s already listed: the expiry is its "
                        "first one", self.settings.host,
                        ", ".join(entry.addr for entry in before))
            proof += (f"; {', '.join(e.addr for e in before)} was already "
                      f"listed, and Ceph keeps an entry's first expiry "
                      f"({', '.join(e.until for e in before)})")
        return proof

    def _read_back(self, clock: concurrency.Clock, cluster: Cluster,
                   addresses: list[str]) -> list[Entry]:
        """The entries of ``addresses`` (``IP:0/0``), once all are
        listed."""
        wanted = {normal_ip(address) for address in addresses}

        def listed() -> list[Entry] | None:
            found = _whole(cluster.blocklist(), addresses)
            return found if {e.ip for e in found} == wanted else None

        try:
            return wait_for(listed, what="the blocklist entries to be listed",
                            timeout=cluster.left(),
                            interval=self.timing.poll_interval, clock=clock)
        except WaitTimeout as exc:
            raise FencingError(f"{self.describe()}: added, but not read "
                               f"back in osd blocklist ls: {exc}") from exc

    # -- a dry run ----------------------------------------------------------
    def check(self, clock: concurrency.Clock) -> list[Check]:
        """Only reads: the addresses resolve, the keyring holds the
        user's key, a monitor answers, the caps allow blocklisting, the
        blocklist and each pool can be read."""
        checks: list[Check] = []

        def step(action: str, ask: Callable[[], str]) -> bool:
            started = clock.monotonic()
            try:
                answer, ok = ask(), True
            except FencingError as exc:
                answer, ok = str(exc), False
            checks.append((action, ok, answer, clock.monotonic() - started))
            return ok

        step("addresses", lambda: ", ".join(self.addresses()))
        if not step("keyring", self._keyring):
            return checks
        started = clock.monotonic()
        try:
            with self._cluster(clock) as cluster:
                checks.append(("monitor", True, f"cluster {cluster.fsid()} "
                               f"answered", clock.monotonic() - started))
                step("caps", lambda: self._caps(cluster))
                step("blocklist", lambda: self._listed(cluster))
                for pool in self._pools():
                    step(f"pool {pool}", lambda p=pool: self._pool(cluster, p))
        except FencingError as exc:
            checks.append(("monitor", False, str(exc),
                           clock.monotonic() - started))
        return checks

    def _keyring(self) -> str:
        path, entity = self.settings.keyring, f"client.{self.settings.user}"
        parser = configparser.ConfigParser(interpolation=None)
        try:
            with open(path, encoding="utf-8") as handle:
                parser.read_file(handle)
        except OSError as exc:
            raise FencingError(f"keyring {path} cannot be read: "
                               f"{exc.strerror}") from exc
        except (configparser.Error, UnicodeDecodeError) as exc:
            # Not echoed: its lines hold the key.
            raise FencingError(f"keyring {path} is not a keyring file "
                               f"({type(exc).__name__})") from exc
        if not parser.has_option(entity, "key"):
            raise FencingError(f"keyring {path} has no key for {entity}")
        return f"{path} holds a key for {entity}"

    def _caps(self, cluster: Cluster) -> str:
        """Whether the monitors let this user add and remove entries,
        asked with no address: refused before anything is read when the
        caps lack it, else refused for the missing address."""
        for op in ("add", "rm"):
            code = cluster.probe(prefix="osd blocklist", blocklistop=op)
            if code == _DENIED:
                raise FencingError(
                    f"client.{self.settings.user} may not {op} blocklist "
                    f"entries (access denied): give it mon '{MON_CAPS}'")
            if code != _UNPARSED:
                raise FencingError(f"osd blocklist {op} without an address "
                                   f"answered {code}, not 'unable to parse "
                                   f"address' ({_UNPARSED}): cannot tell")
        return f"client.{self.settings.user} may add and remove entries"

    def _listed(self, cluster: Cluster) -> str:
        mine = self._entries(cluster, self.addresses())
        shown = ", ".join(entry.addr for entry in mine) or "none"
        return (f"{len(cluster.blocklist())} entries; for this host's "
                f"addresses: {shown}")

    def _pools(self) -> list[str]:
        first = [self.settings.ephemeral_pool] if (
            self.settings.ephemeral_pool) else []
        return first + [pool for pool in self.settings.volume_pools
                        if pool not in first]

    def _pool(self, cluster: Cluster, pool: str) -> str:
        try:
            count = len(cluster.images(pool))
        except FencingError as exc:
            raise FencingError(f"{exc}: give client.{self.settings.user} "
                               f"osd '{OSD_CAPS.format(pool=pool)}'"
                               ) from exc
        return f"{count} RBD images readable"

    # -- what the fence covers ----------------------------------------------
    def coverage(self, servers: Sequence[Server], clock: concurrency.Clock
                 ) -> dict[str, str | None]:
        """Each server's uuid: None when every disk it has is an RBD
        image of this cluster, else which disk is not, and why."""
        with self._cluster(clock) as cluster:
            images = {pool: cluster.images(pool) for pool in self._pools()}
        return {server.id: ceph_host.uncovered(
            server, self.settings.ephemeral_pool,
            self.settings.volume_pools, images) for server in servers}

    def watchers(self, servers: Sequence[Server],
                 clock: concurrency.Clock) -> list[str]:
        """The watches (``IP:0/NONCE``) of these servers' images held
        from the host's addresses."""
        addresses = self.addresses()
        mine = set(map(normal_ip, addresses))
        found: list[str] = []
        elsewhere: list[str] = []
        with self._cluster(clock) as cluster:
            images = {pool: cluster.images(pool) for pool in self._pools()}
            for pool, image in ceph_host.disks(
                    servers, self.settings.ephemeral_pool,
                    self.settings.volume_pools, images):
                for watch in cluster.watchers(pool, image):
                    seen = found if Entry(watch, "").ip in mine else elsewhere
                    if watch not in seen:
                        seen.append(watch)
        if elsewhere:
            # Not the host's evidence (another client may watch an image
            # too), but the one sign of a storage_address that names the
            # wrong address, whose fence would not stop the host.
            LOG.warning(
                "%s: its instances' images are also watched from %s, none "
                "of its storage addresses (%s); if that is this host, its "
                "storage_address is wrong and a storage fence would not "
                "stop it", self.settings.host, ", ".join(elsewhere),
                ", ".join(addresses))
        return found

    # -- lifting it (host-return) -------------------------------------------
    def unfence(self, clock: concurrency.Clock) -> str:
        """Remove the host's entries and librbd's ``IP:0/NONCE`` ones
        for its addresses; read back that none is left; say what was
        removed."""
        addresses = self.addresses()
        with self._cluster(clock) as cluster:
            fsid = cluster.fsid()
            removed = self._entries(cluster, addresses)
            cluster.blocklist_each("rm", [entry.addr for entry in removed])
            try:
                wait_for(lambda: not self._entries(cluster, addresses),
                         what="the host's blocklist entries to be gone",
                         timeout=cluster.left(),
                         interval=self.timing.poll_interval, clock=clock)
            except WaitTimeout as exc:
                raise FencingError(f"{self.describe()}: removed, but still "
                                   f"listed: {exc}") from exc
        shown = ", ".join(entry.addr for entry in removed) or "nothing"
        message = (f"removed {shown} from the blocklist of Ceph cluster "
                   f"{fsid}; read back: no entry left for "
                   f"{', '.join(addresses)}")
        LOG.info("Unfencing %s: %s", self.settings.host, message)
        return message

    @staticmethod
    def _entries(cluster: Cluster, addresses: list[str]) -> list[Entry]:
        """The client entries (``IP:0/0``, ``IP:0/NONCE``) of these
        addresses."""
        ips = set(map(normal_ip, addresses))
        return [entry for entry in cluster.blocklist()
                if entry.client and entry.ip in ips]


def _whole(entries: list[Entry], addresses: list[str]) -> list[Entry]:
    """The entries of these whole addresses (``IP:0/0``)."""
    ips = set(map(normal_ip, addresses))
    return [entry for entry in entries
            if entry.addr.endswith(":0/0") and entry.ip in ips]
