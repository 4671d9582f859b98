"""The WSGI application of the API: version documents, Masakari's two
path forms, microversions, and the one place that turns what a handler
raises into an answer.
"""

import logging
import re
from collections.abc import Callable
from typing import Any
from typing import Protocol

import webob
import webob.dec

from recovery import exception
from recovery.api import http
from recovery.api import policy
from recovery.api import validation
from recovery.api.catalog import SegmentCatalog
from recovery.api.fencing import FencingAPI
from recovery.api.hosts import HostActionsAPI
from recovery.api.hosts import HostActionStore
from recovery.api.notifications import HostCheck
from recovery.api.notifications import NotificationAPI
from recovery.api.notifications import NotificationStore
from recovery.api.segments import SegmentAPI
from recovery.concurrency import Clock
from recovery.confirming import ConfirmStore
from recovery.confirming import OffCheck

LOG = logging.getLogger(__name__)

VERSION = {"id": "v1.0", "status": "CURRENT", "version": http.VERSIONS[-1],
           "min_version": http.VERSIONS[0], "updated": "2026-11-22T00:00:00Z"}
# The resources under /v1; anything else in their place must be a
# project id.
RESOURCES = frozenset({"notifications", "segments", "fencing",
                       "host-actions"})
# A project id as Masakari's router takes one by default: lower-case hex
# digits and dashes (Keystone issues uuid4().hex; a dashed UUID from an
# identity backend must not lose a monitor's notification to a 404).
# Anything else there is an unknown path: a mistyped resource
# (/v1/segmentz) answers 404, not the version document.
PROJECT_ID = re.compile(r"[0-9a-f-]+\Z")


def version(req: webob.Request) -> dict[str, Any]:
    """The version document, its link absolute (clients follow it)."""
    return {**VERSION, "links": [{"rel": "self",
                                  "href": f"{req.host_url}/v1/"}]}


def _other_project(req: webob.Request, project: str) -> None:
    """``/v1/{project_id}/...`` is ``/v1/...``, as Masakari routes it:
    clouds register the endpoint as ``.../v1/$(project_id)s``, and every
    client then puts its project in the path. With Keystone, the project
    must be the token's (keystonemiddleware sets these headers and drops
    any a caller sent); another is a malformed URL (400), as Masakari
    answers it."""
    token_project = req.headers.get("X-Project-Id")
    if (req.headers.get("X-Identity-Status") == "Confirmed"
            and token_project and project != token_project):
        raise http.Refused(400, f"the project id in the URL ({project}) "
                                f"is not the token's project "
                                f"({token_project})")


