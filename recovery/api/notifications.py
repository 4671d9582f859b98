"""Notifications over the API: Masakari's ``/v1/notifications`` and
their vmoves.

Store first, answer second: a notification is committed before the 202
goes out, and nothing is stored on any 4xx.
"""

import datetime
import logging
from collections.abc import Callable
from collections.abc import Collection
from typing import Any
from typing import Protocol

import webob

from recovery import exception
from recovery import intake
from recovery.api import http
from recovery.api import policy
from recovery.api import validation
from recovery.api import views
from recovery.concurrency import Clock
from recovery.db.journal import JournalEntry
from recovery.db.notifications import SORT_KEYS
from recovery.events import Event
from recovery.hostnames import HostMatch
from recovery.notification import API
from recovery.notification import Notification
from recovery.notification import NotificationType
from recovery.notification import Status
from recovery.notification import StepEvent

LOG = logging.getLogger(__name__)

# The compute host a name means (recovery.hostnames); raises UnknownHost,
# or a Nova error when Nova cannot say.
HostCheck = Callable[[str], HostMatch]

FILTERS = ("status", "source_host_uuid", "type", "hostname")
VMOVE_FILTERS = {"status": ("pending", "ongoing", "succeeded", "failed",
                            "ignored"),
                 "type": ("evacuation", "migration", "live_migration")}
# The sort keys of a listing: the store's, and a notification's uuid under
# the names Masakari's code (notification_uuid) and api-ref (uuid) give it.
SORT_NAMES = {**{key: key for key in SORT_KEYS},
              "uuid": "uuid", "notification_uuid": "uuid"}
# A vmove's fields that are never null, which a listing sorts by.
VMOVE_SORT_KEYS = frozenset({"id", "uuid", "instance_uuid", "instance_name",
                             "source_host", "type", "status", "created_at",
                             "updated_at"})
# What an owner's read may not filter or sort by: it would tell the host
# its answers withhold.
OWNER_UNSORTED = frozenset({"hostname", "source_host_uuid", "source_host"})


class NotificationStore(intake.AcceptStore, Protocol):
    """What the notifications API needs from the store: the intake's
    part, and the reads of a notification and its runs."""
    def list_notifications(self, *, filters: dict[str, Any] | None = None,
                           generated_since: datetime.datetime | None = None,
                           limit: int | None = None,
                           marker: str | None = None,
                           sort_key: str = "created_at",
                           sort_dir: str = "desc",
                           project_id: str | None = None
                           ) -> list[Notification]: ...
    def get(self, uuid: str) -> Notification: ...
    def step_events(self, uuid: str) -> list[StepEvent]: ...
    def events(self, notification_uuid: str | None = None,
               since: datetime.datetime | None = None,
               limit: int | None = None, host: str | None = None,
               kinds: Collection[str] | None = None) -> list[Event]: ...
    def journal_entries(self, uuid: str) -> list[JournalEntry]: ...


