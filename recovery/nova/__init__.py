"""Nova, Placement and Glance, as recovery calls them.

- ``compute``: the facade (``Nova``), one small method per Nova action
  the flows need, with its retries;
- ``images``: the images' properties, read from Glance;
- ``placement``: what each compute node has free, read from Placement;
- ``transport``: the rate-limited, guarded session and the translation
  of its errors into recovery's;
- ``loader``: ``load_nova``, which builds all of it from ``[nova]``.

Callers import from here; the modules import one another, never this
package.
"""

from recovery.nova.compute import Nova
from recovery.nova.images import Images
from recovery.nova.loader import load_nova

__all__ = ["Images", "Nova", "load_nova"]
