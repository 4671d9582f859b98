"""The WSGI application of the notification API.

Store first, answer second: a notification is committed before the 202
goes out, and nothing is stored on any 4xx.
"""

import json
import logging
from collections.abc import Callable
from typing import Any

import webob
import webob.dec
import webob.exc

from recovery import exception
from recovery import intake
from recovery.api import validation
from recovery.api import views
from recovery.concurrency import Clock
from recovery.db.notifications import SORT_KEYS
from recovery.db.store import Store
from recovery.hostnames import HostMatch
from recovery.notification import Status

LOG = logging.getLogger(__name__)

# The compute host a name means (recovery.hostnames); raises UnknownHost,
# or a Nova error when Nova cannot say.
HostCheck = Callable[[str], HostMatch]

VERSION = {"id": "v1.0", "status": "CURRENT", "version": "1.3",
           "min_version": "1.0", "updated": "2026-11-22T00:00:00Z"}
# The resources under /v1; anything else in their place is a project id.
RESOURCES = frozenset({"notifications", "segments"})


def version(req: webob.Request) -> dict[str, Any]:
    """The version document, its link absolute (clients follow it)."""
    return {**VERSION, "links": [{"rel": "self",
                                  "href": f"{req.host_url}/v1/"}]}


def error(status: int, message: str) -> webob.Response:
    """An error in the shape OpenStack clients read."""
    names = {400: "badRequest", 404: "itemNotFound", 405: "notAllowed",
             409: "conflictingRequest", 413: "requestEntityTooLarge",
             415: "unsupportedMediaType", 503: "serviceUnavailable"}
    return webob.Response(
        status=status, content_type="application/json", charset="utf-8",
        json_body={names.get(status, "error"): {"code": status,
                                                "message": message}})


def respond(status: int, body: dict[str, Any]) -> webob.Response:
    return webob.Response(status=status, content_type="application/json",
                          charset="utf-8", json_body=body)


def _other_project(req: webob.Request,
                   project: str) -> webob.Response | None:
    """``/v1/{project_id}/...`` is ``/v1/...``, as Masakari routes it:
    clouds register the endpoint as ``.../v1/$(project_id)s``, and every
    client then puts its project in the path. With Keystone, the project
    must be the token's (keystonemiddleware sets these headers and drops
    any a caller sent)."""
    token_project = req.headers.get("X-Project-Id")
    if (req.headers.get("X-Identity-Status") == "Confirmed"
            and token_project and project != token_project):
        return error(403, f"the project id in the URL ({project}) is not "
                          f"the token's project ({token_project})")
    return None


