"""Kafka REST Proxy API v3: produce records and the cluster resource, under ``/v3``.

Decisions where the REST Proxy leaves room:

* ``.../records`` takes one ProduceRequest or several concatenated JSON
  objects, read to the end (``max_request_bytes`` at most) before anything is
  produced: a chunked body works, but the reports come after the last record.
  The answer is one ProduceResponse per record in request order, one a line,
  with HTTP 200 once the cluster, topic, content type and body size are
  accepted; each record's fate is in its own ``error_code``.
* A record that cannot be decoded gets a 400 report and the others are still
  written; a body that stops being valid JSON gets one 400 report for the rest.
* The valid records of one request are one produce (one Delta commit); see
  ``write`` for a batch lakelog refuses because of some records. An internal
  topic refuses every record (400, ``INVALID_TOPIC_EXCEPTION``).
* ``data`` absent or null is a null key or value (``size`` 0; no
  ``key``/``value`` object in the report when the request had none).
* A key or value with ``type`` AVRO, JSONSCHEMA or PROTOBUF, or with no
  ``type`` but a schema field (``schema_id``, ``schema_version``, ``subject``,
  ``subject_name_strategy``, ``schema``), is written with a schema of the
  broker's Schema Registry as Confluent's serializers write it
  (``server.rest_proxy.schemas``); its report names the subject, schema id and
  version. With neither it is BINARY, where the REST Proxy would look up the
  subject's latest schema: existing binary producers keep working. A schema
  field with BINARY, JSON or STRING is refused (the REST Proxy ignores it).
  Errors are the REST Proxy's report codes: 400 for data that does not fit
  the schema, an invalid inline schema or an unknown version, 42207 when the
  registry has no such schema id or subject.
* Produce waits for the durable commit (acks=all).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Annotated, Any

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from lakelog.column_buffers import binary_lengths
from lakelog.errors import InvalidRecordError, LakelogError
from lakelog.produce_batch import ProduceBatch
from lakelog.records import TIMESTAMP_TYPE, empty_headers
from lakelog.topic_log import TopicLog
from server.broker import Broker
from server.codec import DataFormat, decode_data
from server.http import get_broker, media_type, read_body
from server.rest_proxy.records_models import (
    V3BatchEntry,
    V3BatchFailure,
    V3BatchResponse,
    V3BatchSuccess,
    V3Columns,
    V3Error,
    V3ProduceData,
    V3ProduceRecord,
    V3ProduceResponse,
    V3ProduceResponseData,
    body_schema,
    decode_v3_stream,
    describe,
    error_docs,
    request_body,
    v3_report_json,
    validation_message,
)
from server.rest_proxy.schemas import (
    V3_TYPES,
    SchemaRefused,
    SchemaRequest,
    Schemas,
    SubjectCheck,
    allow_all,
    parse_strategy,
    schemas_of,
    subject_check,
)
from server.settings import BrokerSettings

log = logging.getLogger(__name__)

JSON = "application/json"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The last millisecond a ``datetime`` (and so a Delta statistic) can hold.
MAX_TIMESTAMP_MS = (datetime.max.replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)
#: Key/value types and the codec format of their ``data``.
DATA_TYPES: dict[str, DataFormat] = {"BINARY": "base64", "STRING": "string", "JSON": "json"}


def status_message(status: int, text: str) -> str:
    return f"{HTTPStatus(status).phrase}: {text}"


class V3Failure(Exception):
    """An error of the whole request: HTTP ``status``, also used as ``error_code``."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.message = status_message(status, text)


class V3Relayed(Exception):
    """The answer of the broker that holds the resource (a group's coordinator, a broker's
    own settings), sent back to the client unchanged."""

    def __init__(self, response: Response) -> None:
        super().__init__(f"answered by another broker with HTTP {response.status_code}")
        self.response = response


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse(V3Error(error_code=status, message=message).model_dump(), status)


def lakelog_message(exc: LakelogError) -> str:
    return status_message(exc.http_status, f"{exc.name}: {exc.message}")


