"""Records: what producers send, what consumers get, and their Arrow/Delta schema.

The stored columns are those of docs/architecture.md, "Stored columns".
``timestamp`` is Delta's ``timestamp`` type (microseconds, UTC) holding Kafka's
millisecond timestamps; ``partition`` is the Delta partition column, so it
lives in the file path, not in the file.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

CREATE_TIME = 0
LOG_APPEND_TIME = 1
TIMESTAMP_TYPE_NAMES = {CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}


def timestamp_type_name(code: int) -> str:
    """Kafka's name of a timestamp type; NoTimestampType for any other code (-1)."""
    return TIMESTAMP_TYPE_NAMES.get(code, "NoTimestampType")


HEADER_TYPE = pa.struct(
    [pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]
)
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE, nullable=False))
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")


def timestamps_from_ms(millis: np.ndarray) -> pa.Array:
    """A timestamp column over an int64 array of ms, none missing: the buffer as it is."""
    values = np.ascontiguousarray(millis, dtype=np.int64)
    return pa.Array.from_buffers(TIMESTAMP_TYPE, len(values), [None, pa.py_buffer(values)])


def _build_empty_headers(n: int) -> pa.Array:
    offsets = pa.array(np.zeros(n + 1, dtype=np.int32))
    empty = pa.ListArray.from_arrays(offsets, pa.array([], HEADERS_TYPE.value_type))
    return empty.cast(HEADERS_TYPE)


#: Rows of the prebuilt empty headers column that ``empty_headers`` slices.
_PREBUILT_ROWS = 65_536


@functools.cache
def _prebuilt_empty_headers() -> pa.Array:
    """Built on first use, not on import: importing the records schema allocates nothing."""
    return _build_empty_headers(_PREBUILT_ROWS)


def empty_headers(n: int) -> pa.Array:
    """``n`` empty header lists: a slice of one prebuilt array (building one per request cost)."""
    if n <= _PREBUILT_ROWS:
        return _prebuilt_empty_headers().slice(0, n)
    return _build_empty_headers(n)


#: Columns of a segment file (the partition column is in the Delta partition path).
SEGMENT_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", TIMESTAMP_TYPE, nullable=False),
        pa.field("timestamp_type", pa.int32(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS_TYPE),
        pa.field("producer_id", pa.int64()),
        pa.field("sequence", pa.int32()),
    ]
)

#: The input of an append: what the producer decided, before offsets exist.
PRODUCE_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("timestamp", TIMESTAMP_TYPE),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS_TYPE),
        pa.field("producer_id", pa.int64()),
        pa.field("sequence", pa.int32()),
    ]
)


#: Columns of produce rows that are not typed columns.
_NOT_TYPED = frozenset([*SEGMENT_SCHEMA.names, *PRODUCE_SCHEMA.names])


def with_offsets(rows: pa.Table, base_offset: int) -> pa.Table:
    """Produce rows (without ``partition``) as segment rows numbered from ``base_offset``,
    typed columns kept after the fixed ones.

    Built straight onto ``SEGMENT_SCHEMA`` (zero copy): adding the column the
    usual way gives a schema that differs only in nullability, and the cast
    that then fixes it before every segment write copied every value.
    """
    n = rows.num_rows
    columns = {
        "offset": pa.array(np.arange(base_offset, base_offset + n, dtype=np.int64)),
        **{name: rows.column(name) for name in SEGMENT_SCHEMA.names if name != "offset"},
    }
    if any(columns[f.name].null_count for f in SEGMENT_SCHEMA if not f.nullable):
        raise ValueError("segment rows need offset, timestamp and timestamp_type on every row")
    fixed = [
        columns[f.name] if columns[f.name].type == f.type else columns[f.name].cast(f.type)
        for f in SEGMENT_SCHEMA
    ]
    # Typed columns (lakelog.typed_columns) follow the fixed ones, as they came.
    typed = [rows.schema.field(name) for name in rows.column_names if name not in _NOT_TYPED]
    if not typed:
        return pa.Table.from_arrays(fixed, schema=SEGMENT_SCHEMA)
    return pa.Table.from_arrays(
        [*fixed, *(rows.column(f.name) for f in typed)],
        schema=pa.schema([*SEGMENT_SCHEMA, *typed]),
    )


_DELTA_TYPES = {
    pa.int32(): "integer",
    pa.int64(): "long",
    TIMESTAMP_TYPE: "timestamp",
    pa.binary(): "binary",
    pa.string(): "string",
}


def _delta_type(type_: pa.DataType) -> Any:
    """The Delta schema JSON of an Arrow type (the few types of ``SEGMENT_SCHEMA``)."""
    if pa.types.is_list(type_):
        element = type_.value_field
        return {
            "type": "array",
            "elementType": _delta_type(element.type),
            "containsNull": element.nullable,
        }
    if pa.types.is_struct(type_):
        fields = [
            {"name": f.name, "type": _delta_type(f.type), "nullable": f.nullable, "metadata": {}}
            for f in type_
        ]
        return {"type": "struct", "fields": fields}
    return _DELTA_TYPES[type_]


#: The table's Delta schema: the partition column, then the segment columns.
DELTA_SCHEMA_STRING = json.dumps(
    _delta_type(pa.struct([pa.field("partition", pa.int32(), nullable=False), *SEGMENT_SCHEMA])),
    separators=(",", ":"),
)

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class Record:
    """A record to append. ``value=None`` is a tombstone; ``timestamp_ms=None`` means now."""

    value: bytes | None
    key: bytes | None = None
    timestamp_ms: int | None = None
    headers: Sequence[Header] = ()
    partition: int | None = None

    def size_in_bytes(self) -> int:
        """Size counted against max.message.bytes (key + value + headers)."""
        size = len(self.key or b"") + len(self.value or b"")
        for name, value in self.headers:
            size += len(name.encode()) + len(value or b"")
        return size


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """A record read back from a partition."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


def table_to_records(topic: str, partition: int, table: pa.Table) -> list[ConsumerRecord]:
    """Segment rows (already filtered to one partition) as consumer records."""
    columns = {
        name: table.column(name).to_pylist()
        for name in ("offset", "timestamp_type", "key", "value", "headers")
    }
    millis = table.column("timestamp").cast(pa.int64()).to_pylist()
    return [
        ConsumerRecord(
            topic=topic,
            partition=partition,
            offset=columns["offset"][i],
            timestamp_ms=millis[i],
            timestamp_type=columns["timestamp_type"][i],
            key=columns["key"][i],
            value=columns["value"][i],
            headers=[(h["key"], h["value"]) for h in (columns["headers"][i] or [])],
        )
        for i in range(table.num_rows)
    ]
