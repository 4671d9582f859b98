"""Instances Nova cannot evacuate, known before anything is tried.

Some guests Nova refuses to rebuild elsewhere, whatever their state:
with a vTPM, for one, Nova answers an evacuate with a conflict
("Operation not supported for vTPM-enabled instance"), because the
TPM's state lived on the failed host. Trying them costs a lock, an
evacuate and a failure per instance, late in the run; the dry run, the
simulation and the capacity view could not say so before.

Each limitation is one ``Rule`` of ``RULES``: what to look for in the
instance's flavor extra specs (embedded in the server since
microversion 2.47, so the listings a run makes already carry them) and
its image's properties, why Nova refuses, and what the operator can do.
The next Nova limitation is one more line there.

Nova lists no image properties with a server: they are Glance's, read
once per image (``recovery.nova.Images``). An image Glance cannot show
(gone, or Glance not answering) has none here: its instances are tried,
and Nova's refusal is their failure. Nova judges by the properties it
saved at boot; an image's properties changed since can differ.
"""

import dataclasses
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from recovery.models import Server


@dataclasses.dataclass(frozen=True)
class Specs:
    """What the rules read of an instance: its flavor's extra specs, and
    its image's properties (once read: ``with_image``)."""

    flavor: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # The image it was booted from; "" when it boots from a volume.
    image_id: str = ""
    image: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, server: dict[str, Any]) -> "Specs":
        flavor = server.get("flavor")
        specs = flavor.get("extra_specs") if isinstance(flavor, dict) else None
        image = server.get("image")
        image_id = image.get("id", "") if isinstance(image, dict) else ""
        return cls(dict(specs or {}), image_id or "")


@dataclasses.dataclass(frozen=True)
class ListedServer(Server):
    """A server as Nova lists it, with what the rules read."""

    specs: Specs = dataclasses.field(default_factory=Specs)

    @classmethod
    def from_nova(cls, data: dict[str, Any]) -> "ListedServer":
        return cls(**vars(Server.from_nova(data)), specs=Specs.of(data))

    def with_image(self, properties: Mapping[str, str]) -> "ListedServer":
        """The same server, with its image's properties."""
        return dataclasses.replace(self, specs=dataclasses.replace(
            self.specs, image=dict(properties)))


@dataclasses.dataclass(frozen=True)
class Rule:
    """One thing Nova cannot evacuate: ``applies`` to an instance's specs,
    ``reason`` says why Nova refuses, ``hint`` what the operator can do."""

    applies: Callable[[Specs], bool]
    reason: str
    hint: str


def _has_vtpm(specs: Specs) -> bool:
    # Nova's own test (nova.virt.hardware.get_vtpm_constraint): a TPM
    # version, the flavor's or the image's, asks for a vTPM; a model
    # alone does not.
    return "hw:tpm_version" in specs.flavor or "hw_tpm_version" in specs.image


RULES: tuple[Rule, ...] = (
    Rule(_has_vtpm,
         "it has a vTPM (its flavor's hw:tpm_version or its image's "
         "hw_tpm_version), "
         "and Nova does not evacuate or rebuild an instance with a vTPM: "
         "its TPM state was on the failed host",
         "bring the host back and start it there, or recreate it "
         "elsewhere from a backup or snapshot (its TPM secrets are lost)"),
)


def blocking(server: Server) -> Rule | None:
    """The first rule that stops Nova evacuating ``server``, or None. A
    server listed without its specs (an older Nova facade) has none."""
    specs = server.specs if isinstance(server, ListedServer) else None
    if specs is None:
        return None
    return next((rule for rule in RULES if rule.applies(specs)), None)