class V3Route(APIRoute):
    """Answers every error of this router in the v3 shape (the app's handlers stay native)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def v3_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except V3Relayed as relayed:
                return relayed.response
            except V3Failure as failure:
                return error_response(failure.status, failure.message)
            except LakelogError as exc:
                if exc.http_status >= 500:
                    log.warning("%s %s failed: %s", request.method, request.url.path, exc)
                return error_response(exc.http_status, lakelog_message(exc))
            except RequestValidationError as exc:
                text = validation_message(exc.errors())
                return error_response(400, status_message(400, text))
            except StarletteHTTPException as exc:  # e.g. a body that is not JSON (400)
                text = status_message(exc.status_code, str(exc.detail))
                return error_response(exc.status_code, text)
            except Exception as exc:
                log.exception("unexpected error in %s %s", request.method, request.url.path)
                return error_response(500, status_message(500, f"{type(exc).__name__}: {exc}"))

        return v3_handler


router = APIRouter(
    prefix="/v3",
    tags=["REST Proxy v3"],
    route_class=V3Route,
    responses=error_docs(
        V3Error,
        (400, "Malformed request"),
        (404, "Unknown cluster or topic"),
        (413, "Body larger than the broker accepts"),
        (415, "Not application/json"),
        (422, "Empty body"),
        (500, "Unexpected server error"),
        (503, "Storage unavailable: retry"),
    ),
)
BrokerDep = Annotated[Broker, Depends(get_broker)]


# -- cluster ----------------------------------------------------------------------


def cluster_data(settings: BrokerSettings) -> dict[str, Any]:
    base = f"{settings.url.rstrip('/')}/v3/clusters/{settings.cluster_id}"
    links = {
        "acls": "/acls",
        "brokers": "/brokers",
        "broker_configs": "/broker-configs",
        "consumer_groups": "/consumer-groups",
        "topics": "/topics",
        "partition_reassignments": "/topics/-/partitions/-/reassignment",
    }
    return {
        "kind": "KafkaCluster",
        "metadata": {"self": base, "resource_name": f"crn:///kafka={settings.cluster_id}"},
        "cluster_id": settings.cluster_id,
        **{name: {"related": base + suffix} for name, suffix in links.items()},
    }


def check_cluster(broker: Broker, cluster_id: str) -> None:
    if cluster_id != broker.settings.cluster_id:
        raise V3Failure(
            404,
            f"cluster {cluster_id!r} does not exist; this is cluster "
            f"{broker.settings.cluster_id!r}",
        )


@router.get("/clusters", summary="List clusters (this broker's one)")
async def list_clusters(broker: BrokerDep) -> JSONResponse:
    settings = broker.settings
    return JSONResponse(
        {
            "kind": "KafkaClusterList",
            "metadata": {"self": f"{settings.url.rstrip('/')}/v3/clusters", "next": None},
            "data": [cluster_data(settings)],
        }
    )


@router.get("/clusters/{cluster_id}", summary="Get the cluster")
async def get_cluster(cluster_id: str, broker: BrokerDep) -> JSONResponse:
    check_cluster(broker, cluster_id)
    return JSONResponse(cluster_data(broker.settings))


# -- decoding records -------------------------------------------------------------


class RecordRefused(Exception):
    """One record cannot be produced as sent: a delivery report with ``error_code``
    (400, the HTTP status whose phrase the message starts with, unless the REST Proxy
    has a code of its own for the case)."""

    def __init__(self, text: str, error_code: int = 400) -> None:
        super().__init__(text)
        self.error_code = error_code

    @property
    def message(self) -> str:
        text = str(self)
        return status_message(400, text) if self.error_code == 400 else text


@dataclass
class Decoded:
    """A record ready to produce, and what its delivery report says about key and value."""

    partition: int | None = None
    timestamp_ms: int | None = None
    key: bytes | None = None
    value: bytes | None = None
    headers: list[dict[str, Any]] = field(default_factory=list)
    key_info: V3ProduceResponseData | None = None
    value_info: V3ProduceResponseData | None = None


_SCHEMA_FIELDS = ("subject", "subject_name_strategy", "schema_id", "schema_version", "schema_")


@dataclass
class SchemaContext:
    """What schema'd keys and values are written with: the registry's embedded formats, the
    topic (subjects are named after it), and the schemas this request already resolved."""

    schemas: Schemas
    topic: str
    may: SubjectCheck = allow_all
    resolved: dict[tuple[bool, SchemaRequest], Any] = field(default_factory=dict)

    def write(
        self, part: V3ProduceData, kind: str | None, where: str
    ) -> tuple[bytes | None, V3ProduceResponseData]:
        is_key = where == "key"
        try:
            asked = SchemaRequest(
                schema_type=V3_TYPES[kind] if kind else None,
                subject=part.subject,
                strategy=parse_strategy(part.subject_name_strategy),
                schema_id=part.schema_id,
                version=part.schema_version,
                text=part.schema_,
            )
            found = self.resolved.get((is_key, asked))
            if found is None:
                try:
                    found = self.schemas.resolve(self.topic, is_key, asked, self.may)
                except SchemaRefused as refused:
                    found = refused
                self.resolved[(is_key, asked)] = found
            if isinstance(found, SchemaRefused):
                raise found
            data = (
                None
                if part.data is None
                else self.schemas.encode(found, part.data, f"{where}.data")
            )
        except SchemaRefused as refused:
            raise RecordRefused(f"{where}: {refused.message}", refused.v3_code) from None
        kind_name = next(name for name, t in V3_TYPES.items() if t is found.schema.schema_type)
        info = V3ProduceResponseData(
            type=kind_name,
            size=len(data or b""),
            subject=found.subject,
            schema_id=found.schema_id,
            schema_version=found.version,
        )
        return data, info


def decode_part(
    part: V3ProduceData | None, where: str, schemas: SchemaContext | None = None
) -> tuple[bytes | None, V3ProduceResponseData | None]:
    if part is None:
        return None, None
    kind = part.type.upper() if part.type is not None else None
    with_schema = [n.rstrip("_") for n in _SCHEMA_FIELDS if getattr(part, n) is not None]
    if kind in V3_TYPES or (kind is None and with_schema):
        if schemas is None:
            raise RecordRefused(f"{where} is written with a schema, which needs a Schema Registry")
        return schemas.write(part, kind, where)
    kind = kind or "BINARY"
    fmt = DATA_TYPES.get(kind)
    if fmt is None:
        raise RecordRefused(
            f"{where}.type {part.type!r} is unknown; use BINARY, STRING, JSON, AVRO, "
            "JSONSCHEMA or PROTOBUF"
        )
    if with_schema:
        raise RecordRefused(
            f"{where}.{with_schema[0]} is for the schema'd types AVRO, JSONSCHEMA and PROTOBUF, "
            f"not {kind}"
        )
    if fmt == "base64" and part.data is not None and not isinstance(part.data, str):
        hint = "" if part.type else f" ({where} has no type, so it is BINARY)"
        raise RecordRefused(f"{where}.data={json.dumps(part.data)} is not a base64 string.{hint}")
    try:
        data = decode_data(part.data, fmt, f"{where}.data")
    except InvalidRecordError as exc:
        raise RecordRefused(exc.message) from None
    return data, V3ProduceResponseData(type=kind, size=len(data or b""))


def parse_timestamp(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise RecordRefused(f"timestamp {text!r} is not an RFC 3339 date-time") from None
    if moment.tzinfo is None:
        raise RecordRefused(f"timestamp {text!r} has no time zone offset (e.g. Z)")
    millis = (moment - EPOCH) // timedelta(milliseconds=1)
    if millis < 0:
        raise RecordRefused(f"timestamp {text!r} is before 1970")
    if millis > MAX_TIMESTAMP_MS:
        raise RecordRefused(f"timestamp {text!r} is after the year 9999")
    return millis


def decode_record(
    obj: Any,
    model: type[V3ProduceRecord] = V3ProduceRecord,
    schemas: SchemaContext | None = None,
) -> Decoded:
    if not isinstance(obj, dict):
        raise RecordRefused(f"a record must be a JSON object, got {json.dumps(obj)[:80]}")
    try:
        record = msgspec.convert(obj, model, strict=False)
    except msgspec.ValidationError as exc:
        raise RecordRefused(describe(exc)) from None
    key, key_info = decode_part(record.key, "key", schemas)
    value, value_info = decode_part(record.value, "value", schemas)
    headers = []
    for j, header in enumerate(record.headers):
        raw = None
        if header.value is not None:
            try:
                raw = base64.b64decode(header.value, validate=True)
            except (binascii.Error, ValueError):
                raise RecordRefused(
                    f"headers[{j}].value={header.value[:40]!r} is not a base64 string."
                ) from None
        headers.append({"key": header.name, "value": raw})
    return Decoded(
        partition=record.partition_id,
        timestamp_ms=parse_timestamp(record.timestamp),
        key=key,
        value=value,
        headers=headers,
        key_info=key_info,
        value_info=value_info,
    )


def split_concatenated(text: str) -> list[Any | RecordRefused]:
    """The JSON values of a concatenated-JSON body; a parse error ends the list."""
    decoder = json.JSONDecoder()
    values: list[Any | RecordRefused] = []
    position = 0
    while True:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position >= len(text):
            return values
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            values.append(RecordRefused(f"malformed JSON: {exc}"))
            return values
        values.append(value)


# -- producing --------------------------------------------------------------------


@dataclass(frozen=True)
class Written:
    partition: int
    offset: int
    timestamp_ms: int


Outcome = Written | LakelogError


@dataclass(frozen=True, eq=False)
class AllWritten:
    """Every record of a produce written in one commit: where each one went, in record order.

    Kept as numpy columns, so an answer for a thousand records is written
    straight from them rather than from an object per record (and never
    compared: ``==`` on arrays is elementwise, hence ``eq=False``).
    """

    partitions: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]
    timestamps_ms: npt.NDArray[np.int64]

    def outcomes(self) -> list[Outcome]:
        return [
            Written(p, o, t)
            for p, o, t in zip(
                self.partitions.tolist(),
                self.offsets.tolist(),
                self.timestamps_ms.tolist(),
                strict=True,
            )
        ]


def refused_by_record(exc: LakelogError) -> bool:
    """Errors lakelog raises while validating a request, before anything is queued."""
    return not exc.retriable and 400 <= exc.http_status < 500


def outcomes_of(written: AllWritten | list[Outcome]) -> list[Outcome]:
    return written.outcomes() if isinstance(written, AllWritten) else written


async def write(
    broker: Broker, topic_log: TopicLog, batch: ProduceBatch
) -> AllWritten | list[Outcome]:
    """Produce ``batch`` in one commit; if some rows make lakelog refuse it, the others alone."""
    n = batch.num_rows
    try:
        result = await (await broker.submit(topic_log.name, batch))
    except LakelogError as exc:
        if not refused_by_record(exc) or n == 1:
            return [exc] * n
        outcomes: list[Outcome | None] = [None] * n
        for i in range(n):
            try:
                topic_log.prepare(batch.take([i]))  # validation only, nothing is written
            except LakelogError as refused:
                outcomes[i] = refused
        good = [i for i, outcome in enumerate(outcomes) if outcome is None]
        if len(good) == n:
            return [exc] * n
        if good:
            retried = outcomes_of(await write(broker, topic_log, batch.take(good)))
            for i, outcome in zip(good, retried, strict=True):
                outcomes[i] = outcome
        return [o if o is not None else exc for o in outcomes]
    return AllWritten(*result.arrays())


def report_times(stamps: npt.NDArray[np.int64]) -> list[str]:
    """Each record's timestamp as its report writes it; each distinct reading rendered once.

    A commit stamps a request's records with one clock reading, so the usual
    answer renders one text and skips the sort that finding distinct readings
    takes.
    """
    if len(stamps) and (stamps == stamps[0]).all():
        return [rfc3339(int(stamps[0]))] * len(stamps)
    readings, which = np.unique(stamps, return_inverse=True)
    texts = [rfc3339(t) for t in readings.tolist()]
    return [texts[i] for i in which.tolist()]


def rfc3339(millis: int) -> str:
    moment = EPOCH + timedelta(milliseconds=millis)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def topic_for(broker: Broker, cluster_id: str, topic: str) -> TopicLog:
    check_cluster(broker, cluster_id)
    try:
        return await broker.topic(topic)
    except LakelogError as exc:
        if exc.code == 3:
            raise V3Failure(404, f"topic {topic!r} does not exist") from None
        raise


async def read_json_raw(request: Request, broker: Broker) -> bytes:
    """The body of a request whose content type and size are accepted (415, 413 otherwise)."""
    kind = media_type(request)
    if kind not in (JSON, ""):
        raise V3Failure(415, f"content type {kind!r}; send {JSON}")
    raw = await read_body(request, broker.settings.max_request_bytes)
    broker.metrics.bytes_in.inc(len(raw))
    return raw


def json_text(raw: bytes) -> str:
    """The body as text, refusing one that is not UTF-8 (400) or is empty (422)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise V3Failure(400, f"the body is not UTF-8: {exc}") from None
    if not text.strip():
        raise V3Failure(422, "the request body is empty; send one or more records")
    return text