class API:
    """``/`` (the versions), ``/v1`` and every resource under it."""

    def __init__(self, notifications: NotificationAPI,
                 segments: SegmentAPI, fencing: FencingAPI,
                 hosts: HostActionsAPI, checker: policy.Policy):
        self.notifications = notifications
        self.segments = segments
        self.fencing = fencing
        self.hosts = hosts
        self.checker = checker

    @webob.dec.wsgify
    def __call__(self, req: webob.Request) -> webob.Response:
        try:
            parts = [p for p in req.path_info.split("/") if p]
        except UnicodeDecodeError:
            return http.error(400, "the request URL is not valid UTF-8")
        if not parts:
            # The document clients discover versions with, before they
            # can ask for one; 200, as Masakari answers and documents it.
            return self._answer(req, lambda: {"GET": lambda: http.respond(
                200, {"versions": [version(req)]})})
        try:
            asked = http.negotiate(req)
        except http.Refused as exc:
            response = http.error(exc.status, exc.message)
            if exc.status == 406:
                # Another version may be acceptable: caches must key on
                # the header (Masakari's 406 says so too).
                response.headers.add("Vary", http.VERSION_HEADER)
            return response
        return http.stamp(
            self._answer(req, lambda: self._handlers(req, parts)), asked)

    def _handlers(self, req: webob.Request,
                  parts: list[str]) -> http.Handlers | None:
        if parts[0] != "v1":
            return None
        if len(parts) >= 2 and parts[1] not in RESOURCES:
            if not PROJECT_ID.match(parts[1]):
                return None
            _other_project(req, parts.pop(1))
        if len(parts) == 1:
            return {"GET": lambda: http.respond(
                200, {"version": version(req)})}
        if parts[1] == "notifications":
            found = self.notifications.route(req, parts[2:])
        elif parts[1] == "segments":
            found = self.segments.route(req, parts[2:])
        elif parts[1] == "fencing":
            found = self.fencing.route(req, parts[2:])
        elif parts[1] == "host-actions":
            found = self.hosts.route(req, parts[2:])
        else:
            return None
        return found and self._authorized(req, parts[1:], found)

    def _authorized(self, req: webob.Request, resource: list[str],
                    handlers: http.Handlers) -> http.Handlers:
        """``handlers``, each behind its route's policy rule: checked
        once the route is known (404 and 405 come first, as in
        Masakari), before anything is read or stored."""
        def guarded(method: str, handler: Callable[[], webob.Response]
                    ) -> Callable[[], webob.Response]:
            def run() -> webob.Response:
                self.checker.authorize(
                    req, policy.route_rule(method, resource))
                return handler()
            return run
        return {method: guarded(method, handler)
                for method, handler in handlers.items()}

    @staticmethod
    def _answer(req: webob.Request,
                route: Callable[[], http.Handlers | None]) -> webob.Response:
        """Run the handler ``route`` finds for the request's method; what
        either raises becomes the error it stands for."""
        try:
            handlers = route()
            if handlers is None:
                return http.error(404, f"no resource at {req.path_info}")
            handler = handlers.get(req.method)
            if handler is None:
                response = http.error(405, f"{req.method} is not allowed "
                                           f"on {req.path_info}")
                response.headers["Allow"] = ", ".join(handlers)
                return response
            return handler()
        except http.Refused as exc:
            return http.error(exc.status, exc.message)
        except validation.Invalid as exc:
            return http.error(400, str(exc))
        except exception.NotFound as exc:
            return http.error(404, str(exc))
        except (exception.Duplicate, exception.InUse) as exc:
            return http.error(409, str(exc))
        except exception.StoreUnavailable as exc:
            # Nothing was stored: the caller must send it again.
            LOG.error("Answering 503: %s", exc)
            return http.error(503, f"the store cannot be reached; nothing "
                                   f"was stored, try again: {exc}")
        except UnicodeDecodeError:
            # webob decodes the query string lazily.
            return http.error(400, "the request URL is not valid UTF-8")


class APIStore(NotificationStore, SegmentCatalog, ConfirmStore,
               HostActionStore, Protocol):
    """What the whole API needs from the store."""


def from_conf(conf: Any, store: APIStore, check_host: HostCheck,
              clock: Clock,
              on_stored: Callable[[], None] = lambda: None, *,
              liveness: OffCheck) -> API:
    """``build``, with the limits ``[api]`` sets: the engine's embedded
    API and the WSGI entry point alike."""
    return build(store, check_host, clock,
                 max_body=conf.api.max_request_body_size,
                 duplicate_window=(
                     conf.api.duplicate_notification_detection_interval),
                 on_stored=on_stored, checker=policy.from_conf(conf),
                 liveness=liveness)


def build(store: APIStore, check_host: HostCheck, clock: Clock, *,
          max_body: int, duplicate_window: float, liveness: OffCheck,
          on_stored: Callable[[], None] = lambda: None,
          checker: policy.Policy | None = None) -> API:
    """The API over ``store``: ``check_host`` says which compute host a
    name means, ``liveness`` whether a host may be off (before an
    operator's confirmation), ``on_stored`` is told of each new
    notification and each confirmation, ``checker`` enforces the policy
    (the rules' defaults if None)."""
    return API(NotificationAPI(store, check_host, clock, max_body=max_body,
                               duplicate_window=duplicate_window,
                               on_stored=on_stored),
               SegmentAPI(store, check_host, clock, max_body=max_body),
               FencingAPI(store, liveness, clock, max_body=max_body,
                          on_confirmed=on_stored),
               HostActionsAPI(store, check_host, clock, max_body=max_body,
                              on_stored=on_stored),
               checker or policy.defaults())
