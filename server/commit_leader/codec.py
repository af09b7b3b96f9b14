"""Handoff bodies: a group of prepared requests to the leader, their results back.

Both are one Arrow IPC stream: the rows of all requests (or the partition,
offset and timestamp of every stored record) in order, with a JSON list in
the schema metadata saying where each request starts and what it carries.
Pure: no I/O, tested without a broker.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakelog.append.result import AppendResult, partition_batches
from lakelog.errors import InvalidRequestError, LakelogError, error_for_code
from lakelog.produce import PreparedBatch
from lakelog.records import PRODUCE_SCHEMA
from server.codec import arrow_stream_bytes

#: Schema metadata key holding the per-request JSON list.
REQUESTS_KEY = b"lakelog.requests"

#: What a prepared request's rows hold: the produce columns and the timestamp type.
PREPARED_SCHEMA = PRODUCE_SCHEMA.append(pa.field("timestamp_type", pa.int32(), nullable=False))

RESULT_SCHEMA = pa.schema(
    [("partition", pa.int64()), ("offset", pa.int64()), ("timestamp", pa.int64())]
)


def _ipc(table: pa.Table, requests: list[Any]) -> bytes:
    metadata = {REQUESTS_KEY: json.dumps(requests).encode()}
    return arrow_stream_bytes(table.replace_schema_metadata(metadata))


def _read_ipc(body: bytes, what: str) -> tuple[pa.Table, list[Any]]:
    try:
        table = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
        requests = json.loads((table.schema.metadata or {})[REQUESTS_KEY])
    except (OSError, KeyError, ValueError) as exc:  # pa.ArrowInvalid is a ValueError
        raise InvalidRequestError(f"unreadable {what}: {exc}") from exc
    if not isinstance(requests, list):
        raise InvalidRequestError(f"unreadable {what}: the request list is not a list")
    return table.replace_schema_metadata(None), requests


def _columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    return [(f.name, f.type) for f in schema]


def encode_batches(batches: Sequence[PreparedBatch]) -> bytes:
    """The prepared requests of one group, in order."""
    table = pa.concat_tables([b.table for b in batches])
    meta = [[b.num_records, b.producer_id, b.base_sequence, b.sequence_partition] for b in batches]
    return _ipc(table, meta)


def decode_batches(body: bytes) -> list[PreparedBatch]:
    """The inverse of ``encode_batches``; a body that does not add up is refused."""
    table, meta = _read_ipc(body, "commit handoff")
    if _columns(table.schema) != _columns(PREPARED_SCHEMA):
        raise InvalidRequestError(
            f"unreadable commit handoff: rows of schema {table.schema}, not prepared produce rows"
        )
    batches: list[PreparedBatch] = []
    start = 0
    for item in meta:
        if not (isinstance(item, list) and len(item) == 4 and isinstance(item[0], int)):
            raise InvalidRequestError(f"unreadable commit handoff: bad request entry {item!r}")
        rows, producer_id, base_sequence, sequence_partition = item
        if rows <= 0 or start + rows > table.num_rows:
            raise InvalidRequestError("unreadable commit handoff: request rows do not add up")
        batches.append(
            PreparedBatch(
                table.slice(start, rows),
                producer_id,
                base_sequence,
                sequence_partition=sequence_partition,
            )
        )
        start += rows
    if start != table.num_rows or not batches:
        raise InvalidRequestError("unreadable commit handoff: request rows do not add up")
    return batches


def encode_results(results: Sequence[AppendResult | LakelogError]) -> bytes:
    """Each request's outcome: where its records landed, or its error."""
    meta: list[dict[str, Any]] = []
    columns: list[list[np.ndarray[Any, Any]]] = [[], [], []]
    for result in results:
        if isinstance(result, LakelogError):
            meta.append({"error_code": result.code, "message": result.message})
            continue
        for column, values in zip(columns, result.arrays(), strict=True):
            column.append(values)
        meta.append(
            {"rows": result.num_records, "version": result.version, "duplicate": result.duplicate}
        )
    arrays = [
        pa.array(np.concatenate(c) if c else np.zeros(0, np.int64), pa.int64()) for c in columns
    ]
    return _ipc(pa.Table.from_arrays(arrays, schema=RESULT_SCHEMA), meta)


def decode_results(body: bytes) -> list[AppendResult | LakelogError]:
    """The inverse of ``encode_results``."""
    table, meta = _read_ipc(body, "commit handoff answer")
    parts, offsets, stamps = (table.column(n).to_numpy() for n in RESULT_SCHEMA.names)
    results: list[AppendResult | LakelogError] = []
    start = 0
    for item in meta:
        if "error_code" in item:
            results.append(error_for_code(int(item["error_code"]))(str(item["message"])))
            continue
        end = start + int(item["rows"])
        p, o = parts[start:end], offsets[start:end]
        results.append(
            AppendResult(
                p,
                o,
                stamps[start:end],
                partition_batches(p, o),
                int(item["version"]),
                duplicate=bool(item["duplicate"]),
            )
        )
        start = end
    return results
