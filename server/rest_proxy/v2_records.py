"""Kafka REST Proxy API v2: produce and topic metadata at ``/topics``, for existing clients.

Decisions where the REST Proxy leaves room:

* ``application/vnd.kafka.v2+json`` produces binary (base64), as the REST Proxy
  releases that accepted it did; any other type than those of ``PRODUCE_TYPES``
  and ``SCHEMA_TYPES`` is 415/415.
* The avro, jsonschema and protobuf formats write each key and value with a
  schema of the broker's Schema Registry, framed as Confluent's serializers
  frame it (``server.rest_proxy.schemas``); the answer names the schema ids.
  Null data stays null (no key, a tombstone) whatever the schema. With binary
  or json, ``key_schema``/``key_schema_id`` (42201) and
  ``value_schema``/``value_schema_id`` (42202) are refused with HTTP 422 when
  set (null is accepted), where the REST Proxy ignores them.
* v2 has no acks setting; produce waits for the durable commit (acks=all).
* A record refused alone (``PER_RECORD_ERRORS``, an internal topic, a failed
  commit) gets ``error_code`` 2 in its ``offsets`` entry when retrying may
  succeed, else 1: the codes of the v2 API reference (current proxy releases
  send 50003/50002 there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Annotated, Any

import numpy as np
import pyarrow as pa
from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel

from lakelog.errors import InternalTopicError, LakelogError
from lakelog.numerals import is_unsigned_int
from lakelog.produce_batch import ProduceBatch
from lakelog.security.acl import ResourceType
from lakelog.topic_log import TopicLog
from server.broker import Broker
from server.content_negotiation import acceptable
from server.http import get_broker, media_type, read_body
from server.kafka.cluster import node_id
from server.rest_proxy.records_models import (
    V2_BODIES,
    EmbeddedFormat,
    V2BrokerList,
    V2Columns,
    V2Error,
    V2Failure,
    V2Partition,
    V2PartitionOffset,
    V2PartitionOffsets,
    V2ProduceResponse,
    V2Replica,
    V2Topic,
    body_schema,
    decode_v2,
    error_docs,
    parse_v2,
    request_body,
    v2_columns,
    v2_offsets_json,
    validation_message,
)
from server.rest_proxy.schemas import (
    V2_FORMATS,
    SchemaRefused,
    encode_v2,
    schemas_of,
    subject_check,
)
from server.rest_proxy.v3_records import AllWritten, Outcome, Written, write
from server.schema_registry.types import SchemaType
from server.security.enforce import describable

log = logging.getLogger(__name__)

V2_JSON = "application/vnd.kafka.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
#: The REST Proxy's embedded formats.
EMBEDDED_FORMATS = ("binary", "json", "avro", "jsonschema", "protobuf")
#: Produce content types and the codec format of their keys and values.
PRODUCE_TYPES: dict[str, EmbeddedFormat] = {BINARY_V2: "base64", JSON_V2: "json", V2_JSON: "base64"}
#: Produce content types whose keys and values are written with a registered schema.
SCHEMA_TYPES: dict[str, SchemaType] = {
    f"application/vnd.kafka.{name}.v2+json": schema_type for name, schema_type in V2_FORMATS.items()
}

#: What an ``Accept`` header may ask for on v2 routes (others are refused with 406), as the
#: REST Proxy negotiates: the v2 type, the unversioned and plain JSON types, and the
#: embedded-format types its consumer routes also answer with.
V2_ANSWER_TYPES = (
    V2_JSON,
    "application/vnd.kafka+json",
    "application/json",
    *(f"application/vnd.kafka.{fmt}.v2+json" for fmt in EMBEDDED_FORMATS),
)
NOT_ACCEPTABLE = 406

TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402

#: lakelog error code -> (HTTP status, v2 error_code) for errors that refuse a whole
#: request. Codes not listed are failures of the storage or the commit:
#: HTTP 500 with 50003 (retriable) or 50002, and per record in produce answers.
V2_ERRORS: dict[int, tuple[int, int]] = {
    3: (404, TOPIC_NOT_FOUND),  # UNKNOWN_TOPIC_OR_PARTITION (partition checks: 40402)
    17: (404, TOPIC_NOT_FOUND),  # INVALID_TOPIC_EXCEPTION: no topic can have that name
    10: (413, 41301),  # MESSAGE_TOO_LARGE (produce reports it per record instead)
    18: (413, 41301),  # RECORD_LIST_TOO_LARGE: a body above the broker's limit
    32: (422, 42203),  # INVALID_TIMESTAMP
    42: (422, 422),  # INVALID_REQUEST
    87: (422, 42203),  # INVALID_RECORD: data not base64 (keyless records: per record)
    89: (429, 42901),  # THROTTLING_QUOTA_EXCEEDED: produce buffer full, back off
    58: (401, 40101),  # SASL_AUTHENTICATION_FAILED: no or bad credentials
    29: (403, 40301),  # TOPIC_AUTHORIZATION_FAILED
    30: (403, 40301),  # GROUP_AUTHORIZATION_FAILED
    31: (403, 40301),  # CLUSTER_AUTHORIZATION_FAILED
}
#: lakelog errors of one record (above max.message.bytes, keyless on a compacted topic, bad
#: timestamp): reported in that record's ``offsets`` entry while the others are written, as
#: the REST Proxy reports what its Kafka producer refuses.
PER_RECORD_ERRORS = frozenset({10, 32, 87})
RETRIABLE_ERROR = 50003
NON_RETRIABLE_ERROR = 50002
#: ``offsets[i].error_code`` of a record whose commit failed.
RECORD_RETRIABLE = 2
RECORD_NON_RETRIABLE = 1


def partition_not_found(topic: str, partition: object) -> V2Failure:
    return V2Failure(
        404,
        PARTITION_NOT_FOUND,
        f"Partition not found: topic {topic!r} has no partition {partition}.",
    )


def from_lakelog(exc: LakelogError) -> V2Failure:
    mapped = V2_ERRORS.get(exc.code)
    if mapped is not None:
        return V2Failure(*mapped, f"{exc.name}: {exc.message}")
    code = RETRIABLE_ERROR if exc.retriable else NON_RETRIABLE_ERROR
    return V2Failure(500, code, f"Kafka error ({exc.name}): {exc.message}")


class V2JSONResponse(JSONResponse):
    media_type = V2_JSON


def v2_response(body: BaseModel | list[Any], status: int = 200) -> JSONResponse:
    content = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
    return V2JSONResponse(content, status_code=status)


def failure_response(failure: V2Failure) -> JSONResponse:
    body = V2Error(error_code=failure.error_code, message=failure.message)
    return v2_response(body, failure.status)


class V2Route(APIRoute):
    """Answers every error of this router in the v2 shape (the app's handlers stay native)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def v2_handler(request: Request) -> Response:
            accept = request.headers.get("accept")
            if not acceptable(accept, V2_ANSWER_TYPES):
                return failure_response(
                    V2Failure(
                        406,
                        NOT_ACCEPTABLE,
                        f"{HTTPStatus.NOT_ACCEPTABLE.phrase}: Accept {accept!r} names no type "
                        f"this API answers with; accept {V2_JSON} (or application/json, */*)",
                    )
                )
            try:
                return await handler(request)
            except V2Failure as failure:
                return failure_response(failure)
            except LakelogError as exc:
                if exc.http_status >= 500:
                    log.warning("%s %s failed: %s", request.method, request.url.path, exc)
                return failure_response(from_lakelog(exc))
            except RequestValidationError as exc:
                message = validation_message(exc.errors())
                return failure_response(V2Failure(422, 422, message))
            except Exception as exc:
                log.exception("unexpected error in %s %s", request.method, request.url.path)
                return failure_response(
                    V2Failure(500, 500, f"Internal Server Error: {type(exc).__name__}: {exc}")
                )

        return v2_handler


def v2_router(tag: str, *documented: tuple[int, str]) -> APIRouter:
    """A router whose routes answer (errors included) in the v2 shape and content type."""
    return APIRouter(
        tags=[tag],
        route_class=V2Route,
        default_response_class=V2JSONResponse,
        responses=error_docs(V2Error, *documented),
    )


router = v2_router(
    "REST Proxy v2",
    (404, "Topic not found (40401) or partition not found (40402)"),
    (406, "Accept names no type this API answers with (406)"),
    (422, "Invalid parameter or body (422)"),
    (500, "Storage failure (50002, or 50003 when retrying may succeed)"),
)
PRODUCE_ERRORS = error_docs(
    V2Error,
    (400, "Malformed JSON (error_code 400)"),
    (413, "Body above the broker's max_request_bytes (41301)"),
    (
        408,
        "The Schema Registry refused a schema look-up or registration (40801): the message "
        "carries its error_code (e.g. 40403 for an unknown schema id)",
    ),
    (403, "No SUBJECT READ (or, to register an inline schema, WRITE) on its subject (40301)"),
    (415, "Produce needs an embedded-format content type (error_code 415)"),
    (
        422,
        "Invalid body (422); key_schema/key_schema_id missing for keys of avro, jsonschema "
        "or protobuf, or given with binary or json (42201; values: 42202); record data not in "
        "the embedded format or not matching the schema (42203); an invalid schema (42205)",
    ),
    (429, "Produce buffer full: retry after a backoff (42901)"),
)
BrokerDep = Annotated[Broker, Depends(get_broker)]


def _documented(model: Any, *, produce: bool = False) -> dict[int | str, dict[str, Any]]:
    return {200: {"model": model}, **(PRODUCE_ERRORS if produce else {})}


def _produce_body(with_partition: bool) -> dict[str, Any]:
    return request_body(body_schema(V2_BODIES[with_partition]), BINARY_V2, JSON_V2, *SCHEMA_TYPES)


# -- metadata ---------------------------------------------------------------------


def partition_out(broker: Broker, partition: int) -> V2Partition:
    """The answering broker leads every partition: any broker serves any partition."""
    leader = node_id(broker.settings.broker_id)
    return V2Partition(
        partition=partition,
        leader=leader,
        replicas=[V2Replica(broker=leader, leader=True, in_sync=True)],
    )


@contextmanager
def known_topic(topic: str) -> Iterator[None]:
    """An unknown topic, or a name no topic can have, is 404/40401."""
    try:
        yield
    except LakelogError as exc:
        if exc.code in (3, 17):
            message = f"Topic not found: {topic!r} does not exist."
            raise V2Failure(404, TOPIC_NOT_FOUND, message) from None
        raise


async def fresh_topic(broker: Broker, topic: str) -> TopicLog:
    """The topic's log, refreshed (at most every refresh interval) to see other brokers' work."""
    with known_topic(topic):
        topic_log = await broker.topic(topic)
    await broker.refresh(topic_log, broker.settings.refresh_interval_ms / 1000)
    return topic_log


def parse_partition(topic_log: TopicLog, text: str) -> int:
    """The path's partition if the topic has it (404/40402 otherwise, as for any bad id)."""
    if not is_unsigned_int(text) or int(text) >= topic_log.num_partitions:
        raise partition_not_found(topic_log.name, text)
    return int(text)


async def fresh_partition(broker: Broker, topic: str, text: str) -> tuple[TopicLog, int]:
    """The topic's log, refreshed, and the path's partition of it (404/40401, 404/40402)."""
    topic_log = await fresh_topic(broker, topic)
    return topic_log, parse_partition(topic_log, text)


@router.get("/brokers", responses=_documented(V2BrokerList), summary="List live broker ids")
async def list_brokers(broker: BrokerDep) -> Response:
    alive = await asyncio.to_thread(broker.registry.alive)
    ids = {node_id(b.broker_id) for b in alive} | {node_id(broker.settings.broker_id)}
    return v2_response(V2BrokerList(brokers=sorted(ids)))


@router.get("/topics", responses=_documented(list[str]), summary="List topic names")
async def list_topics(request: Request, broker: BrokerDep) -> Response:
    names = await asyncio.to_thread(broker.catalog.list_topics)
    return v2_response(describable(request, ResourceType.TOPIC, names))


@router.get("/topics/{topic}", responses=_documented(V2Topic), summary="Describe a topic")
async def get_topic(topic: str, broker: BrokerDep) -> Response:
    with known_topic(topic):
        described = await asyncio.to_thread(broker.catalog.describe_topic, topic)
    return v2_response(
        V2Topic(
            name=described.name,
            configs={c["name"]: c["value"] for c in described.config.describe()},
            partitions=[partition_out(broker, p.partition) for p in described.partitions],
        )
    )


@router.get(
    "/topics/{topic}/partitions",
    responses=_documented(list[V2Partition]),
    summary="List a topic's partitions",
)
async def list_partitions(topic: str, broker: BrokerDep) -> Response:
    topic_log = await fresh_topic(broker, topic)
    partitions = [partition_out(broker, p) for p in range(topic_log.num_partitions)]
    return v2_response([p.model_dump(mode="json") for p in partitions])


@router.get(
    "/topics/{topic}/partitions/{partition}",
    responses=_documented(V2Partition),
    summary="Describe one partition",
)
async def get_partition(topic: str, partition: str, broker: BrokerDep) -> Response:
    _, p = await fresh_partition(broker, topic, partition)
    return v2_response(partition_out(broker, p))


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets",
    responses=_documented(V2PartitionOffsets),
    summary="A partition's first and next offsets",
)
async def get_offsets(topic: str, partition: str, broker: BrokerDep) -> Response:
    topic_log, p = await fresh_partition(broker, topic, partition)
    return v2_response(
        V2PartitionOffsets(
            beginning_offset=topic_log.log_start_offset(p), end_offset=topic_log.high_watermark(p)
        )
    )


