"""What a notification must look like (Masakari's schema), with errors
that name the field."""

import datetime
from typing import Any

import jsonschema

# \Z, not $: Python's $ also matches before a trailing newline.
HOSTNAME = {"type": "string", "minLength": 1, "maxLength": 255,
            "pattern": "^[a-zA-Z0-9-._]*\\Z"}
EVENT = {"type": "string", "enum": ["STOPPED", "STARTED"]}

PAYLOADS = {
    "COMPUTE_HOST": {
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
    "PROCESS": {
        "type": "object",
        "properties": {"process_name": {"type": "string", "minLength": 1,
                                        "maxLength": 255},
                       "event": EVENT},
        "required": ["process_name", "event"],
        "additionalProperties": False,
    },
    "VM": {
        "type": "object",
        "properties": {
            "instance_uuid": {"type": "string", "format": "uuid"},
            "vir_domain_event": {"type": "string", "maxLength": 255},
            "event": {"type": "string", "maxLength": 255},
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


class Invalid(ValueError):
    """The body does not match the schema; the message names the field."""


def _check(schema: dict[str, Any], document: Any, where: str) -> None:
    validator = jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.FormatChecker(["uuid"]))
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        path = ".".join([where, *(str(p) for p in error.absolute_path)])
        raise Invalid(f"{path}: {error.message}")


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
