"""Confluent's Schema Registry answers: media types and the ``{error_code, message}`` body.

Confluent's clients branch on ``error_code`` (40401, 42201, ...) and read only
``error_code`` and ``message``, so every error on a registry path, whatever
raised it, takes that shape: registry errors carry their own code, denials are
40301, failed authentication 401, other client errors their HTTP status and
server errors 50001 (Confluent's "error in the backend data store").
"""

from __future__ import annotations

from typing import Any

from lakelog.errors import LakelogError, SchemaRegistryError

V1_JSON = "application/vnd.schemaregistry.v1+json"
#: Request bodies Confluent's registry accepts (no content type at all too).
REQUEST_TYPES = frozenset(
    {V1_JSON, "application/vnd.schemaregistry+json", "application/json", "application/octet-stream"}
)
#: What an ``Accept`` header must allow: every answer is JSON in one of these.
RESPONSE_TYPES = (V1_JSON, "application/vnd.schemaregistry+json", "application/json")
#: The registry's paths, at the root as Confluent's clients expect below ``schema.registry.url``.
PREFIXES = ("/subjects", "/schemas", "/config", "/mode", "/compatibility")


def is_registry_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PREFIXES)


def error_body(exc: LakelogError) -> tuple[int, dict[str, Any]]:
    """The HTTP status and Confluent's body for an error raised on a registry path."""
    status = exc.http_status
    if isinstance(exc, SchemaRegistryError):
        code = exc.registry_code
    elif status == 403:
        code = 40301
    elif status >= 500:
        code = 50001
    else:
        code = status
    return status, {"error_code": code, "message": exc.message}


def status_body(status: int, message: str) -> dict[str, Any]:
    """A routing or protocol error (404 no such path, 405, 406, 415) as Confluent words it."""
    return {"error_code": status, "message": message}