def decode_each(
    values: Iterable[Any],
    model: type[V3ProduceRecord] = V3ProduceRecord,
    schemas: SchemaContext | None = None,
) -> list[Decoded | RecordRefused]:
    """Each value as a record to produce, or the reason it cannot be (kept in its place).

    Without ``schemas`` a schema'd key or value is refused; with them the registry may
    be read, so callers on the event loop run this on a worker thread."""
    items: list[Decoded | RecordRefused] = []
    for value in values:
        if isinstance(value, RecordRefused):
            items.append(value)
            continue
        try:
            items.append(decode_record(value, model, schemas))
        except RecordRefused as refused:
            items.append(refused)
    return items


async def decode_with_schemas(
    request: Request,
    broker: Broker,
    topic: str,
    values: list[Any],
    model: type[V3ProduceRecord] = V3ProduceRecord,
) -> list[Decoded | RecordRefused]:
    """``decode_each`` with the broker's Schema Registry, under the caller's SUBJECT ACLs,
    on a worker thread (it may read storage)."""
    context = SchemaContext(schemas_of(broker.schema_registry), topic, subject_check(request))
    return await asyncio.to_thread(decode_each, values, model, context)


async def deliver(
    broker: Broker, topic_log: TopicLog, items: list[Decoded | RecordRefused]
) -> list[tuple[Decoded, Outcome] | RecordRefused]:
    """Write the records that decoded (see ``write``); each with its outcome, in request order."""
    rows = [item for item in items if isinstance(item, Decoded)]
    batch = ProduceBatch.from_columns(
        partition=[r.partition for r in rows],
        timestamp=[r.timestamp_ms for r in rows],
        key=[r.key for r in rows],
        value=[r.value for r in rows],
        headers=[r.headers for r in rows],
    )
    written = iter(outcomes_of(await write(broker, topic_log, batch)) if rows else [])
    return [item if isinstance(item, RecordRefused) else (item, next(written)) for item in items]


