"""What a notification must look like (Masakari's schema), with errors
that name the field."""

import datetime
from typing import Any

from recovery.db.segments import RECOVERY_METHODS
from recovery.notification import NotificationType

# \Z, not $: Python's $ also matches before a trailing newline.
# A "description" is what an error says when the "pattern" fails.
HOSTNAME = {"type": "string", "minLength": 1, "maxLength": 255,
            "pattern": "^[a-zA-Z0-9-._]*\\Z",
            "description": "must be letters, digits, '-', '.' and '_' only"}
EVENT = {"type": "string", "enum": ["STOPPED", "STARTED"]}

# Each type's payload, by the type's name on the wire.
PAYLOADS = {
    NotificationType.COMPUTE_HOST.value: {
        "type": "object",
        "properties": {
            "event": EVENT,
            "host_status": {"type": "string",
                            "enum": ["NORMAL", "UNKNOWN"]},
            "cluster_status": {"type": "string",
                               "enum": ["ONLINE", "OFFLINE"]},
        },
        "required": ["event"],
        "additionalProperties": False,
    },
    NotificationType.PROCESS.value: {
        "type": "object",
        "properties": {"process_name": {"type": "string", "minLength": 1,
                                        "maxLength": 255},
                       "event": EVENT},
        "required": ["process_name", "event"],
        "additionalProperties": False,
    },
    NotificationType.VM.value: {
        "type": "object",
        "properties": {
            "instance_uuid": {"type": "string", "format": "uuid"},
            "vir_domain_event": {"type": "string", "minLength": 1,
                                 "maxLength": 255},
            "event": {"type": "string", "minLength": 1, "maxLength": 255},
        },
        "required": ["instance_uuid", "vir_domain_event", "event"],
        "additionalProperties": False,
    },
}

CREATE = {
    "type": "object",
    "properties": {
        "notification": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": sorted(PAYLOADS)},
                "hostname": HOSTNAME,
                "generated_time": {"type": "string"},
                "payload": {"type": "object"},
            },
            "required": ["type", "hostname", "generated_time", "payload"],
            "additionalProperties": False,
        },
    },
    "required": ["notification"],
    "additionalProperties": False,
}


# Failover segments and hosts (Masakari's schemas; what Masakari requires
# but this project can default, it accepts and defaults).
# No leading or trailing white space: names are typed on command lines.
NAME = {"type": "string", "minLength": 1, "maxLength": 255,
        "pattern": "^\\S(.*\\S)?\\Z",
        "description": "must have no white space at either end"}
# Masakari's clients send booleans as JSON booleans or as strings.
TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
FALSE = frozenset({"false", "f", "no", "n", "off", "0"})
BOOLEAN = {"type": ["boolean", "string"],
           "pattern": f"(?i)^({'|'.join(sorted(TRUE | FALSE))})\\Z",
           "description": "must be a boolean (true or false)"}
# A description and control attributes are free text, stored as TEXT:
# Masakari sets no length, nor does this (the body's size limit bounds it).
SEGMENT_FIELDS = {
    "name": NAME,
    "description": {"type": ["string", "null"]},
    "recovery_method": {"type": "string", "enum": list(RECOVERY_METHODS)},
    "service_type": NAME,
    "enabled": BOOLEAN,
}
HOST_FIELDS = {
    "name": HOSTNAME,
    # Masakari's may be empty; recovery stores it and never reads it.
    "type": {**NAME, "minLength": 0, "pattern": "^(\\S(.*\\S)?)?\\Z"},
    "control_attributes": {"type": "string"},
    "reserved": BOOLEAN,
    "on_maintenance": BOOLEAN,
}


def _resource(key: str, fields: dict[str, Any],
              required: list[str]) -> dict[str, Any]:
    """``{key: {...}}`` with only ``fields``; an update (no ``required``)
    must change at least one."""
    inner: dict[str, Any] = {"type": "object", "properties": fields,
                             "additionalProperties": False}
    if required:
        inner["required"] = required
    else:
        inner["minProperties"] = 1
    return {"type": "object", "properties": {key: inner},
            "required": [key], "additionalProperties": False}


SEGMENT_CREATE = _resource("segment", SEGMENT_FIELDS,
                           ["name", "recovery_method"])
SEGMENT_UPDATE = _resource("segment", SEGMENT_FIELDS, [])
# Before microversion 1.2, a segment had no enabled flag to send.
_BEFORE_ENABLED = {k: v for k, v in SEGMENT_FIELDS.items() if k != "enabled"}
SEGMENT_CREATE_V10 = _resource("segment", _BEFORE_ENABLED,
                               ["name", "recovery_method"])
