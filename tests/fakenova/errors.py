"""Nova-style API errors, request context and microversion parsing."""

from __future__ import annotations

import dataclasses
import re

MIN_VERSION = (2, 1)

# nova/api/openstack/wsgi.py: HTTP status -> fault name; others computeFault
FAULT_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    409: "conflictingRequest",
    413: "overLimit",
    415: "badMediaType",
    429: "overLimit",
    501: "notImplemented",
    503: "serviceUnavailable",
}

DEFAULT_MESSAGES = {
    500: "Unexpected API Error. Please report this at "
    "http://bugs.launchpad.net/nova/ and attach the Nova API log if "
    "possible.\n<class 'nova.exception.InjectedFault'>",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

_VERSION_RE = re.compile(r"^([1-9]\d*)\.([1-9]\d*|0)$")


class ApiError(Exception):
    """An error answered to the client in Nova's fault format."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def body(self) -> dict:
        name = FAULT_NAMES.get(self.status, "computeFault")
        return {name: {"code": self.status, "message": self.message}}


def fault_body(status: int, message: str | None = None) -> dict:
    text = message or DEFAULT_MESSAGES.get(status, "Injected fault")
    return ApiError(status, text).body()


def policy_denied(rule: str) -> ApiError:
    return ApiError(403, f"Policy doesn't allow {rule} to be performed.")


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def not_found(message: str) -> ApiError:
    return ApiError(404, message)


def conflict(message: str) -> ApiError:
    return ApiError(409, message)


def invalid_state(server_id: str, action: str, attr: str,
                  state: str | None) -> ApiError:
    """raise_http_conflict_for_instance_invalid_state() wording."""
    return conflict(f"Cannot '{action}' instance {server_id} while it is "
                    f"in {attr} {state}")


@dataclasses.dataclass(frozen=True)
class RequestContext:
    user_id: str
    project_id: str
    roles: tuple[str, ...]
    is_admin: bool
    version: tuple[int, int] = MIN_VERSION

    def at_least(self, version: str) -> bool:
        return self.version >= parse_version_string(version)


def context_from_token(token: str | None,
                       version: tuple[int, int]) -> RequestContext:
    """Token 'user:project[:role,role]'; anything else is the admin."""
    parts = (token or "").split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        return RequestContext("admin", "admin", ("admin",), True, version)
    if len(parts) == 2:
        roles: tuple[str, ...] = ("admin",)
    else:
        roles = tuple(role for role in parts[2].split(",") if role)
    return RequestContext(parts[0], parts[1], roles, "admin" in roles,
                          version)


def parse_version_string(text: str) -> tuple[int, int]:
    match = _VERSION_RE.match(text.strip())
    if not match:
        raise bad_request(f"API Version String {text} is of invalid format. "
                          "Must be of format MajorNum.MinorNum.")
    return int(match.group(1)), int(match.group(2))


def format_version(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def requested_version(new_header: str | None, legacy_header: str | None,
                      max_version: str) -> tuple[int, int]:
    """Microversion from OpenStack-API-Version or the legacy header."""
    text = None
    for item in (new_header or "").split(","):
        fields = item.strip().split()
        if len(fields) == 2 and fields[0].lower() == "compute":
            text = fields[1]
    if text is None and legacy_header:
        text = legacy_header.strip()
    maximum = parse_version_string(max_version)
    if text is None:
        return MIN_VERSION
    if text.lower() == "latest":
        return maximum
    version = parse_version_string(text)
    if not MIN_VERSION <= version <= maximum:
        raise ApiError(406, f"Version {text} is not supported by the API. "
                       f"Minimum is {format_version(MIN_VERSION)} and "
                       f"maximum is {max_version}.")
    return version
