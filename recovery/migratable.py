"""Instances Nova cannot live-migrate, known before a drain tries any.

Nova refuses some live migrations in its API, before anything moves (a
vTPM whose secret only the user holds, memory encryption, an
accelerator), and its conductor refuses others once the migration is
accepted (a PCI device from a flavor alias not declared live-migratable).
Either way the refusal would come late, one instance at a time, after
the host was disabled. Each rule here reads what Nova itself reads: the
flavor's extra specs and the image's properties, as the server embeds
them (``evacuable.Specs``), and the instance's disks.
"""

from collections.abc import Set

from recovery.evacuable import ListedServer
from recovery.models import Server

# What a flavor's or image's boolean spec says for "yes", as Nova's
# oslo strutils reads it.
_TRUE = {"1", "t", "true", "on", "y", "yes"}


def _pci_aliases(spec: str) -> set[str]:
    """The aliases of ``pci_passthrough:alias`` ("a1:2,a2:1")."""
    return {part.split(":")[0].strip() for part in spec.split(",")
            if part.strip()}


def blocking(server: Server, pci_aliases: Set[str],
             block_migration: bool | str) -> str | None:
    """Why Nova would not live-migrate ``server``, with what the operator
    can do; None when nothing known stops it. ``pci_aliases``: those
    declared live-migratable; ``block_migration``: as the drain sends it.
    A server listed without its specs (an older Nova facade) is tried."""
    if not isinstance(server, ListedServer):
        return None
    flavor, image = server.specs.flavor, server.specs.image
    # Nova's reject_legacy_vtpm_live_migration: a vTPM moves only when
    # its secret is the host's (hw:tpm_secret_security=host).
    if ("hw:tpm_version" in flavor or "hw_tpm_version" in image) and (
            flavor.get("hw:tpm_secret_security", "user") != "host"):
        return ("it has a vTPM whose secret is not the host's (its "
                "flavor's hw:tpm_secret_security is not 'host'), and Nova "
                "live-migrates no other vTPM; stop it and cold-migrate it "
                "('openstack server migrate')")
    if (str(flavor.get("hw:mem_encryption", "")).lower() in _TRUE
            or str(image.get("hw_mem_encryption", "")).lower() in _TRUE):
        return ("its memory is encrypted (hw:mem_encryption), and Nova "
                "does not live-migrate such an instance; cold-migrate it")
    if flavor.get("accel:device_profile"):
        return ("it has an accelerator (its flavor's accel:device_profile), "
                "and Nova does not live-migrate such an instance; "
                "cold-migrate it")
    aliases = _pci_aliases(flavor.get("pci_passthrough:alias", ""))
    fixed = sorted(aliases - pci_aliases)
    if fixed:
        return (f"it has PCI devices of alias {', '.join(fixed)} (its "
                f"flavor's pci_passthrough:alias), which Nova live-migrates "
                f"only when nova.conf declares the alias live_migratable; "
                f"if it does, add it to [host_drain] "
                f"live_migratable_pci_aliases, else cold-migrate it")
    if block_migration is False and (
            server.image_id or server.ephemeral_gb or server.swap_mb):
        return ("it has local disks (an image-backed root, ephemeral or "
                "swap) and [host_drain] block_migration is false; set it "
                "to auto if they are on shared storage")
    return None