class NotificationAPI:
    def __init__(self, store: Store, check_host: HostCheck, clock: Clock,
                 *, max_body: int, duplicate_window: float,
                 on_stored: Callable[[], None] = lambda: None):
        self.store = store
        self.check_host = check_host
        self.clock = clock
        self.max_body = max_body
        self.duplicate_window = duplicate_window
        self.on_stored = on_stored
        # Here, not at the top: the segment handlers build on this module.
        from recovery.api.segments import SegmentAPI

        self.segments = SegmentAPI(store, check_host, clock, self._body)

    @webob.dec.wsgify
    def __call__(self, req: webob.Request) -> webob.Response:
        try:
            parts = [p for p in req.path_info.split("/") if p]
            if len(parts) >= 2 and parts[0] == "v1" and (
                    parts[1] not in RESOURCES):
                refused = _other_project(req, parts.pop(1))
                if refused is not None:
                    return refused
            return self._route(req, parts)
        except exception.NotFound as exc:
            return error(404, str(exc))
        except exception.StoreUnavailable as exc:
            # Nothing was stored: the monitor must send it again.
            LOG.error("Answering 503: %s", exc)
            return error(503, f"the store cannot be reached; nothing was "
                              f"stored, try again: {exc}")
        except UnicodeDecodeError:
            # webob decodes the path and the query string lazily.
            return error(400, "the request URL is not valid UTF-8")

    def _route(self, req: webob.Request, parts: list[str]) -> Any:
        if not parts:
            return self._only(req, "GET") or respond(
                300, {"versions": [version(req)]})
        if parts == ["v1"]:
            return self._only(req, "GET") or respond(
                200, {"version": version(req)})
        if parts == ["v1", "notifications"]:
            if req.method == "POST":
                return self.create(req)
            return self._only(req, "GET") or self.index(req)
        if parts[:2] == ["v1", "notifications"] and len(parts) == 3:
            return self._only(req, "GET") or self.show(parts[2])
        if (parts[:2] == ["v1", "notifications"] and len(parts) == 4
                and parts[3] == "vmoves"):
            return self._only(req, "GET") or self.vmoves(parts[2])
        if parts[:2] == ["v1", "segments"]:
            return self.segments.route(req, parts[2:])
        return error(404, f"no resource at {req.path_info}")

    @staticmethod
    def _only(req: webob.Request, method: str) -> webob.Response | None:
        if req.method != method:
            return error(405, f"{req.method} is not allowed on "
                              f"{req.path_info}")
        return None

    # -- create ------------------------------------------------------------
    def _body(self, req: webob.Request) -> Any:
        if req.content_type != "application/json":
            raise _Refused(415, f"Content-Type must be application/json, "
                                f"not {req.content_type or 'missing'}")
        if req.content_length is not None and (
                req.content_length > self.max_body):
            raise _Refused(413, f"body larger than {self.max_body} bytes")
        raw = req.body_file.read(self.max_body + 1)
        if len(raw) > self.max_body:
            raise _Refused(413, f"body larger than {self.max_body} bytes")
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise _Refused(400, f"body is not valid JSON: {exc}") from exc

    def create(self, req: webob.Request) -> webob.Response:
        try:
            data = validation.notification(self._body(req))
            hostname, source_host_uuid, note = self._host(data["hostname"])
        except _Refused as exc:
            return error(exc.status, exc.message)
        except validation.Invalid as exc:
            return error(400, str(exc))
        try:
            stored = intake.accept(
                self.store, type=data["type"], hostname=hostname,
                generated_time=data["generated_time"],
                payload=data["payload"], origin="api", note=note,
                source_host_uuid=source_host_uuid, now=self.clock.now(),
                duplicate_window=self.duplicate_window)
        except exception.Duplicate as exc:
            return error(409, str(exc))
        LOG.info("Stored notification %s: %s %s on %s (%s)", stored.uuid,
                 stored.type, data["payload"].get("event"), stored.hostname,
                 stored.status.value)
        if stored.status is Status.NEW:
            self.on_stored()
        return respond(202, {"notification": views.notification(stored)})

    def _host(self, hostname: str
              ) -> tuple[str, str | None, str | None]:
        """Nova's name for the host, its service id, and a note: which
        rule matched a name that is not Nova's own, or why the host could
        not be checked. An unknown host is refused; a Nova that cannot
        answer is not the monitor's fault, so the check moves to
        processing time."""
        try:
            found = self.check_host(hostname)
        except exception.UnknownHost as exc:
            raise _Refused(400, f"notification.hostname: {exc}") from exc
        except exception.RecoveryError as exc:
            LOG.warning("Could not check host %s with Nova (%s); storing "
                        "the notification, the check runs when it is "
                        "processed", hostname, exc)
            return hostname, None, f"host not checked at intake: {exc}"
        if found.host == hostname:
            return hostname, found.service_id, None
        LOG.info("Notification hostname %r is Nova's %r (by its %s)",
                 hostname, found.host, found.rule)
        return found.host, found.service_id, (
            f"sent for {hostname!r}: Nova's compute host {found.host!r}, "
            f"matched by its {found.rule}")

    # -- read --------------------------------------------------------------
    def index(self, req: webob.Request) -> webob.Response:
        params = req.GET
        try:
            query = _list_query(params)
        except validation.Invalid as exc:
            return error(400, str(exc))
        try:
            items = self.store.list_notifications(**query)
        except exception.NotFound as exc:
            return error(400, f"marker: {exc}")
        return respond(200, {"notifications": [views.notification(n)
                                               for n in items]})

    def show(self, uuid: str) -> webob.Response:
        body = views.notification(self.store.get(uuid))
        body["recovery_workflow_details"] = views.workflow_details(
            self.store.step_events(uuid))
        return respond(200, {"notification": body})

    def vmoves(self, uuid: str) -> webob.Response:
        self.store.get(uuid)
        return respond(200, {"vmoves": [
            views.vmove(uuid, r) for r in self.store.journal(uuid)]})


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


FILTERS = ("status", "source_host_uuid", "type", "hostname")
# More than any table holds; keeps LIMIT in every database's range.
MAX_LIMIT = 2 ** 31 - 1


def _list_query(params: Any) -> dict[str, Any]:
    filters = {k: params[k] for k in FILTERS if k in params}
    if "status" in filters and filters["status"] not in {
            s.value for s in Status}:
        raise validation.Invalid(f"status: {filters['status']!r} is not "
                                 f"one of {[s.value for s in Status]}")
    query: dict[str, Any] = {"filters": filters,
                             "marker": params.get("marker"),
                             "sort_key": params.get("sort_key", "created_at"),
                             "sort_dir": params.get("sort_dir", "desc")}
    if query["sort_key"] not in SORT_KEYS:
        raise validation.Invalid(f"sort_key: must be one of "
                                 f"{sorted(SORT_KEYS)}")
    if query["sort_dir"] not in ("asc", "desc"):
        raise validation.Invalid("sort_dir: must be asc or desc")
    if "limit" in params:
        limit = params["limit"]
        if not (limit.isascii() and limit.isdigit()) or int(limit) < 1:
            raise validation.Invalid("limit: must be a positive integer")
        query["limit"] = min(int(limit), MAX_LIMIT)
    if "generated-since" in params:
        query["generated_since"] = validation.parse_time(
            params["generated-since"], "generated-since")
    return query
