"""RecordBatch v2, the records of Kafka's Produce and Fetch, to and from lakelog rows.

Pure: bytes in, Arrow out and back. The per-record work is aiokafka's
compiled codec (docs/architecture.md, "Kafka protocol codecs"); this module
checks what Kafka's broker checks before it appends a batch and lays the
Arrow columns out without per-record Python objects where it can.

Layout of a batch header (Kafka's message format v2), the offsets used below::

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32
    16 magic int8 | 17 crc uint32 (crc32c of bytes 21..end) | 21 attributes int16
    23 lastOffsetDelta int32 | 27 baseTimestamp int64 | 35 maxTimestamp int64
    43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32
    57 recordCount int32 | 61 records
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.record._crecords.default_records import (
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)
from crc32c import crc32c

from lakelog.errors import CorruptRecordError, InvalidRecordError
from lakelog.produce_batch import ProduceBatch
from lakelog.records import HEADER_TYPE, HEADERS_TYPE, LOG_APPEND_TIME

HEADER_SIZE = 61
MAGIC = 2
_LENGTH = struct.Struct(">qi")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
_TIMESTAMP_TYPE_BIT = 0x08
_CONTROL_BIT = 0x20
_TRANSACTIONAL_BIT = 0x10
NO_PRODUCER = -1


@dataclass(frozen=True)
class ProducedBatch:
    """One partition's produce batch, decoded: the rows and the producer fields."""

    rows: ProduceBatch
    producer_id: int | None
    producer_epoch: int
    base_sequence: int | None

    @property
    def num_records(self) -> int:
        return int(self.rows.table.num_rows)


def decode_produce(data: bytes, partition: int) -> ProducedBatch:
    """The one RecordBatch of a partition's produce data, checked as Kafka's broker does.

    Raises ``CorruptRecordError`` (CORRUPT_MESSAGE) for bytes that are not a
    well-formed batch (sizes, magic, CRC, records) and ``InvalidRecordError``
    (INVALID_RECORD) for a well-formed batch lakelog does not take.
    """
    if len(data) < HEADER_SIZE:
        raise CorruptRecordError(
            f"partition {partition}: {len(data)} bytes is shorter than a record batch header"
        )
    _, length = _LENGTH.unpack_from(data)
    if length < HEADER_SIZE - 12 or length + 12 > len(data):
        raise CorruptRecordError(
            f"partition {partition}: batch length {length} does not fit the {len(data)} bytes "
            "of produce data"
        )
    if length + 12 < len(data):
        raise InvalidRecordError(
            f"partition {partition}: the produce data holds more than one record batch "
            f"({len(data)} bytes, the first is {length + 12}); Kafka takes exactly one"
        )
    if data[16] != MAGIC:
        raise CorruptRecordError(
            f"partition {partition}: record batch magic {data[16]}, only v2 is supported"
        )
    batch = DefaultRecordBatch(data)
    if not batch.validate_crc():
        raise CorruptRecordError(f"partition {partition}: record batch CRC mismatch")
    if batch.is_control_batch:
        raise InvalidRecordError(f"partition {partition}: producers may not send control batches")
    if batch.is_transactional:
        raise InvalidRecordError(
            f"partition {partition}: transactional batches are not supported (no transactions)"
        )
    count = struct.unpack_from(">i", data, 57)[0]
    timestamps: list[int | None] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    header_keys: list[str] = []
    header_values: list[bytes | None] = []
    header_offsets = [0]
    try:
        for record in batch:
            ts = record.timestamp
            timestamps.append(ts if ts >= 0 else None)
            keys.append(record.key)
            values.append(record.value)
            headers = record.headers
            if headers:
                for key, value in headers:
                    header_keys.append(key)
                    header_values.append(value)
            header_offsets.append(len(header_keys))
    except (CorruptRecordException, UnsupportedCodecError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"partition {partition}: unreadable records: {exc}") from exc
    except (ValueError, IndexError, struct.error) as exc:
        raise CorruptRecordError(f"partition {partition}: unreadable records: {exc}") from exc
    if len(keys) != count or count == 0:
        raise CorruptRecordError(
            f"partition {partition}: the batch header says {count} records, it holds {len(keys)}"
        )
    headers_array = pa.ListArray.from_arrays(
        pa.array(header_offsets, pa.int32()),
        pa.StructArray.from_arrays(
            [pa.array(header_keys, pa.string()), pa.array(header_values, pa.binary())],
            fields=list(HEADER_TYPE),
        ),
        type=HEADERS_TYPE,
    )
    rows = ProduceBatch.from_columns(
        partition=pa.array(np.full(count, partition, np.int32)),
        timestamp=timestamps,
        key=pa.array(keys, pa.binary()),
        value=pa.array(values, pa.binary()),
        headers=headers_array,
    )
    producer = batch.producer_id
    return ProducedBatch(
        rows,
        producer if producer >= 0 else None,
        batch.producer_epoch,
        batch.base_sequence if producer >= 0 else None,
    )


def encode_fetch(rows: pa.Table) -> bytes:
    """Segment rows (offset order, one partition) as RecordBatch v2 bytes, uncompressed.

    One batch per timestamp type run, so LogAppendTime rows carry the batch
    attribute Kafka consumers read it from. Offsets may have gaps (compacted
    topics); each record keeps its own.
    """
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
    headers = _header_lists(rows.column("headers"))
    builder = DefaultRecordBatchBuilder(MAGIC, 0, 0, NO_PRODUCER, -1, -1, 2**31 - 1)
    for delta, ts, key, value, record_headers in zip(
        deltas, timestamps, keys, values, headers, strict=True
    ):
        builder.append(delta, ts, key, value, record_headers)
    frame = builder.build()
    struct.pack_into(">q", frame, 0, base)
    # The last record's delta, not count - 1: compaction leaves gaps.
    struct.pack_into(">i", frame, 23, deltas[-1])
    if log_append_time:
        attributes = _ATTRIBUTES.unpack_from(frame, 21)[0] | _TIMESTAMP_TYPE_BIT
        _ATTRIBUTES.pack_into(frame, 21, attributes)
    _CRC.pack_into(frame, 17, crc32c(memoryview(frame)[21:]))
    return bytes(frame)


def _header_lists(column: pa.ChunkedArray) -> list[list[tuple[str, bytes | None]]]:
    """Each row's headers as (key, value) pairs; the common no-header case costs no objects."""
    n = len(column)
    combined = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if combined.null_count == n or len(combined.flatten()) == 0:
        return [[] for _ in range(n)]
    out: list[list[tuple[str, bytes | None]]] = []
    for row in combined.to_pylist():
        out.append([(h["key"], h["value"]) for h in row] if row else [])
    return out
