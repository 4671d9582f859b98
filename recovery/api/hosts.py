"""Drains and bring-backs over the API (recovery's own):

- ``POST /v1/host-actions/{hostname}/drain`` with ``{"reason": ...,
  "allow_partial": false}``: a drain, as ``recovery host-drain``;
- ``POST /v1/host-actions/{hostname}/bring-back`` with ``{"reason":
  ...}``: a host return that brings the instances home, as ``recovery
  host-return --bring-back``.

Each is stored as a notification the engine runs, and answered 202 with
it; its ``received`` event names the caller and the reason. 400 for a
body without a reason (or a bring-back with ``allow_partial``) or a host
Nova does not know; 409 while the host has a failure or a drain under
way. Nothing is stored on any of them.
"""

import logging
from collections.abc import Callable
from typing import Protocol

import webob

from recovery import exception
from recovery import intake
from recovery.api import http
from recovery.api import policy
from recovery.api import validation
from recovery.api import views
from recovery.concurrency import Clock
from recovery.hostnames import HostMatch
from recovery.notification import API
from recovery.notification import HOST_EVENT
from recovery.notification import Kind

LOG = logging.getLogger(__name__)

# What holds back a drain or a bring-back of a host.
BUSY = (Kind.HOST_FAILURE, Kind.HOST_DRAIN)


class HostActionStore(intake.AcceptStore, Protocol):
    def hosts_acting(self, kind: Kind) -> set[str]: ...


class HostActionsAPI:
    """The handlers under ``/v1/host-actions``."""

    def __init__(self, store: HostActionStore,
                 check_host: Callable[[str], HostMatch], clock: Clock, *,
                 max_body: int, on_stored: Callable[[], None]):
        self.store = store
        self.check_host = check_host
        self.clock = clock
        self.max_body = max_body
        self.on_stored = on_stored

    def route(self, req: webob.Request,
              parts: list[str]) -> http.Handlers | None:
        if len(parts) == 2 and parts[1] == "drain":
            return {"POST": lambda: self.act(req, parts[0], Kind.HOST_DRAIN)}
        if len(parts) == 2 and parts[1] == "bring-back":
            return {"POST": lambda: self.act(req, parts[0],
                                             Kind.HOST_RETURN)}
        return None

    def act(self, req: webob.Request, name: str,
            kind: Kind) -> webob.Response:
        drain = kind is Kind.HOST_DRAIN
        reason, partial = validation.host_action(
            http.read_json(req, self.max_body), partial=drain)
        try:
            hostname = self.check_host(name).host
        except exception.UnknownHost as exc:
            raise http.Refused(400, str(exc)) from exc
        for busy in BUSY:
            if hostname in self.store.hosts_acting(busy):
                raise http.Refused(409, f"{hostname} has a {busy.value} "
                                        f"under way: nothing was stored")
        payload = ({"event": HOST_EVENT[kind], "allow_partial": partial}
                   if drain else {"event": HOST_EVENT[kind],
                                  "host_status": "NORMAL",
                                  "bring_back": True})
        what = "drain" if drain else "return and bring-back"
        who = policy.caller(req)
        stored = intake.accept(
            self.store, type=kind.type, hostname=hostname, kind=kind,
            generated_time=self.clock.now(), payload=payload, origin=API,
            now=self.clock.now(), note=f"{what} asked by {who}: {reason}")
        LOG.warning("%s asked for a %s of %s over the API (%s): "
                    "notification %s", who, what, hostname, reason,
                    stored.uuid)
        self.on_stored()
        return http.respond(202, {"notification":
                                  views.notification(stored)})
