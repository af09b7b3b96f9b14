"""HTTP plumbing shared by all routers: the broker dependency, errors, body limits."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable
from typing import Any, TypeVar
from urllib.parse import unquote

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from lakelog.errors import (
    InvalidRequestError,
    InvalidTopicError,
    LakelogError,
    RecordListTooLargeError,
    SchemaMismatchError,
    UnknownServerError,
)
from lakelog.numerals import is_unsigned_int
from lakelog.topic_config import validate_topic_name
from server.broker import Broker
from server.models import ErrorBody
from server.rest_proxy.records_models import V2Error, V3Error
from server.schema_registry.answers import V1_JSON as REGISTRY_JSON
from server.schema_registry.answers import error_body as registry_error_body
from server.schema_registry.answers import is_registry_path
from server.schema_registry.answers import status_body as registry_status_body

log = logging.getLogger(__name__)

T = TypeVar("T")


class ClientDisconnected(Exception):
    """The client went away while its request waited; there is nobody to answer."""


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass  # the (empty) request body; the next message comes when the client leaves


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result, or ClientDisconnected as soon as the client closes the connection.

    A long poll otherwise keeps its waiter, its timer and a place in the
    broker's wake-up lists for up to ``max_wait_ms`` after a consumer was
    killed; thousands of such ghosts are what an abandoned fleet leaves.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    raise ClientDisconnected(f"{request.method} {request.url.path}: client disconnected")


#: The error responses every route documents (all share the ErrorBody shape).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in [
        (400, "Bad request: malformed JSON, invalid name, offset or config"),
        (404, "Unknown topic or partition"),
        (409, "Conflict, e.g. the topic already exists"),
        (413, "Body or record too large"),
        (415, "Unsupported content type"),
        (416, "Offset out of range"),
        (422, "Body or parameter does not match the schema (type, field, range)"),
        (429, "Produce buffer full: retry after a backoff"),
        (500, "Unexpected server error"),
        (503, "Storage unavailable: retry"),
        (504, "Timed out"),
    ]
}


async def get_broker(request: Request) -> Broker:
    """The app's broker. A coroutine on purpose: FastAPI runs plain ``def`` dependencies on its
    thread pool, a thread hop per request that cost more than the lookup."""
    broker: Broker = request.app.state.broker
    return broker


def error_response(exc: LakelogError, request: Request | None = None) -> JSONResponse:
    """The error in the body shape of the API the path belongs to (the Schema Registry's
    ``{error_code, message}`` on its paths, the native body elsewhere)."""
    if request is not None and is_registry_path(request.url.path):
        status, body = registry_error_body(exc)
        return JSONResponse(body, status_code=status, media_type=REGISTRY_JSON)
    return JSONResponse(exc.to_dict(), status_code=exc.http_status)


async def lakelog_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LakelogError)
    if exc.http_status >= 500:
        log.warning("%s %s failed: %s", request.method, request.url.path, exc)
    return error_response(exc, request)


def validation_error(exc: ValidationError | RequestValidationError) -> InvalidRequestError:
    """Pydantic's complaint as INVALID_REQUEST, naming the fields at fault.

    A body that is not JSON at all is a bad request (400); JSON or a parameter that does
    not match the schema is SchemaMismatchError (422), as every native route documents.
    """
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        problems.append(f"{where or 'body'}: {err.get('msg')}")
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return InvalidRequestError(("malformed JSON: " + "; ".join(problems))[:2000])
    return SchemaMismatchError(("invalid request: " + "; ".join(problems))[:2000])


TOPIC_PATH = "/v1/topics/"


def _topic_name_error(name: str) -> InvalidTopicError | None:
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        return exc
    return None


def _unroutable_topic(request: Request) -> InvalidTopicError | None:
    """The invalid topic name of a ``/v1/topics/...`` path no route matched, if that is why.

    ``..%2Fx`` reaches the router decoded as ``../x`` and an empty name as ``//``; neither
    matches a ``{topic}`` segment, but the problem is the name, not the endpoint.
    """
    raw = bytes(request.scope.get("raw_path") or b"").decode("latin-1")
    if not raw.startswith(TOPIC_PATH):
        return None
    rest = raw[len(TOPIC_PATH) :]
    segment = rest.split("/", 1)[0]
    if (segment == "" and rest != "") or "%2f" in segment.lower():
        return _topic_name_error(unquote(segment))
    return None


async def request_validation_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    error: LakelogError = validation_error(exc)
    if request.url.path.startswith(TOPIC_PATH) and any(
        tuple(e.get("loc", ())) == ("path", "topic") for e in exc.errors()
    ):
        # A bad topic name answers INVALID_TOPIC_EXCEPTION (17) as Kafka does, whether it
        # comes in the path or in a create body, not the generic INVALID_REQUEST (42).
        error = _topic_name_error(request.path_params.get("topic", "")) or error
    return error_response(error, request)


#: Paths whose next segment is a topic name (``/v3/clusters/{cluster_id}/topics/`` too).
TOPIC_PREFIXES = re.compile(r"^(?:/v1/topics/|/topics/|/v3/clusters/[^/]+/topics/)")
V2_PREFIXES = ("/topics", "/consumers", "/brokers")
V2_JSON = "application/vnd.kafka.v2+json"
ROUTING_REASONS = {404: "Not Found", 405: "Method Not Allowed"}


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Routing errors (no such path, wrong method) in the shape of the API the path belongs to:
    the REST Proxy's ``{error_code: <status>, message}`` below ``/v3`` and the v2 paths, the
    native error body elsewhere."""
    assert isinstance(exc, StarletteHTTPException)
    message = str(exc.detail)
    if exc.status_code == 404 and (topic_error := _unroutable_topic(request)) is not None:
        # An invalid topic name in a produce/fetch path is Kafka's INVALID_TOPIC_EXCEPTION,
        # as the same name anywhere else, rather than "no endpoint".
        return error_response(topic_error)
    path = request.url.path
    if exc.status_code == 404:
        message = f"no endpoint {request.method} {path}"
        prefix = TOPIC_PREFIXES.match(path)
        if prefix is not None and "/" in path[prefix.end() :].strip("/"):
            message += "; topic names cannot contain '/'"  # as no topic name can
    headers = getattr(exc, "headers", None)
    if is_registry_path(path):
        if exc.status_code in ROUTING_REASONS:
            message = f"HTTP {exc.status_code} {ROUTING_REASONS[exc.status_code]}"
        body = registry_status_body(exc.status_code, message)
        return JSONResponse(
            body, status_code=exc.status_code, headers=headers, media_type=REGISTRY_JSON
        )
    if path.startswith("/v3/") or path == "/v3":
        body = V3Error(error_code=exc.status_code, message=message).model_dump()
        return JSONResponse(body, status_code=exc.status_code, headers=headers)
    if any(path == p or path.startswith(p + "/") for p in V2_PREFIXES):
        body = V2Error(error_code=exc.status_code, message=message).model_dump()
        return JSONResponse(body, status_code=exc.status_code, headers=headers, media_type=V2_JSON)
    body = InvalidRequestError(message).to_dict()
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


async def unexpected_error_handler(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error in %s %s", request.method, request.url.path)
    return error_response(UnknownServerError(f"{type(exc).__name__}: {exc}"), request)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) anything above ``limit`` without buffering it all."""
    declared = request.headers.get("content-length")
    if declared is not None and is_unsigned_int(declared) and int(declared) > limit:
        raise RecordListTooLargeError(
            f"request body of {declared} bytes exceeds the broker limit of {limit} bytes"
        )
    chunks = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise RecordListTooLargeError(f"request body exceeds the broker limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()