@router.post(
    "/clusters/{cluster_id}/topics/{topic_name}/records",
    responses={200: {"model": V3ProduceResponse, "description": "One report per record"}},
    openapi_extra=request_body(
        body_schema(V3ProduceRecord),
        JSON,
        description="One record, or several as concatenated JSON objects",
    ),
    summary="Produce records (one, or a stream of concatenated JSON objects)",
)
async def produce_records(
    cluster_id: str, topic_name: str, request: Request, broker: BrokerDep
) -> Response:
    """Producing to the internal topic `__consumer_offsets` gives every record a report with
    `error_code` 400 (`INVALID_TOPIC_EXCEPTION: cannot append to internal topic ...`).

    A key or value of type `AVRO`, `JSONSCHEMA` or `PROTOBUF` (or with no type and a schema
    field) is written with a schema of the Schema Registry, framed as Confluent's serializers
    frame it: `schema_id`, or `schema_version` of the subject, or an inline `schema`
    (registered under the subject if new), else the subject's latest version. The subject is
    `subject`, else `subject_name_strategy`'s: `TOPIC_NAME` (`<topic>-key`, `<topic>-value`,
    the default), `RECORD_NAME` or `TOPIC_RECORD_NAME`. Its report names the `subject`,
    `schema_id` and `schema_version`. Refused per record: `error_code` 400 for data that does
    not fit the schema, an invalid schema, an unknown version or a bad combination of
    fields; 42207 when the registry has no such schema id or subject; 403 without SUBJECT
    READ on the subject (WRITE to register an inline schema)."""
    with broker.batcher.receiving(topic_name):
        topic_log = await topic_for(broker, cluster_id, topic_name)
        raw = await read_json_raw(request, broker)
        # A body the fast decoder takes is UTF-8 JSON with at least one record, so the checks
        # of json_text only matter for the others.
        fast = decode_v3_stream(raw)
        stamps = column_timestamps(fast.timestamps) if fast is not None else None
        if fast is not None and stamps is not None:
            body = await produce_columns(broker, topic_log, cluster_id, fast, stamps)
        else:
            # Records decoded one by one through the models, each reported in its place.
            items = await decode_with_schemas(
                request, broker, topic_name, split_concatenated(json_text(raw))
            )
            body = render_reports(
                V3ProduceResponse(**report_fields(cluster_id, topic_name, item))
                for item in await deliver(broker, topic_log, items)
            )
    broker.metrics.bytes_out.inc(len(body))
    return Response(body, media_type=JSON)


