"""Confluent's Schema Registry REST API at the root path of every broker.

Confluent's clients append ``/subjects``, ``/schemas/ids/{id}`` ... to
``schema.registry.url``, so these routes live at the root, next to the REST
Proxy v2 paths (which they do not overlap). Bodies and query parameters are
read here rather than by FastAPI's models so that every refusal is Confluent's
``{error_code, message}`` (see ``answers``) and the id look-up stays cheap.

``GET /schemas/ids/{id}`` answers from memory when the schema is cached (no
thread hop, its JSON rendered once); everything else runs the registry on a
worker thread, since it reads the log in the storage root first.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import Response

from lakelog.errors import (
    InvalidRequestError,
    InvalidSchemaError,
    RecordListTooLargeError,
    SchemaNotFoundError,
)
from lakelog.security.acl import ResourceType
from server.content_negotiation import acceptable
from server.http import media_type, read_body
from server.schema_registry.answers import REQUEST_TYPES, RESPONSE_TYPES, V1_JSON
from server.schema_registry.compatibility import parse_level
from server.schema_registry.registry import RegisteredVersion, SchemaRegistry
from server.schema_registry.state import VersionSpec, parse_mode, parse_version, references_json
from server.schema_registry.types import ParsedSchema, SchemaReference, SchemaType
from server.security.enforce import describable

T = TypeVar("T")


async def _negotiate(request: Request) -> None:
    """406 unless the answer's JSON may be sent; 415 for a body of another media type."""
    if not acceptable(request.headers.get("accept"), RESPONSE_TYPES):
        raise HTTPException(406, "HTTP 406 Not Acceptable")
    if request.method in ("POST", "PUT"):
        kind = media_type(request)
        if kind and kind not in REQUEST_TYPES:
            raise HTTPException(415, "HTTP 415 Unsupported Media Type")


router = APIRouter(tags=["schema registry"], dependencies=[Depends(_negotiate)])


def registry_of(request: Request) -> SchemaRegistry:
    registry: SchemaRegistry = request.app.state.broker.schema_registry
    return registry


def answer(body: Any) -> Response:
    return Response(json.dumps(body, separators=(",", ":")).encode(), media_type=V1_JSON)


async def run(request: Request, call: Callable[[SchemaRegistry], T]) -> T:
    registry = registry_of(request)
    return await asyncio.to_thread(call, registry)


def flag(request: Request, name: str) -> bool:
    """A boolean query parameter; Confluent's clients send ``true``/``True``/``false``."""
    return request.query_params.get(name, "false").strip().lower() == "true"


