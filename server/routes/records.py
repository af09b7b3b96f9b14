"""Native produce, fetch and offset lookup: ``/v1/topics/{topic}/...``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import pyarrow as pa
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from lakelog.errors import InvalidRequestError, LakelogError, UnsupportedContentTypeError
from lakelog.numerals import is_unsigned_int
from lakelog.partition_state import PartitionOffsets
from lakelog.produce_batch import ProduceBatch
from lakelog.records import timestamp_type_name
from lakelog.security.quota import QuotaKind
from lakelog.topic_log import FetchResult
from server.broker import Broker, OffsetSpec, parse_acks
from server.codec import (
    ARROW_STREAM,
    NDJSON,
    DataFormat,
    DecodedProduce,
    arrow_stream_bytes,
    decode_data,
    decode_produce_json,
    encode_data,
    fetch_table,
    parse_arrow_stream,
    produce_response_json,
)
from server.http import (
    ERROR_RESPONSES,
    ClientDisconnected,
    get_broker,
    media_type,
    read_body,
    unless_disconnected,
    validation_error,
)
from server.models import (
    AcceptedResponse,
    FetchResponse,
    OffsetResponse,
    ProduceRequest,
    ProduceResponse,
    TopicOffsets,
)
from server.security import record_quota

router = APIRouter(prefix="/v1", tags=["records"], responses=ERROR_RESPONSES)

TopicName = Annotated[str, Path(description="Topic name", min_length=1, max_length=249)]
PartitionId = Annotated[int, Path(ge=0, le=2**31 - 1)]
BrokerDep = Annotated[Broker, Depends(get_broker)]

PRODUCE_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/ProduceRequest"}},
            ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


def request_to_batch(body: ProduceRequest) -> ProduceBatch:
    """JSON records as a produce batch, decoding keys/values/headers by the given formats."""
    kf, vf = body.key_format, body.value_format
    hf: DataFormat = "string" if vf == "json" else vf
    keys, values, headers, partitions, stamps = [], [], [], [], []
    for i, r in enumerate(body.records):
        keys.append(decode_data(r.key, kf, f"records[{i}].key"))
        values.append(decode_data(r.value, vf, f"records[{i}].value"))
        headers.append(
            [
                {"key": h.key, "value": decode_data(h.value, hf, f"records[{i}].headers[{j}]")}
                for j, h in enumerate(r.headers)
            ]
        )
        partitions.append(r.partition)
        stamps.append(r.timestamp_ms)
    return ProduceBatch.from_columns(
        partition=partitions, timestamp=stamps, key=keys, value=values, headers=headers
    )


@router.post(
    "/topics/{topic}/records",
    response_model=ProduceResponse | AcceptedResponse,
    openapi_extra=PRODUCE_BODY,
    summary="Produce records (JSON or Arrow IPC stream)",
)
async def produce(
    topic: TopicName,
    request: Request,
    broker: BrokerDep,
    acks: Annotated[str, Query(description="0, 1 or all")] = "all",
    partition: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    producer_id: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
    sequence: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
) -> ProduceResponse | AcceptedResponse | Response:
    """A request is validated whole before anything is written. The internal topic
    `__consumer_offsets` refuses every produce (400, `INVALID_TOPIC_EXCEPTION`): only the
    group coordinator writes it; commit offsets through `/v1/groups/{group}/offsets`."""
    required_acks = parse_acks(acks)
    with broker.batcher.receiving(topic):
        raw = await read_body(request, broker.settings.max_request_bytes)
        throttle_ms = record_quota(request, QuotaKind.PRODUCE, len(raw))
        broker.metrics.bytes_in.inc(len(raw))
        kind = media_type(request)
        batch: ProduceBatch
        if kind == ARROW_STREAM:
            batch = parse_arrow_stream(raw)
        elif kind in ("application/json", ""):
            sent: DecodedProduce | ProduceRequest | None = decode_produce_json(raw)
            if sent is None:  # unusual bodies: the models decide, and explain
                try:
                    sent = ProduceRequest.model_validate_json(raw)
                except ValidationError as exc:
                    raise validation_error(exc) from None
            batch = sent.batch if isinstance(sent, DecodedProduce) else request_to_batch(sent)
            producer_id = sent.producer_id if sent.producer_id is not None else producer_id
            sequence = sent.sequence if sent.sequence is not None else sequence
        else:
            raise UnsupportedContentTypeError(
                f"unsupported content type {kind!r}; use application/json or {ARROW_STREAM}"
            )
        if partition is not None:
            batch = batch.with_partition(partition)
        future = await broker.submit(topic, batch, required_acks, producer_id, sequence)
    if required_acks == 0:
        return AcceptedResponse(topic=topic, accepted=batch.num_rows, throttle_time_ms=throttle_ms)
    # ProduceResponse's shape, written directly: no model per record (see the codec).
    return Response(
        produce_response_json(topic, await future, throttle_ms), media_type="application/json"
    )


def parse_offset(value: str, name: str = "offset") -> OffsetSpec:
    text = value.strip().lower()
    if text in ("earliest", "beginning", "-2"):
        return "earliest"
    if text in ("latest", "end", "-1"):
        return "latest"
    if is_unsigned_int(text):
        return int(text)
    raise InvalidRequestError(f"{name} must be a number, earliest or latest; got {value!r}")


def encode_records(
    fetched: FetchResult, kf: DataFormat, vf: DataFormat
) -> Iterator[dict[str, Any]]:
    rows = fetched.records
    offsets = rows.column("offset").to_pylist()
    stamps = rows.column("timestamp").cast(pa.int64()).to_pylist()
    types = rows.column("timestamp_type").to_pylist()
    keys = rows.column("key").to_pylist()
    values = rows.column("value").to_pylist()
    headers = rows.column("headers").to_pylist()
    hf: DataFormat = "string" if vf == "json" else vf
    for i, offset in enumerate(offsets):
        where = f"offset {offset}"
        yield {
            "offset": offset,
            "timestamp_ms": stamps[i],
            "timestamp_type": timestamp_type_name(types[i]),
            "key": encode_data(keys[i], kf, f"key at {where}"),
            "value": encode_data(values[i], vf, f"value at {where}"),
            "headers": [
                {"key": h["key"], "value": encode_data(h["value"], hf, f"header at {where}")}
                for h in headers[i] or []
            ],
        }


FetchFormat = Literal["json", "ndjson", "arrow"]


@router.get(
    "/topics/{topic}/partitions/{partition}/records",
    response_model=FetchResponse,
    summary="Fetch records from an offset, with an optional long poll",
    responses={
        200: {
            "content": {
                NDJSON: {"schema": {"type": "string"}},
                ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}},
            }
        }
    },
)
async def fetch(
    topic: TopicName,
    partition: PartitionId,
    request: Request,
    broker: BrokerDep,
    offset: Annotated[str, Query(description="A number, earliest or latest")] = "earliest",
    max_records: Annotated[int, Query(ge=1, le=1_000_000)] = 500,
    max_bytes: Annotated[int, Query(ge=1, le=1 << 30)] = 1 << 20,
    max_wait_ms: Annotated[int, Query(ge=0, le=300_000)] = 0,
    format: Annotated[FetchFormat | None, Query(description="Overrides Accept")] = None,
    key_format: DataFormat = "string",
    value_format: DataFormat = "string",
) -> Any:
    work = broker.fetch(topic, partition, parse_offset(offset), max_records, max_bytes, max_wait_ms)
    try:
        fetched = await (unless_disconnected(request, work) if max_wait_ms else work)
    except ClientDisconnected:
        broker.metrics.abandoned_fetches.inc()
        return Response(status_code=499)  # nginx's "client closed request"; nobody reads it
    throttle_ms = record_quota(request, QuotaKind.FETCH, fetched.records.nbytes)
    accept = request.headers.get("accept", "")
    chosen = format or (
        "arrow" if ARROW_STREAM in accept else "ndjson" if NDJSON in accept else "json"
    )
    headers = {
        "X-Lakelog-High-Watermark": str(fetched.high_watermark),
        "X-Lakelog-Log-Start-Offset": str(fetched.log_start_offset),
        "X-Lakelog-Next-Offset": str(fetched.next_offset),
    }
    if chosen == "arrow":
        data = arrow_stream_bytes(fetch_table(topic, partition, fetched.records))
        broker.metrics.bytes_out.inc(len(data))
        return Response(data, media_type=ARROW_STREAM, headers=headers)
    records = list(encode_records(fetched, key_format, value_format))
    if chosen == "ndjson":
        lines = [json.dumps(r, separators=(",", ":")) + "\n" for r in records]
        broker.metrics.bytes_out.inc(sum(len(x) for x in lines))
        return StreamingResponse(iter(lines), media_type=NDJSON, headers=headers)
    body = {
        "topic": topic,
        "partition": partition,
        "high_watermark": fetched.high_watermark,
        "log_start_offset": fetched.log_start_offset,
        "next_offset": fetched.next_offset,
        "records": records,
        "throttle_time_ms": throttle_ms,
    }
    data = json.dumps(body, separators=(",", ":")).encode()
    broker.metrics.bytes_out.inc(len(data))
    return Response(data, media_type="application/json", headers=headers)


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets",
    response_model=OffsetResponse,
    summary="Earliest, latest, or first offset at/after a timestamp (ListOffsets)",
)
async def list_offset(
    topic: TopicName,
    partition: PartitionId,
    broker: BrokerDep,
    timestamp: Annotated[
        str, Query(description="earliest, latest, or a timestamp in ms since the epoch")
    ] = "latest",
) -> OffsetResponse:
    """A timestamp after the partition's last record answers the high watermark with a null
    ``timestamp_ms``: where a consumer of that time starts (Kafka's ListOffsets answers
    offset -1 there)."""
    if not is_unsigned_int(timestamp.strip()):
        spec = parse_offset(timestamp, "timestamp")
        topic_log = await broker.topic(topic)
        topic_log.check_partition(partition)
        offset = await broker.resolve_offset(topic_log, partition, spec)
        return OffsetResponse(topic=topic, partition=partition, offset=offset)
    found: tuple[int, int | None] | None
    found = await broker.offset_for_time(topic, partition, int(timestamp))
    if found is None:
        found = ((await broker.topic(topic)).high_watermark(partition), None)
    offset, ts = found
    return OffsetResponse(topic=topic, partition=partition, offset=offset, timestamp_ms=ts)


@router.get("/topics/{topic}/offsets", response_model=TopicOffsets, summary="All partitions")
async def topic_offsets(topic: TopicName, broker: BrokerDep) -> TopicOffsets:
    topic_log = await broker.topic(topic)
    await broker.refresh(topic_log, broker.settings.refresh_interval_ms / 1000)
    return TopicOffsets(
        topic=topic,
        partitions=[
            PartitionOffsets(
                partition=p,
                log_start_offset=topic_log.log_start_offset(p),
                high_watermark=topic_log.high_watermark(p),
            )
            for p in range(topic_log.num_partitions)
        ],
    )


__all__ = ["LakelogError", "router"]