def report_fields(
    cluster_id: str, topic_name: str, item: tuple[Decoded, Outcome] | RecordRefused
) -> dict[str, Any]:
    """What one record's report says: ``error_code`` 200 and where it went, or why it was not
    written (a single report, or a batch success or failure)."""
    if isinstance(item, RecordRefused):
        return {"error_code": item.error_code, "message": item.message}
    decoded, outcome = item
    if isinstance(outcome, LakelogError):
        return {"error_code": outcome.http_status, "message": lakelog_message(outcome)}
    return {
        "error_code": 200,
        "cluster_id": cluster_id,
        "topic_name": topic_name,
        "partition_id": outcome.partition,
        "offset": outcome.offset,
        "timestamp": rfc3339(outcome.timestamp_ms),
        "key": decoded.key_info,
        "value": decoded.value_info,
    }


def render_reports(reports: Iterable[V3ProduceResponse]) -> str:
    return "".join(
        json.dumps(r.model_dump(mode="json", exclude_none=True), separators=(",", ":")) + "\n"
        for r in reports
    )


def column_timestamps(texts: list[str | None]) -> pa.Array | None:
    """The records' timestamps in ms (null: the broker's clock), or None if one is refused
    (the models' path then reports it on its record)."""
    if texts.count(None) == len(texts):
        return pa.nulls(len(texts), TIMESTAMP_TYPE)
    try:
        millis = [parse_timestamp(t) for t in texts]
    except RecordRefused:
        return None
    return pa.array(millis, pa.int64()).cast(TIMESTAMP_TYPE)