# -- produce ----------------------------------------------------------------------


def embedded_format(request: Request) -> EmbeddedFormat | SchemaType:
    kind = media_type(request)
    fmt: EmbeddedFormat | SchemaType | None = PRODUCE_TYPES.get(kind) or SCHEMA_TYPES.get(kind)
    if fmt is None:
        shown = kind or "none"
        raise V2Failure(
            415,
            415,
            f"{HTTPStatus.UNSUPPORTED_MEDIA_TYPE.phrase}: content type {shown!r}; produce with "
            f"{BINARY_V2} (base64 keys and values), {JSON_V2} (embedded JSON) or "
            f"{', '.join(SCHEMA_TYPES)} (JSON data written with a schema)",
        )
    return fmt


async def schema_columns(
    request: Request,
    broker: Broker,
    topic: str,
    schema_type: SchemaType,
    raw: bytes,
    with_partition: bool,
) -> tuple[V2Columns, int | None, int | None]:
    """A body of a schema'd format written with its schemas (after the topic is known, so no
    schema is registered for a topic that does not exist)."""
    body, _ = parse_v2(raw, "json", with_partition)
    await fresh_topic(broker, topic)
    schemas = schemas_of(broker.schema_registry)
    try:
        encoded = await asyncio.to_thread(
            encode_v2, schemas, topic, schema_type, body, subject_check(request)
        )
    except SchemaRefused as refused:
        raise V2Failure(refused.v2_status, refused.v2_code, refused.message) from None
    columns = v2_columns(encoded.keys, encoded.values, body.records, with_partition)
    return columns, encoded.key_schema_id, encoded.value_schema_id


