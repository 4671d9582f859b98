"""What every handler of the API shares: errors and responses in
Masakari's shapes, the JSON body, microversions, paging and sorting.
"""

import json
import re
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

import microversion_parse
import webob

SERVICE_TYPE = "instance-ha"
VERSION_HEADER = "OpenStack-API-Version"
#: Masakari 22's microversions: 1.1 adds a notification's
#: recovery_workflow_details, 1.2 a segment's enabled flag in requests,
#: 1.3 vmoves (which Masakari serves at every version, and so does this).
VERSIONS = ("1.0", "1.1", "1.2", "1.3")
_VERSION_KEY = "recovery.api_version"
# The form Masakari reads a version in: X.Y in decimal, without a sign or
# a leading zero ('1.03', '01.2', '+1.1' and '0.9' are not versions).
_VERSION_FORM = re.compile(r"[1-9][0-9]*\.(?:[1-9][0-9]*|0)\Z")

#: A resource's handlers by HTTP method.
Handlers = dict[str, Callable[[], webob.Response]]

#: More than any table holds; keeps LIMIT in every database's range.
MAX_LIMIT = 2 ** 31 - 1

ERROR_NAMES = {400: "badRequest", 401: "unauthorized", 403: "forbidden",
               404: "itemNotFound", 405: "notAllowed",
               406: "notAcceptable", 409: "conflictingRequest",
               413: "requestEntityTooLarge", 415: "unsupportedMediaType",
               503: "serviceUnavailable"}


class Refused(Exception):
    """The request is answered with ``status`` and ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def error(status: int, message: str) -> webob.Response:
    """An error in the shape OpenStack clients read."""
    return webob.Response(
        status=status, content_type="application/json", charset="utf-8",
        json_body={ERROR_NAMES.get(status, "error"): {"code": status,
                                                      "message": message}})


def respond(status: int, body: dict[str, Any]) -> webob.Response:
    return webob.Response(status=status, content_type="application/json",
                          charset="utf-8", json_body=body)


def read_json(req: webob.Request, max_body: int) -> Any:
    """The request's JSON body: 415 unless it says JSON, 413 past
    ``max_body`` bytes (read no further), 400 if it does not parse."""
    if req.content_type != "application/json":
        raise Refused(415, f"Content-Type must be application/json, not "
                           f"{req.content_type or 'missing'}")
    too_large = Refused(413, f"body larger than {max_body} bytes")
    if req.content_length is not None and req.content_length > max_body:
        raise too_large
    raw = req.body_file.read(max_body + 1)
    if len(raw) > max_body:
        raise too_large
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise Refused(400, f"body is not valid JSON: {exc}") from exc


# -- microversions -----------------------------------------------------------
def negotiate(req: webob.Request) -> microversion_parse.Version:
    """The request's microversion, remembered on it: the minimum when it
    names none, the maximum for ``latest``; 400 for a malformed one, 406
    for one outside 1.0-1.3, as Masakari answers."""
    asked = microversion_parse.get_version(req.headers, SERVICE_TYPE)
    if asked not in (None, "latest") and not _VERSION_FORM.match(asked):
        # microversion-parse alone would read '1.03' as 1.3.
        raise Refused(400, f"{VERSION_HEADER}: {asked!r} is not a "
                           f"version: X.Y in decimal, no leading zero")
    try:
        found = microversion_parse.extract_version(
            req.headers, SERVICE_TYPE, VERSIONS)
    except ValueError as exc:
        raise Refused(406, f"{VERSION_HEADER}: {exc}; this API supports "
                           f"{SERVICE_TYPE} {VERSIONS[0]} to "
                           f"{VERSIONS[-1]}") from exc
    req.environ[_VERSION_KEY] = found
    return found


def stamp(response: webob.Response,
          version: microversion_parse.Version) -> webob.Response:
    """The version a response was made for, in Masakari's headers."""
    response.headers[VERSION_HEADER] = f"{SERVICE_TYPE} {version}"
    response.headers.add("Vary", VERSION_HEADER)
    return response


def at_least(req: webob.Request, version: str) -> bool:
    """Did the request ask for ``version`` or a later one?"""
    return req.environ[_VERSION_KEY] >= (
        microversion_parse.parse_version_string(version))


# -- paging and sorting ------------------------------------------------------
def limit(params: Any) -> int | None:
    """The page size; 0 is an empty page, as in Masakari."""
    if "limit" not in params:
        return None
    raw = params["limit"]
    if not (raw.isascii() and raw.isdigit()):
        raise Refused(400, "limit: must be a non-negative integer")
    return min(int(raw), MAX_LIMIT)


def sort(params: Any, keys: Iterable[str]) -> tuple[str, str]:
    """The ``sort_key`` and ``sort_dir`` of a listing, Masakari's
    defaults (``created_at``, ``desc``) when absent; one of each."""
    chosen = []
    for name, default, allowed in (
            ("sort_key", "created_at", sorted(keys)),
            ("sort_dir", "desc", ["asc", "desc"])):
        given = params.getall(name)
        if len(given) > 1:
            raise Refused(400, f"{name}: give it once, not {len(given)} "
                               f"times")
        value = given[0].strip() if given else default
        if value not in allowed:
            raise Refused(400, f"{name}: {value!r} is not one of "
                               f"{allowed}")
        chosen.append(value)
    return chosen[0], chosen[1]
