"""The properties of the images instances boot from, read from Glance
(``recovery.evacuable``'s rules read them), through the session and the
error translation every Nova call goes through."""

import collections
import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import identity as ks_identity

from recovery import concurrency
from recovery import exception
from recovery.concurrency import Clock

LOG = logging.getLogger(__name__)

# One listing's reads of the images it does not know take this long at
# most in all, and none is retried: Glance is on the path to a
# recovery's start only for images never read before.
IMAGE_TIMEOUT = 5.0
# A read is started only with this much of IMAGE_TIMEOUT left.
IMAGE_READ_MIN = 1.0
# After Glance failed to answer, it is asked nothing for this long.
IMAGE_RETRY_AFTER = 60.0
# Images whose properties the process keeps (the oldest read go first).
IMAGE_CACHE_SIZE = 10000


def no_glance(auth: Any, override: str | None) -> str | None:
    """Why there is no Glance to ask, or None: only an auth with a
    catalog (Keystone's) finds it there; another (admin_token, none)
    gives one URL, Nova's, for every service."""
    if override or isinstance(auth, ks_identity.BaseIdentityPlugin):
        return None
    return ("[nova] auth has no service catalog and [nova] "
            "image_endpoint_override is not set")


class Images:
    """The properties of the images instances boot from, read from Glance
    once per image and kept for the process (the ``IMAGE_CACHE_SIZE``
    images used last; the ``hw_*`` properties only: what
    ``recovery.evacuable``'s rules read).

    Glance never fails a recovery nor holds it up for long: one call reads
    the images it does not know for ``IMAGE_TIMEOUT`` at most in all,
    with no retry; after Glance failed to answer, it is asked nothing
    for ``IMAGE_RETRY_AFTER``; an image not read has no properties, and
    Nova judges its instances."""

    def __init__(self, adapter: Any, clock: Clock, *,
                 missing: str | None = None):
        """``adapter``: a keystoneauth1 adapter for Glance; ``missing``:
        why there is no Glance to ask (an auth with no catalog and no
        ``image_endpoint_override``), or None."""
        self._adapter = adapter
        self._clock = clock
        self._missing = missing
        self._lock = concurrency.Lock()
        self._known: collections.OrderedDict[str, dict[str, str]] = (
            collections.OrderedDict())
        self._retry_at: float | None = None
        # Whether the log said that there is no image service.
        self._said = False

    def properties(self, image_ids: set[str], call: Callable[..., Any], *,
                   read: bool = True) -> dict[str, dict[str, str]]:
        """The properties of each image of ``image_ids`` that is known;
        with ``read``, the others are read through ``call`` (the facade's
        ``_call``) first, as far as Glance and the time allow."""
        found = {}
        with self._lock:
            for image_id in image_ids & self._known.keys():
                self._known.move_to_end(image_id)
                found[image_id] = self._known[image_id]
        unknown = sorted(image_ids - found.keys())
        if not unknown or not read:
            return found
        if self._missing is not None:
            self._say_missing()
            return found
        if not self._askable():
            return found
        deadline = self._clock.monotonic() + IMAGE_TIMEOUT
        for image_id in unknown:
            left = deadline - self._clock.monotonic()
            if left < IMAGE_READ_MIN:
                break
            try:
                found[image_id] = self._read(image_id, call, left)
            except exception.Interrupted:
                raise
            except exception.RecoveryError as exc:
                status = getattr(exc.__cause__, "http_status", None)
                if status == 404:
                    # Deleted, or not shown to recovery's user: Nova kept
                    # what it saved at boot.
                    found[image_id] = {}
                elif status is not None and status < 500:
                    LOG.warning("Image %s's properties not read: %s",
                                image_id, exc)
                    continue
                elif isinstance(exc, exception.ConfigError):
                    # No image service in the catalog: a setting.
                    self._missing = str(exc)
                    self._say_missing()
                    break
                else:
                    # Glance is not answering: none of the others either.
                    self._failed(exc)
                    break
            self._keep(image_id, found[image_id])
        return found

    def _say_missing(self) -> None:
        """Log, once, why there is no Glance to ask."""
        with self._lock:
            first, self._said = not self._said, True
        if first:
            LOG.info("Images' properties are not read: %s. An instance "
                     "whose image asks for a vTPM is tried, and Nova "
                     "refuses it", self._missing)

    def _askable(self) -> bool:
        """Whether Glance may be asked now, after its last failure."""
        with self._lock:
            return (self._retry_at is None
                    or self._clock.monotonic() >= self._retry_at)

    def _read(self, image_id: str, call: Callable[..., Any],
              timeout: float) -> dict[str, str]:
        what = f"show image {image_id}"
        response = call(what, self._show, image_id, kind="image.show",
                        safe=False, timeout=timeout)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise exception.NovaError(
                f"failed to {what}: the answer is not an image (is "
                f"[nova] image_endpoint_override Glance's URL?)")
        return {key: str(value) for key, value in body.items()
                if key.startswith("hw_")
                and isinstance(value, (str, int, float))}

    def _show(self, image_id: str, **kwargs: Any) -> Any:
        """GET the image from Glance's v2 API. Catalogs name Glance by
        its root (``http://glance:9292``) or by its v2 API
        (``.../v2``): both are Glance, and ``/v2`` is added only to the
        root."""
        endpoint = self._adapter.get_endpoint()
        if endpoint is None:
            # As keystoneauth says it: no image service in the catalog.
            raise ks_exc.EndpointNotFound()
        root = endpoint.rstrip("/").removesuffix("/v2")
        image = urllib.parse.quote(image_id, safe="")
        return self._adapter.get(f"{root}/v2/images/{image}", **kwargs)

    def _keep(self, image_id: str, properties: dict[str, str]) -> None:
        with self._lock:
            self._known[image_id] = properties
            self._known.move_to_end(image_id)
            while len(self._known) > IMAGE_CACHE_SIZE:
                self._known.popitem(last=False)

    def _failed(self, exc: exception.RecoveryError) -> None:
        with self._lock:
            self._retry_at = self._clock.monotonic() + IMAGE_RETRY_AFTER
        LOG.warning("Images' properties not read for %.0fs: %s. An "
                    "instance whose image asks for a vTPM is tried, and "
                    "Nova refuses it", IMAGE_RETRY_AFTER, exc)