async def produce(
    request: Request,
    broker: Broker,
    topic: str,
    path_partition: str | None,
) -> Response:
    fmt = embedded_format(request)
    raw = await read_body(request, broker.settings.max_request_bytes)
    broker.metrics.bytes_in.inc(len(raw))
    with_partition = path_partition is None
    key_id = value_id = None
    if isinstance(fmt, SchemaType):
        columns, key_id, value_id = await schema_columns(
            request, broker, topic, fmt, raw, with_partition
        )
    else:
        columns = decode_v2(raw, fmt, with_partition)
    topic_log = await fresh_topic(broker, topic)
    n = len(columns)
    partitions: pa.Array | None = None
    if path_partition is not None:
        chosen = parse_partition(topic_log, path_partition)
        partitions = pa.array(np.full(n, chosen, np.int32))
    elif columns.partitions is not None and columns.named is not None:
        outside = np.flatnonzero(columns.named & (columns.partitions >= topic_log.num_partitions))
        if len(outside):
            raise partition_not_found(topic, int(columns.partitions[outside[0]]))
        partitions = pa.array(columns.partitions.astype(np.int32), mask=~columns.named)
    batch = ProduceBatch.from_columns(
        num_rows=n, partition=partitions, key=columns.keys, value=columns.values
    )
    return answer(topic, await write(broker, topic_log, batch), key_id, value_id)