async def produce_columns(
    broker: Broker, topic_log: TopicLog, cluster_id: str, columns: V3Columns, stamps: pa.Array
) -> str | bytes:
    """The records of a stream the fast decoder took: one batch, reports from columns."""
    n = len(columns)
    given = columns.partitions
    batch = ProduceBatch.from_columns(
        num_rows=n,
        partition=None if given.count(None) == n else pa.array(given, pa.int32()),
        timestamp=stamps,
        key=columns.keys,
        value=columns.values,
        headers=empty_headers(n),
    )
    written = await write(broker, topic_log, batch)
    key_sizes = binary_lengths(pa.chunked_array([columns.keys])).tolist()
    value_sizes = binary_lengths(pa.chunked_array([columns.values])).tolist()
    if isinstance(written, AllWritten):
        times = report_times(written.timestamps_ms)
        return v3_report_json(
            cluster_id,
            topic_log.name,
            columns,
            written.partitions,
            written.offsets,
            times,
            key_sizes,
            value_sizes,
        )
    reports = []
    for i, outcome in enumerate(written):
        key = V3ProduceResponseData(type=columns.key_kind, size=key_sizes[i])
        value = V3ProduceResponseData(type=columns.value_kind, size=value_sizes[i])
        decoded = Decoded(
            key_info=key if columns.has_key[i] else None,
            value_info=value if columns.has_value[i] else None,
        )
        fields = report_fields(cluster_id, topic_log.name, (decoded, outcome))
        reports.append(V3ProduceResponse(**fields))
    return render_reports(reports)


