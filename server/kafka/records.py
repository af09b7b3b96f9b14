"""RecordBatch v2, the records of Kafka's Produce and Fetch, to and from lakelog rows.

Pure. Produce batches are read with aiokafka's compiled codec, after Kafka's
broker checks; Fetch batches are written column-wise from the segment rows, no
Python object per record (docs/architecture.md, "Kafka protocol codecs").

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
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.record.default_records import DefaultRecordBatch
from crc32c import crc32c

from lakelog.errors import CorruptRecordError, InvalidRecordError
from lakelog.produce_batch import ProduceBatch
from lakelog.records import (
    HEADER_TYPE,
    HEADERS_TYPE,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE,
    empty_headers,
    timestamps_from_ms,
)
from server.kafka.varints import Varints, binary_columns

HEADER_SIZE = 61
MAGIC = 2
_LENGTH = struct.Struct(">qi")
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_TIMESTAMP_TYPE_BIT = 0x08
NO_PRODUCER = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
_NOTHING = pa.scalar(b"", pa.binary())
_SKIP_NULLS = pc.JoinOptions(null_handling="skip")
#: What aiokafka's record reader raises for malformed records.
_UNREADABLE = (CorruptRecordException, UnsupportedCodecError, ValueError, IndexError, struct.error)


@dataclass(frozen=True)
class ProducedBatch:
    """One partition's produce batch, decoded: the rows and the producer fields."""

    rows: ProduceBatch
    producer_id: int | None
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
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers_of = _Headers()
    try:
        for record in batch:
            timestamps.append(record.timestamp)
            keys.append(record.key)
            values.append(record.value)
            headers = record.headers
            if headers:
                headers_of.rows.append(len(keys) - 1)
                headers_of.counts.append(len(headers))
                for name, value in headers:
                    headers_of.names.append(name)
                    headers_of.values.append(value)
    except _UNREADABLE as exc:
        raise CorruptRecordError(f"partition {partition}: unreadable records: {exc}") from exc
    if len(keys) != count or count == 0:
        raise CorruptRecordError(
            f"partition {partition}: the batch header says {count} records, it holds {len(keys)}"
        )
    rows = ProduceBatch.from_columns(
        partition=pa.array(np.full(count, partition, np.int32)),
        timestamp=_timestamps(timestamps),
        key=None if keys.count(None) == count else pa.array(keys, pa.binary()),  # None: all null
        value=pa.array(values, pa.binary()),
        headers=headers_of.column(count),
    )
    producer = batch.producer_id
    return ProducedBatch(
        rows,
        producer if producer >= 0 else None,
        batch.base_sequence if producer >= 0 else None,
    )


def _timestamps(millis: list[int]) -> pa.Array:
    """Record timestamps in ms; a negative one is "none given" (null: the topic's rule
    stamps it). Without any, the numpy array's buffer becomes the column as it is."""
    stamps = np.array(millis, np.int64)
    if len(stamps) and stamps.min() >= 0:
        return timestamps_from_ms(stamps)
    return pa.array(stamps, TIMESTAMP_TYPE, mask=stamps < 0)