def answer(
    topic: str,
    outcomes: AllWritten | list[Outcome],
    key_schema_id: int | None = None,
    value_schema_id: int | None = None,
) -> Response:
    """The produce answer: every record's ``offsets`` entry (or the whole request's error)."""
    if isinstance(outcomes, AllWritten):
        body = v2_offsets_json(
            outcomes.partitions, outcomes.offsets, key_schema_id, value_schema_id
        )
        return Response(body, media_type=V2_JSON)
    if not any(isinstance(o, Written) for o in outcomes):
        for outcome in outcomes:
            if isinstance(outcome, LakelogError) and is_request_error(outcome):
                raise outcome  # refuses the whole request; nothing was written
    return v2_response(
        V2ProduceResponse(
            key_schema_id=key_schema_id,
            value_schema_id=value_schema_id,
            offsets=[offset_out(topic, o) for o in outcomes],
        )
    )


def is_request_error(exc: LakelogError) -> bool:
    """An error of the whole request (unknown topic, quota, ...): a 4xx answer, not an entry.

    Kafka refuses an append to an internal topic per record, and so does the REST Proxy.
    """
    if isinstance(exc, InternalTopicError):
        return False
    return exc.code in V2_ERRORS and exc.code not in PER_RECORD_ERRORS


def offset_out(topic: str, outcome: Outcome) -> V2PartitionOffset:
    """A record's entry in ``offsets``: where it was written, or why it was not."""
    if isinstance(outcome, Written):
        return V2PartitionOffset(
            partition=outcome.partition, offset=outcome.offset, error_code=None, error=None
        )
    if outcome.code not in PER_RECORD_ERRORS and not isinstance(outcome, InternalTopicError):
        log.warning("v2 produce to %s failed: %s", topic, outcome)
    code = RECORD_RETRIABLE if outcome.retriable else RECORD_NON_RETRIABLE
    return V2PartitionOffset(
        partition=None, offset=None, error_code=code, error=f"{outcome.name}: {outcome.message}"
    )


