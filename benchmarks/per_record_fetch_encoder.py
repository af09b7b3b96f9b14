"""Segment rows to RecordBatch v2 record by record: the baseline of the Fetch encoder.

Rows go one by one, as Python objects, through aiokafka's compiled
``DefaultRecordBatchBuilder``, then the broker's fields (base offset, last
offset delta, the LogAppendTime attribute) are patched into the header and
the CRC recomputed. The broker encodes column-wise instead
(``server.kafka.records.encode_fetch``); this is what that encoder is timed
against (``bench_kafka_codec``) and the reference its bytes are checked on
(``tests/server/kafka/test_fetch_records.py``). Not used by the product.
"""

from __future__ import annotations

import itertools
import struct

import numpy as np
import pyarrow as pa
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from crc32c import crc32c

from lakelog.records import LOG_APPEND_TIME

_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
_TIMESTAMP_TYPE_BIT = 0x08


def encode_fetch_per_record(rows: pa.Table) -> bytes:
    if rows.num_rows == 0:
        return b""
    types = rows.column("timestamp_type").to_numpy()
    changes = np.flatnonzero(np.diff(types)) + 1
    bounds = [0, *changes.tolist(), rows.num_rows]
    return b"".join(
        _encode_run(rows.slice(start, end - start), int(types[start]) == LOG_APPEND_TIME)
        for start, end in itertools.pairwise(bounds)
    )


def _encode_run(rows: pa.Table, log_append_time: bool) -> bytes:
    offsets = rows.column("offset").to_numpy()
    base = int(offsets[0])
    deltas = (offsets - base).tolist()
    timestamps = rows.column("timestamp").cast(pa.int64()).to_numpy().tolist()
    keys = rows.column("key").to_pylist()
    values = rows.column("value").to_pylist()
    headers = [
        [(h["key"], h["value"]) for h in row] if row else []
        for row in rows.column("headers").to_pylist()
    ]
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
    for delta, ts, key, value, record_headers in zip(
        deltas, timestamps, keys, values, headers, strict=True
    ):
        builder.append(delta, ts, key, value, record_headers)
    frame = builder.build()
    struct.pack_into(">q", frame, 0, base)
    struct.pack_into(">i", frame, 23, deltas[-1])
    if log_append_time:
        attributes = _ATTRIBUTES.unpack_from(frame, 21)[0] | _TIMESTAMP_TYPE_BIT
        _ATTRIBUTES.pack_into(frame, 21, attributes)
    _CRC.pack_into(frame, 17, crc32c(memoryview(frame)[21:]))
    return bytes(frame)
