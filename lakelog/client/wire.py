"""Bodies on the wire: produce requests out (JSON or Arrow IPC), fetch responses in.

Pure functions, so a request is encoded once and resent byte for byte on retry.
JSON carries bytes as base64; Arrow as binary columns, which wins for large
batches (no base64 inflation, no per-record JSON parsing on the broker).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.ipc

from lakelog.errors import UnknownServerError
from lakelog.produce_batch import PRODUCER_COLUMNS, ProduceBatch
from lakelog.records import (
    TIMESTAMP_TYPE_NAMES,
    ConsumerRecord,
    Record,
    table_to_records,
)

ARROW_STREAM = "application/vnd.apache.arrow.stream"
JSON = "application/json"
WireFormat = Literal["json", "arrow"]

#: Per-record bytes a request spends besides key, value and headers (offsets,
#: timestamps, JSON punctuation); only used to size batches, never exact.
RECORD_OVERHEAD = 40

_TIMESTAMP_TYPES = {name: code for code, name in TIMESTAMP_TYPE_NAMES.items()}


@dataclass(frozen=True)
class EncodedProduce:
    """A produce request ready to send, and resend unchanged."""

    body: bytes
    content_type: str
    params: dict[str, str | int]


def record_size(record: Record) -> int:
    """What a record adds to a request (for batch sizing and max_request_size)."""
    return record.size_in_bytes() + RECORD_OVERHEAD + 8 * len(record.headers)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def encode_produce(
    records: Sequence[Record],
    fmt: WireFormat,
    acks: str,
    producer_id: int | None = None,
    sequence: int | None = None,
) -> EncodedProduce:
    """One request's body; ``producer_id``/``sequence`` make it idempotent."""
    ids: dict[str, int] = {}
    if producer_id is not None and sequence is not None:
        ids = {"producer_id": producer_id, "sequence": sequence}
    if fmt == "arrow":
        return EncodedProduce(_arrow_body(records), ARROW_STREAM, {"acks": acks, **ids})
    body: dict[str, Any] = {
        "records": [_json_record(r) for r in records],
        "key_format": "base64",
        "value_format": "base64",
        **ids,
    }
    return EncodedProduce(json.dumps(body, separators=(",", ":")).encode(), JSON, {"acks": acks})


def _json_record(record: Record) -> dict[str, Any]:
    out: dict[str, Any] = {"key": _b64(record.key), "value": _b64(record.value)}
    if record.partition is not None:
        out["partition"] = record.partition
    if record.timestamp_ms is not None:
        out["timestamp_ms"] = record.timestamp_ms
    if record.headers:
        out["headers"] = [{"key": k, "value": _b64(v)} for k, v in record.headers]
    return out


def _arrow_body(records: Sequence[Record]) -> bytes:
    # The broker takes idempotence from the request's parameters, never from columns.
    table = ProduceBatch.from_records(records).table.drop_columns(list(PRODUCER_COLUMNS))
    sink = pa.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


@dataclass(frozen=True)
class FetchedRecords:
    """One fetch response: records from the requested offset, and where to go next."""

    records: list[ConsumerRecord]
    high_watermark: int
    log_start_offset: int
    next_offset: int


def decode_fetch(
    topic: str, partition: int, content_type: str, headers: Mapping[str, str], body: bytes
) -> FetchedRecords:
    """A fetch response in either format (JSON asked with base64 keys/values)."""
    if content_type.split(";")[0].strip().lower() == ARROW_STREAM:
        table = pyarrow.ipc.open_stream(pa.py_buffer(body)).read_all()
        try:
            return FetchedRecords(
                table_to_records(topic, partition, table),
                int(headers["x-lakelog-high-watermark"]),
                int(headers["x-lakelog-log-start-offset"]),
                int(headers["x-lakelog-next-offset"]),
            )
        except KeyError as exc:
            raise UnknownServerError(f"Arrow fetch response lacks the header {exc}") from None
    data = json.loads(body)
    return FetchedRecords(
        [_consumer_record(topic, partition, r) for r in data["records"]],
        int(data["high_watermark"]),
        int(data["log_start_offset"]),
        int(data["next_offset"]),
    )


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _consumer_record(topic: str, partition: int, r: Mapping[str, Any]) -> ConsumerRecord:
    return ConsumerRecord(
        topic=topic,
        partition=partition,
        offset=int(r["offset"]),
        timestamp_ms=int(r["timestamp_ms"]),
        timestamp_type=_TIMESTAMP_TYPES.get(r.get("timestamp_type", ""), -1),
        key=_unb64(r.get("key")),
        value=_unb64(r.get("value")),
        headers=[(h["key"], _unb64(h.get("value"))) for h in r.get("headers") or []],
    )


__all__ = [
    "ARROW_STREAM",
    "EncodedProduce",
    "FetchedRecords",
    "WireFormat",
    "decode_fetch",
    "encode_produce",
    "record_size",
]