@router.post(
    "/topics/{topic}",
    responses=_documented(V2ProduceResponse, produce=True),
    openapi_extra=_produce_body(True),
    summary="Produce records (partition per record, else by key)",
)
async def produce_to_topic(topic: str, request: Request, broker: BrokerDep) -> Response:
    """A record the topic refuses (above ``max.message.bytes``, keyless on a compacted topic)
    gets ``error_code`` 1 and an ``error`` in its ``offsets`` entry and the others are written,
    as the REST Proxy reports its producer's per-record errors; the native
    ``POST /v1/topics/{topic}/records`` refuses the whole request instead (413/400).
    Producing to the internal topic ``__consumer_offsets`` is refused per record the same
    way (``INVALID_TOPIC_EXCEPTION: cannot append to internal topic ...``)."""
    with broker.batcher.receiving(topic):
        return await produce(request, broker, topic, None)


@router.post(
    "/topics/{topic}/partitions/{partition}",
    responses=_documented(V2ProduceResponse, produce=True),
    openapi_extra=_produce_body(False),
    summary="Produce records to one partition",
)
async def produce_to_partition(
    topic: str, partition: str, request: Request, broker: BrokerDep
) -> Response:
    """Per-record errors as for ``POST /topics/{topic}``."""
    with broker.batcher.receiving(topic):
        return await produce(request, broker, topic, partition)