def schema_id_of(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 2**31:
        raise SchemaNotFoundError(f"Schema {text} not found")
    return int(text)


def version_of(text: str) -> VersionSpec:
    return parse_version(text)


def schema_fields(schema: ParsedSchema) -> dict[str, Any]:
    """``schema``, ``schemaType`` (left out for AVRO, as Confluent does) and ``references``."""
    body: dict[str, Any] = {"schema": schema.text}
    if schema.schema_type is not SchemaType.AVRO:
        body["schemaType"] = schema.schema_type.value
    if schema.references:
        body["references"] = references_json(schema.references)
    return body


def version_body(found: RegisteredVersion) -> dict[str, Any]:
    body = {"subject": found.subject, "version": found.version, "id": found.schema_id}
    return body | schema_fields(found.schema)


def _serialized(schema: ParsedSchema) -> str:
    module = importlib.import_module("server.schema_registry.protobuf")
    text: str = module.serialized(schema)
    return text


def rendered(schema: ParsedSchema, fmt: str) -> ParsedSchema:
    """The schema in the ``format`` asked for: ``serialized`` gives a Protobuf schema as
    its base64 descriptor; other formats (and other types) answer the registered text."""
    if fmt == "serialized" and schema.schema_type is SchemaType.PROTOBUF:
        return ParsedSchema(
            schema.schema_type, _serialized(schema), schema.canonical, schema.references
        )
    return schema


# -- request bodies ---------------------------------------------------------------


async def json_body(request: Request) -> dict[str, Any]:
    limit = 4 * registry_of(request).max_schema_bytes + (64 << 10)
    try:
        data = await read_body(request, limit)
    except RecordListTooLargeError:
        raise InvalidSchemaError(
            f"Invalid schema: request body of more than {limit} bytes; schemas are limited "
            f"to {registry_of(request).max_schema_bytes} bytes"
        ) from None
    try:
        body = json.loads(data) if data.strip() else {}
    except ValueError as exc:
        raise InvalidRequestError(f"Unparsable JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidRequestError("the body must be a JSON object")
    return body


class SchemaRequest:
    """A schema in a request body: Confluent's ``schema``, ``schemaType``, ``references``."""

    def __init__(self, body: dict[str, Any]) -> None:
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise InvalidSchemaError("Empty schema")
        self.text = text
        kind = body.get("schemaType") or SchemaType.AVRO.value
        try:
            self.schema_type = SchemaType(str(kind).upper())
        except ValueError:
            raise InvalidSchemaError(f"Invalid schema type {kind!r}") from None
        self.references = tuple(_reference(r) for r in body.get("references") or ())
        self.schema_id = _optional_int(body, "id")
        self.version = _optional_int(body, "version")


def _reference(item: object) -> SchemaReference:
    if isinstance(item, dict):
        name, subject, version = item.get("name"), item.get("subject"), item.get("version")
        if isinstance(name, str) and isinstance(subject, str) and isinstance(version, int):
            return SchemaReference(name, subject, version)
    raise InvalidSchemaError(
        f"Invalid schema: reference {item!r} needs a name, a subject and a version"
    )


def _optional_int(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None or (isinstance(value, int) and value < 0):
        return None  # Confluent's clients send -1 for "not given"
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidRequestError(f"{name} must be an integer")
    return value


# -- schemas by id ------------------------------------------------------------------


@router.get("/schemas/types")
async def schema_types(request: Request) -> Response:
    return answer(registry_of(request).schema_types())


@router.get("/schemas/ids/{schema_id}")
async def schema_by_id(request: Request, schema_id: str) -> Response:
    """The hot path of every deserializer: from memory, its JSON rendered once per schema."""
    sid = schema_id_of(schema_id)
    registry = registry_of(request)
    fmt = "serialized" if request.query_params.get("format") == "serialized" else ""
    schema = registry.cached_schema(sid)
    if schema is None:
        schema = await asyncio.to_thread(registry.schema_by_id, sid)
    key = ("schemas/ids", sid, fmt)
    memo = registry.answers.get(key)
    if memo is not None and memo[0] is schema:
        return Response(memo[1], media_type=V1_JSON)
    data = json.dumps(schema_fields(rendered(schema, fmt)), separators=(",", ":")).encode()
    registry.answers[key] = (schema, data)
    return Response(data, media_type=V1_JSON)


@router.get("/schemas/ids/{schema_id}/schema")
async def schema_text_by_id(request: Request, schema_id: str) -> Response:
    sid = schema_id_of(schema_id)
    schema = await run(request, lambda r: r.schema_by_id(sid))
    fmt = request.query_params.get("format", "")
    return Response(rendered(schema, fmt).text, media_type=V1_JSON)


@router.get("/schemas/ids/{schema_id}/subjects")
async def subjects_by_id(request: Request, schema_id: str) -> Response:
    sid = schema_id_of(schema_id)
    deleted = flag(request, "deleted")
    found = await run(request, lambda r: r.subjects_with_id(sid, deleted=deleted))
    return answer(describable(request, ResourceType.SUBJECT, found))


@router.get("/schemas/ids/{schema_id}/versions")
async def versions_by_id(request: Request, schema_id: str) -> Response:
    sid = schema_id_of(schema_id)
    deleted = flag(request, "deleted")
    pairs = await run(request, lambda r: r.versions_with_id(sid, deleted=deleted))
    visible = set(describable(request, ResourceType.SUBJECT, {s for s, _ in pairs}))
    return answer([{"subject": s, "version": v} for s, v in pairs if s in visible])


# -- subjects -------------------------------------------------------------------------


@router.get("/subjects")
async def list_subjects(request: Request) -> Response:
    """Only the subjects the caller may DESCRIBE."""
    prefix = request.query_params.get("subjectPrefix", "")
    deleted_only = flag(request, "deleted_only")
    deleted = flag(request, "deleted") or deleted_only

    def listing(registry: SchemaRegistry) -> list[str]:
        found = registry.subjects(prefix=prefix, deleted=deleted)
        if deleted_only:
            live = set(registry.subjects(prefix=prefix))
            found = [s for s in found if s not in live]
        return found

    found = describable(request, ResourceType.SUBJECT, await run(request, listing))
    offset = _int_param(request, "offset", 0)
    limit = _int_param(request, "limit", -1)
    found = found[offset:] if limit < 0 else found[offset : offset + limit]
    return answer(found)


def _int_param(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        return max(int(text), -1)
    except ValueError:
        raise InvalidRequestError(f"{name} must be an integer") from None


@router.get("/subjects/{subject}/versions")
async def list_versions(request: Request, subject: str) -> Response:
    deleted = flag(request, "deleted")
    return answer(await run(request, lambda r: r.versions(subject, deleted=deleted)))


@router.post("/subjects/{subject}/versions")
async def register(request: Request, subject: str) -> Response:
    wanted = SchemaRequest(await json_body(request))
    normalize = flag(request, "normalize")
    schema_id = await run(
        request,
        lambda r: r.register(
            subject,
            wanted.schema_type,
            wanted.text,
            wanted.references,
            normalize=normalize,
            schema_id=wanted.schema_id,
            version=wanted.version,
        ),
    )
    return answer({"id": schema_id})


@router.post("/subjects/{subject}")
async def lookup(request: Request, subject: str) -> Response:
    wanted = SchemaRequest(await json_body(request))
    normalize, deleted = flag(request, "normalize"), flag(request, "deleted")
    found = await run(
        request,
        lambda r: r.lookup(
            subject,
            wanted.schema_type,
            wanted.text,
            wanted.references,
            normalize=normalize,
            deleted=deleted,
        ),
    )
    return answer(version_body(found))


@router.delete("/subjects/{subject}")
async def delete_subject(request: Request, subject: str) -> Response:
    permanent = flag(request, "permanent")
    return answer(await run(request, lambda r: r.delete_subject(subject, permanent=permanent)))


@router.get("/subjects/{subject}/versions/{version}")
async def get_version(request: Request, subject: str, version: str) -> Response:
    spec, deleted = version_of(version), flag(request, "deleted")
    found = await run(request, lambda r: r.subject_version(subject, spec, deleted=deleted))
    return answer(version_body(found))


@router.get("/subjects/{subject}/versions/{version}/schema")
async def get_version_schema(request: Request, subject: str, version: str) -> Response:
    spec, deleted = version_of(version), flag(request, "deleted")
    found = await run(request, lambda r: r.subject_version(subject, spec, deleted=deleted))
    return Response(found.schema.text, media_type=V1_JSON)


@router.get("/subjects/{subject}/versions/{version}/referencedby")
async def referenced_by(request: Request, subject: str, version: str) -> Response:
    spec = version_of(version)
    return answer(await run(request, lambda r: r.referenced_by(subject, spec)))


@router.delete("/subjects/{subject}/versions/{version}")
async def delete_version(request: Request, subject: str, version: str) -> Response:
    spec, permanent = version_of(version), flag(request, "permanent")
    return answer(
        await run(request, lambda r: r.delete_version(subject, spec, permanent=permanent))
    )


# -- compatibility ----------------------------------------------------------------------


async def _compatibility(request: Request, subject: str, spec: VersionSpec | None) -> Response:
    wanted = SchemaRequest(await json_body(request))
    normalize = flag(request, "normalize")
    problems = await run(
        request,
        lambda r: r.check_compatibility(
            subject, spec, wanted.schema_type, wanted.text, wanted.references, normalize=normalize
        ),
    )
    body: dict[str, Any] = {"is_compatible": not problems}
    if flag(request, "verbose"):
        body["messages"] = problems
    return answer(body)


@router.post("/compatibility/subjects/{subject}/versions/{version}")
async def check_version(request: Request, subject: str, version: str) -> Response:
    return await _compatibility(request, subject, version_of(version))


@router.post("/compatibility/subjects/{subject}/versions")
async def check_all(request: Request, subject: str) -> Response:
    return await _compatibility(request, subject, None)


# -- config and mode ----------------------------------------------------------------------


def _level_in(body: dict[str, Any]) -> object:
    return body.get("compatibility", body.get("compatibilityLevel"))


@router.get("/config")
async def get_global_config(request: Request) -> Response:
    level = await run(request, lambda r: r.compatibility(None))
    return answer({"compatibilityLevel": level.value})


@router.put("/config")
async def put_global_config(request: Request) -> Response:
    level = parse_level(_level_in(await json_body(request)))
    await run(request, lambda r: r.set_compatibility(None, level))
    return answer({"compatibility": level.value})


@router.delete("/config")
async def delete_global_config(request: Request) -> Response:
    previous = await run(request, lambda r: r.delete_compatibility(None))
    return answer({"compatibilityLevel": previous.value})


@router.get("/config/{subject}")
async def get_config(request: Request, subject: str) -> Response:
    fallback = flag(request, "defaultToGlobal")
    level = await run(request, lambda r: r.compatibility(subject, default_to_global=fallback))
    return answer({"compatibilityLevel": level.value})


@router.put("/config/{subject}")
async def put_config(request: Request, subject: str) -> Response:
    level = parse_level(_level_in(await json_body(request)))
    await run(request, lambda r: r.set_compatibility(subject, level))
    return answer({"compatibility": level.value})


@router.delete("/config/{subject}")
async def delete_config(request: Request, subject: str) -> Response:
    previous = await run(request, lambda r: r.delete_compatibility(subject))
    return answer({"compatibilityLevel": previous.value})


@router.get("/mode")
async def get_global_mode(request: Request) -> Response:
    mode = await run(request, lambda r: r.mode(None))
    return answer({"mode": mode.value})


@router.put("/mode")
async def put_global_mode(request: Request) -> Response:
    mode, force = parse_mode((await json_body(request)).get("mode")), flag(request, "force")
    await run(request, lambda r: r.set_mode(None, mode, force=force))
    return answer({"mode": mode.value})


@router.delete("/mode")
async def delete_global_mode(request: Request) -> Response:
    previous = await run(request, lambda r: r.delete_mode(None))
    return answer({"mode": previous.value})


@router.get("/mode/{subject}")
async def get_mode(request: Request, subject: str) -> Response:
    fallback = flag(request, "defaultToGlobal")
    mode = await run(request, lambda r: r.mode(subject, default_to_global=fallback))
    return answer({"mode": mode.value})


@router.put("/mode/{subject}")
async def put_mode(request: Request, subject: str) -> Response:
    mode, force = parse_mode((await json_body(request)).get("mode")), flag(request, "force")
    await run(request, lambda r: r.set_mode(subject, mode, force=force))
    return answer({"mode": mode.value})


@router.delete("/mode/{subject}")
async def delete_mode(request: Request, subject: str) -> Response:
    previous = await run(request, lambda r: r.delete_mode(subject))
    return answer({"mode": previous.value})