BATCH_SCHEMA = {
    "type": "object",
    "required": ["entries"],
    "properties": {"entries": {"type": "array", "items": body_schema(V3BatchEntry)}},
}


def batch_ids(document: Any) -> tuple[list[Any], list[str]]:
    """The entries and their ids, or 400 for the whole request if they cannot be told apart."""
    if not isinstance(document, dict) or not isinstance(document.get("entries"), list):
        raise V3Failure(400, "the body must be an object with a list of entries")
    entries: list[Any] = document["entries"]
    if not entries:
        raise V3Failure(400, "entries is empty; send at least one record")
    extra = set(document) - {"entries"}
    if extra:
        raise V3Failure(400, f"Unrecognized field: {sorted(extra)[0]}")
    ids = []
    for i, entry in enumerate(entries):
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(entry_id, str) or not 1 <= len(entry_id) <= 80:
            raise V3Failure(400, f"entries[{i}].id must be a string of 1 to 80 characters")
        ids.append(entry_id)
    if len(set(ids)) != len(ids):
        duplicate = next(x for x in ids if ids.count(x) > 1)
        raise V3Failure(400, f"entry id {duplicate!r} is used more than once")
    return entries, ids


@router.post(
    "/clusters/{cluster_id}/topics/{topic_name}/records:batch",
    status_code=207,
    responses={207: {"model": V3BatchResponse, "description": "Successes and failures"}},
    openapi_extra=request_body(BATCH_SCHEMA, JSON),
    summary="Produce a batch of records",
)
async def produce_batch(
    cluster_id: str, topic_name: str, request: Request, broker: BrokerDep
) -> Response:
    """Producing to the internal topic `__consumer_offsets` puts every entry in `failures`
    with `error_code` 400 (`INVALID_TOPIC_EXCEPTION: cannot append to internal topic ...`).
    Schema'd keys and values as for `POST .../records`."""
    with broker.batcher.receiving(topic_name):
        topic_log = await topic_for(broker, cluster_id, topic_name)
        text = json_text(await read_json_raw(request, broker))
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise V3Failure(400, f"malformed JSON: {exc}") from None
        entries, ids = batch_ids(document)
        items = await decode_with_schemas(request, broker, topic_name, entries, V3BatchEntry)
        delivered = await deliver(broker, topic_log, items)
    successes: list[V3BatchSuccess] = []
    failures: list[V3BatchFailure] = []
    for entry_id, item in zip(ids, delivered, strict=True):
        fields = report_fields(cluster_id, topic_name, item)
        code = fields.pop("error_code")
        if code == 200:
            successes.append(V3BatchSuccess(id=entry_id, **fields))
        else:
            failures.append(V3BatchFailure(id=entry_id, error_code=code, **fields))
    body = V3BatchResponse(successes=successes, failures=failures)
    return JSONResponse(body.model_dump(mode="json", exclude_none=True), status_code=207)