SEGMENT_UPDATE_V10 = _resource("segment", _BEFORE_ENABLED, [])
HOST_CREATE = _resource("host", HOST_FIELDS, ["name"])
HOST_UPDATE = _resource("host", HOST_FIELDS, [])


# An operator's confirmation that a host is off (recovery's own).
CONFIRM = {
    "type": "object",
    "properties": {"reason": {"type": "string"}},
    "required": ["reason"],
    "additionalProperties": False,
}
HOST_ACTION = {
    "type": "object",
    "properties": {"reason": {"type": "string"},
                   "allow_partial": {"type": "boolean"}},
    "required": ["reason"],
    "additionalProperties": False,
}
# The longest reason taken, in characters: a line of a listing, not a
# report (the ticket it names holds the rest).
REASON_MAX = 1000


class Invalid(ValueError):
    """The body does not match the schema; the message names the field."""


def _check(schema: dict[str, Any], document: Any, where: str) -> None:
    # Imported on first use: the commands import this module for
    # ``Invalid`` and ``parse_time``, and most never validate a body.
    import jsonschema

    validator = jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.FormatChecker(["uuid"]))
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        path = ".".join([where, *(str(p) for p in error.absolute_path)])
        message = error.message
        if error.validator == "pattern" and "description" in error.schema:
            message = f"{error.instance!r} {error.schema['description']}"
        raise Invalid(f"{path}: {message}")


def parse_time(value: str, field: str) -> datetime.datetime:
    """An ISO 8601 time; without an offset it is taken as UTC."""
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(
            f"{field}: {value!r} is not an ISO 8601 date-time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    try:
        return parsed.astimezone(datetime.timezone.utc)
    except OverflowError:
        raise Invalid(f"{field}: {value!r} is out of range") from None


def notification(body: Any) -> dict[str, Any]:
    """The validated ``notification`` of a create request."""
    _check(CREATE, body, "body")
    data = body["notification"]
    _check(PAYLOADS[data["type"]], data["payload"], "notification.payload")
    data["generated_time"] = parse_time(data["generated_time"],
                                        "notification.generated_time")
    return data


def flag(value: bool | str, field: str) -> bool:
    """A boolean from JSON or from a query string ('true', 'no', ...)."""
    if isinstance(value, bool):
        return value
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise Invalid(f"{field}: {value!r} is not a boolean (true or false)")


def _fields(schema: dict[str, Any], body: Any, key: str) -> dict[str, Any]:
    _check(schema, body, "body")
    data = body[key]
    for name in ("enabled", "reserved", "on_maintenance"):
        if name in data:
            data[name] = flag(data[name], f"{key}.{name}")
    return data


def segment(body: Any, *, create: bool,
            enabled: bool = True) -> dict[str, Any]:
    """The validated fields of a segment create or update; ``enabled``:
    may it set the enabled flag (API microversion 1.2 and later)."""
    schemas = ((SEGMENT_CREATE, SEGMENT_UPDATE) if enabled
               else (SEGMENT_CREATE_V10, SEGMENT_UPDATE_V10))
    return _fields(schemas[0] if create else schemas[1], body, "segment")


def host(body: Any, *, create: bool) -> dict[str, Any]:
    """The validated fields of a host create or update."""
    return _fields(HOST_CREATE if create else HOST_UPDATE, body, "host")


def reason(value: str, field: str) -> str:
    """An operator's reason, stripped: one line of printable text, not
    empty, at most ``REASON_MAX`` characters."""
    text = value.strip()
    if not text:
        raise Invalid(f"{field}: say why, for the record (what was "
                      f"checked, a ticket): it must not be empty")
    if len(text) > REASON_MAX:
        raise Invalid(f"{field}: {len(text)} characters, more than "
                      f"{REASON_MAX}")
    if not text.isprintable():
        raise Invalid(f"{field}: must be one line of printable text")
    return text


def host_action(body: Any, *, partial: bool) -> tuple[str, bool]:
    """A drain's or a bring-back's reason, and (a drain's alone) whether
    it may leave what finds no room."""
    _check(HOST_ACTION, body, "body")
    if "allow_partial" in body and not partial:
        raise Invalid("body.allow_partial: a bring-back takes none")
    return reason(body["reason"], "reason"), body.get("allow_partial",
                                                        False)


def confirmation(body: Any) -> str:
    """The reason of a confirmation request."""
    _check(CONFIRM, body, "body")
    return reason(body["reason"], "reason")
