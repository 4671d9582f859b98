"""What of one host the Ceph fence is about: its storage addresses,
resolved, and its servers' disks as RBD images.

Nova's and Cinder's names: with ``[libvirt] images_type = rbd``, an
image-backed root disk is ``<uuid>_disk`` in Nova's pool (the device's
``ephemeral_pool``), its flavor's ephemeral and swap disks are
``<uuid>_disk.eph0`` and ``<uuid>_disk.swap`` beside it; a Cinder RBD
volume is ``volume-<id>`` in one of ``volume_pools``. The config drive
(``<uuid>_disk.config``, or a local file) is read-only, never written
twice, and does not count.
"""

import ipaddress
from collections.abc import Mapping
from collections.abc import Sequence

from recovery import concurrency
from recovery.exception import FencingError
from recovery.fencing.ceph_client import bounded
from recovery.models import Server


def resolve(names: Sequence[str], seconds: float, where: str) -> list[str]:
    """Each IP literal as is, each name's every address (getaddrinfo,
    bounded by ``seconds``), in order, once each. FencingError naming a
    name that does not resolve."""
    found: list[str] = []
    for name in names:
        for address in _addresses(name, seconds, where):
            if address not in found:
                found.append(address)
    return found


def _addresses(name: str, seconds: float, where: str) -> list[str]:
    try:
        return [str(ipaddress.ip_address(name))]
    except ValueError:
        pass
    socket = concurrency.native("socket")

    def lookup() -> list[str]:
        return [str(ipaddress.ip_address(info[4][0].split("%")[0]))
                for info in socket.getaddrinfo(name, None,
                                               type=socket.SOCK_STREAM)]

    try:
        return bounded(lookup, seconds)
    except TimeoutError:
        raise FencingError(f"{where}: storage address {name} not resolved "
                           f"within {seconds:g} s") from None
    except OSError as exc:
        raise FencingError(f"{where}: storage address {name} does not "
                           f"resolve: {exc.strerror or exc}") from exc


def uncovered(server: Server, ephemeral_pool: str | None,
              volume_pools: Sequence[str],
              images: Mapping[str, set[str]]) -> str | None:
    """None when every disk of ``server`` is an image in ``images`` (each
    pool's names), else which disks are not, and why."""
    reasons = []
    local = "no ephemeral_pool is declared for this Ceph fence"
    if server.image_id:
        name = f"{server.id}_disk"
        if not ephemeral_pool:
            reasons.append(f"its root disk (from image {server.image_id}) "
                           f"is taken as local: {local}")
        elif name not in images.get(ephemeral_pool, set()):
            reasons.append(f"its root disk {name} is not in Ceph pool "
                           f"{ephemeral_pool} (a local disk?)")
    elif not server.volume_ids:
        reasons.append("Nova shows no root disk (neither an image nor a "
                       "volume)")
    if server.ephemeral_gb and not ephemeral_pool:
        reasons.append(f"its ephemeral disk ({server.ephemeral_gb} GB) is "
                       f"taken as local: {local}")
    if server.swap_mb and not ephemeral_pool:
        reasons.append(f"its swap disk ({server.swap_mb} MB) is taken as "
                       f"local: {local}")
    for volume in server.volume_ids:
        if not volume_pools:
            reasons.append(f"volume {volume} is taken as not on this Ceph: "
                           f"no volume_pools are declared")
        elif _pool_of(f"volume-{volume}", volume_pools, images) is None:
            reasons.append(f"volume {volume}: no image volume-{volume} in "
                           f"Ceph pool(s) {', '.join(volume_pools)}")
    return "; ".join(reasons) or None


def disks(servers: Sequence[Server], ephemeral_pool: str | None,
          volume_pools: Sequence[str], images: Mapping[str, set[str]]
          ) -> list[tuple[str, str]]:
    """(pool, image) of each of these servers' disks that is in
    ``images``."""
    found = []
    for server in servers:
        if ephemeral_pool:
            prefix = f"{server.id}_disk"
            found += [(ephemeral_pool, name) for name in
                      sorted(images.get(ephemeral_pool, set()))
                      if name == prefix or name.startswith(prefix + ".")]
        for volume in server.volume_ids:
            name = f"volume-{volume}"
            pool = _pool_of(name, volume_pools, images)
            if pool is not None:
                found.append((pool, name))
    return found


def _pool_of(name: str, pools: Sequence[str],
             images: Mapping[str, set[str]]) -> str | None:
    return next((pool for pool in pools if name in images.get(pool, set())),
                None)