class _Headers:
    """The headers of a batch's records that have any, filled by the decoding loop directly.

    Kept flat (strings and bytes, which the garbage collector does not track),
    never the records' own header lists.
    """

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.counts: list[int] = []
        self.names: list[str] = []
        self.values: list[bytes | None] = []

    def column(self, count: int) -> pa.Array:
        """The headers column of ``count`` records (an empty list for those without)."""
        if not self.rows:
            return empty_headers(count)
        offsets = np.zeros(count + 1, np.int32)
        per_row = np.zeros(count, np.int32)
        per_row[self.rows] = self.counts
        np.cumsum(per_row, out=offsets[1:])
        return pa.ListArray.from_arrays(
            pa.array(offsets),
            pa.StructArray.from_arrays(
                [pa.array(self.names, pa.string()), pa.array(self.values, pa.binary())],
                fields=list(HEADER_TYPE),
            ),
            type=HEADERS_TYPE,
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
    pieces: list[bytes | pa.Buffer] = []
    for start, end in itertools.pairwise(bounds):
        pieces += _encode_run(rows.slice(start, end - start), int(types[start]) == LOG_APPEND_TIME)
    return b"".join(pieces)


def _encode_run(rows: pa.Table, log_append_time: bool) -> tuple[bytes, pa.Buffer]:
    """One batch: its 61-byte header and its records section, built column-wise.

    Each record is ``length attributes timestampDelta offsetDelta keyLength
    key valueLength value headerCount headers``, the integers as zigzag varints.
    """
    count = rows.num_rows
    offsets = _int64(rows.column("offset"))
    timestamps = _int64(rows.column("timestamp"))
    keys = _binary(rows.column("key"))
    values = _binary(rows.column("value"))
    header_counts, header_bytes = _encoded_headers(rows.column("headers"))
    offset_deltas = offsets - offsets[0]
    key_lengths = _lengths(keys)
    value_lengths = _lengths(values)
    attributes = Varints(np.zeros(count, np.int64))
    timestamp_delta = Varints(timestamps - timestamps[0])
    offset_delta = Varints(offset_deltas)
    key_length = Varints(key_lengths)
    value_length = Varints(value_lengths)
    header_count = Varints(header_counts)
    lengths = np.maximum(key_lengths, 0) + np.maximum(value_lengths, 0)
    fields = (attributes, timestamp_delta, offset_delta, key_length, value_length, header_count)
    for field in fields:
        lengths += field.sizes
    if header_bytes is not None:
        lengths += _lengths(header_bytes)
    head = [Varints(lengths), attributes, timestamp_delta, offset_delta, key_length]
    parts = [
        *binary_columns(head),
        keys,
        *binary_columns([value_length]),
        values,
        *binary_columns([header_count]),
    ]
    if header_bytes is not None:
        parts.append(header_bytes)
    records = _join(parts)
    _, record_offsets, data = records.buffers()
    ends = np.frombuffer(record_offsets, np.int32)
    first, last = int(ends[records.offset]), int(ends[records.offset + count])
    body = data.slice(first, last - first)
    header = bytearray(
        _BATCH_HEADER.pack(
            int(offsets[0]),
            HEADER_SIZE - 12 + body.size,
            NO_PARTITION_LEADER_EPOCH,
            MAGIC,
            0,  # the CRC, set below once the bytes it covers are known
            _TIMESTAMP_TYPE_BIT if log_append_time else 0,
            # The last record's delta, not count - 1: compaction leaves gaps.
            int(offset_deltas[-1]),
            int(timestamps[0]),
            int(timestamps.max()),
            NO_PRODUCER,
            NO_PRODUCER_EPOCH,
            NO_SEQUENCE,
            count,
        )
    )
    _CRC.pack_into(header, 17, crc32c(body, crc32c(memoryview(header)[21:])))
    return bytes(header), body


def _encoded_headers(
    column: pa.ChunkedArray,
) -> tuple[npt.NDArray[np.int64], pa.Array | None]:
    """Each row's header count, and its encoded headers (None when no row has any).

    A header is ``keyLength key valueLength value`` (a null value's length -1);
    all rows' headers are encoded flat, then joined per row.
    """
    headers = _combined(column)
    counts = np.maximum(_lengths(headers), 0)
    if not counts.any():
        return counts, None
    entries = headers.flatten()
    names = _binary(pc.struct_field(entries, "key"))
    values = _binary(pc.struct_field(entries, "value"))
    encoded = _join(
        [
            *binary_columns([Varints(_lengths(names))]),
            names,
            *binary_columns([Varints(_lengths(values))]),
            values,
        ]
    )
    list_offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    per_row = pa.ListArray.from_arrays(pa.array(list_offsets), encoded)
    return counts, pc.binary_join(per_row, b"")


def _combined(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _binary(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Binary (or string) data as one ``binary`` array, the type every joined part must share."""
    array = _combined(column) if isinstance(column, pa.ChunkedArray) else column
    return array if array.type == pa.binary() else array.cast(pa.binary())


def _int64(column: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """Integers or timestamps (their int64 storage: milliseconds) as one numpy array."""
    return np.asarray(_combined(column).view(pa.int64()).to_numpy(), np.int64)


def _join(parts: list[pa.Array | pa.Scalar]) -> pa.Array:
    """Row by row, the parts' bytes one after another; a null part adds nothing."""
    return pc.call_function("binary_join_element_wise", [*parts, _NOTHING], _SKIP_NULLS)


def _lengths(array: pa.Array) -> npt.NDArray[np.int64]:
    """Lengths of a binary or list array's values, -1 for null: Kafka's nullable length prefix."""
    validity, value_offsets = array.buffers()[:2]
    ends = np.frombuffer(value_offsets, np.int32)[array.offset : array.offset + len(array) + 1]
    lengths = np.diff(ends).astype(np.int64)
    if array.null_count:
        bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
        lengths[bits[array.offset : array.offset + len(array)] == 0] = -1
    return lengths