class NotificationAPI:
    def __init__(self, store: NotificationStore, check_host: HostCheck,
                 clock: Clock, *, max_body: int, duplicate_window: float,
                 on_stored: Callable[[], None]):
        self.store = store
        self.check_host = check_host
        self.clock = clock
        self.max_body = max_body
        self.duplicate_window = duplicate_window
        self.on_stored = on_stored

    def route(self, req: webob.Request,
              parts: list[str]) -> http.Handlers | None:
        """The handlers by method for ``parts``, the path after
        ``/v1/notifications``; None if there is no such resource."""
        if not parts:
            return {"GET": lambda: self.index(req),
                    "POST": lambda: self.create(req)}
        uuid, rest = parts[0], parts[1:]
        if not rest:
            return {"GET": lambda: self.show(req, uuid)}
        if rest == ["vmoves"]:
            return {"GET": lambda: self.vmove_index(req, uuid)}
        if rest == ["events"]:
            return {"GET": lambda: self.events(uuid)}
        if rest[0] == "vmoves" and len(rest) == 2:
            return {"GET": lambda: self.vmove_show(req, uuid, rest[1])}
        return None

    # -- create ------------------------------------------------------------
    def create(self, req: webob.Request) -> webob.Response:
        data = validation.notification(http.read_json(req, self.max_body))
        hostname, note = self._host(data["hostname"])
        try:
            stored = intake.accept(
                self.store, type=data["type"], hostname=hostname,
                generated_time=data["generated_time"],
                payload=data["payload"], origin=API, note=note,
                now=self.clock.now(),
                duplicate_window=self.duplicate_window)
        except exception.Duplicate as exc:
            raise http.Refused(409, str(exc)) from exc
        LOG.info("Stored notification %s: %s %s on %s (%s)", stored.uuid,
                 stored.type, data["payload"].get("event"), stored.hostname,
                 stored.status.value)
        if stored.status is Status.NEW:
            self.on_stored()
        return http.respond(202, {"notification":
                                  views.notification(stored)})

    def _host(self, hostname: str) -> tuple[str, str | None]:
        """Nova's name for the host, and a note: which
        rule matched a name that is not Nova's own, or why the host could
        not be checked. An unknown host is refused; a Nova that cannot
        answer is not the monitor's fault, so the check moves to
        processing time."""
        try:
            found = self.check_host(hostname)
        except exception.UnknownHost as exc:
            raise http.Refused(400, f"notification.hostname: {exc}") from exc
        except exception.RecoveryError as exc:
            LOG.warning("Could not check host %s with Nova (%s); storing "
                        "the notification, the check runs when it is "
                        "processed", hostname, exc)
            return hostname, f"host not checked at intake: {exc}"
        if found.host == hostname:
            return hostname, None
        LOG.info("Notification hostname %r is Nova's %r (by its %s)",
                 hostname, found.host, found.rule)
        return found.host, (
            f"sent for {hostname!r}: Nova's compute host {found.host!r}, "
            f"matched by its {found.rule}")

    # -- read --------------------------------------------------------------
    def index(self, req: webob.Request) -> webob.Response:
        params = req.GET
        filters = {k: params[k] for k in FILTERS if k in params}
        _one_of(filters, "status", [s.value for s in Status])
        sort_key, sort_dir = http.sort(params, SORT_NAMES)
        owner = policy.owner_project(req)
        _owner_may(owner, filters, sort_key)
        generated_since = None
        if "generated-since" in params:
            generated_since = validation.parse_time(
                params["generated-since"], "generated-since")
        try:
            items = self.store.list_notifications(
                filters=filters, generated_since=generated_since,
                limit=http.limit(params), marker=params.get("marker"),
                sort_key=SORT_NAMES[sort_key], sort_dir=sort_dir,
                project_id=owner)
        except exception.NotFound as exc:
            raise http.Refused(400, f"marker: {exc}") from exc
        view = views.notification if owner is None else (
            views.owner_notification)
        return http.respond(200, {"notifications": [
            view(n) for n in items]})

    def show(self, req: webob.Request, uuid: str) -> webob.Response:
        owner = policy.owner_project(req)
        if owner is None:
            body = views.notification(self.store.get(uuid))
        else:
            self._entries(uuid, owner)
            body = views.owner_notification(self.store.get(uuid))
        if http.at_least(req, "1.1"):
            # None for an owner: the steps' messages name the host and
            # every instance.
            body["recovery_workflow_details"] = [] if owner else (
                views.workflow_details(self.store.step_events(uuid)))
        return http.respond(200, {"notification": body})

    def events(self, uuid: str) -> webob.Response:
        """The notification's decision log, in order (recovery's own)."""
        self.store.get(uuid)
        return http.respond(200, {"events": [
            views.event(e) for e in self.store.events(uuid)]})

    def _entries(self, uuid: str, owner: str | None) -> list[JournalEntry]:
        """The notification's journal entries; for an owner's read, those
        of the owner's instances, and if there are none the notification
        is not found (404, as one that does not exist: not 403, which
        would tell that it exists)."""
        notification = self.store.get(uuid)
        entries = self.store.journal_entries(uuid)
        if owner is None:
            if notification.kind.type is not NotificationType.COMPUTE_HOST:
                raise http.Refused(400, f"notification {uuid} is a "
                                        f"{notification.type} notification: "
                                        f"only COMPUTE_HOST ones have vmoves")
            return entries
        mine = [e for e in entries if e.result.project_id == owner]
        if not mine:
            raise exception.NotFound(f"no notification {uuid}")
        return mine

    def _vmoves(self, req: webob.Request,
                uuid: str) -> list[dict[str, Any]]:
        owner = policy.owner_project(req)
        view = views.vmove if owner is None else views.owner_vmove
        return [view(uuid, entry) for entry in self._entries(uuid, owner)]

    def vmove_index(self, req: webob.Request, uuid: str) -> webob.Response:
        params = req.GET
        filters = {k: params[k] for k in VMOVE_FILTERS if k in params}
        for key, allowed in VMOVE_FILTERS.items():
            _one_of(filters, key, list(allowed))
        sort_key, sort_dir = http.sort(params, VMOVE_SORT_KEYS)
        _owner_may(policy.owner_project(req), filters, sort_key)
        limit, marker = http.limit(params), params.get("marker")
        items = sorted(
            (v for v in self._vmoves(req, uuid)
             if all(v[k] == value for k, value in filters.items())),
            key=lambda v: (v[sort_key], v["id"]),
            reverse=sort_dir == "desc")
        if marker is not None:
            seen = [i for i, v in enumerate(items)
                    if marker in (v["uuid"], str(v["id"]))]
            if not seen:
                raise http.Refused(400, f"marker: marker {marker} not "
                                        f"found")
            items = items[seen[0] + 1:]
        return http.respond(200, {"vmoves": items[:limit]})

    def vmove_show(self, req: webob.Request, uuid: str,
                   vmove_id: str) -> webob.Response:
        for item in self._vmoves(req, uuid):
            if vmove_id in (item["uuid"], str(item["id"])):
                return http.respond(200, {"vmove": item})
        raise exception.NotFound(f"no vmove {vmove_id} in notification "
                                 f"{uuid}")


def _owner_may(owner: str | None, filters: dict[str, str],
               sort_key: str) -> None:
    """Refuse an owner's read a filter or sort key that names hosts."""
    asked = OWNER_UNSORTED & {*filters, sort_key}
    if owner is not None and asked:
        raise http.Refused(403, f"an owner's read (recovery_api:owner:read) "
                                f"cannot filter or sort by "
                                f"{', '.join(sorted(asked))}: the host is "
                                f"not shown to owners")


def _one_of(filters: dict[str, str], key: str, allowed: list[str]) -> None:
    if key in filters and filters[key] not in allowed:
        raise http.Refused(400, f"{key}: {filters[key]!r} is not one of "
                                f"{allowed}")
