"""A fake Nova compute API served over real HTTP, for tests.

Driven by the real python-novaclient/keystoneauth1; models the Nova
behaviour a host-failure recovery engine depends on.
"""

from tests.fakenova.server import FakeNova

__all__ = ["FakeNova"]
