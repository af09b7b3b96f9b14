"""Turning produce input into a validated batch, ready to commit (pure logic, no I/O).

Validation happens per request, before anything is written, so one bad
request can neither leave partial data behind nor fail the other requests a
broker batches into the same commit. Idempotent producers follow Kafka's
model: every record of producer ``pid`` carries a sequence number, a request
holds the consecutive range ``base_sequence .. base_sequence + n - 1``, and
the highest sequence committed per producer is a Delta app transaction, so a
retried request is recognised whichever broker it reaches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import (
    InvalidRecordError,
    InvalidRequestError,
    InvalidTimestampError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
)
from lakelog.internal_topics import InternalWriter, check_append
from lakelog.partitioner import Partitioner, partition_for_key
from lakelog.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    PRODUCE_SCHEMA,
    TIMESTAMP_TYPE,
    Record,
    records_to_table,
)
from lakelog.topic_config import TopicConfig

PRODUCER_TXN_PREFIX = "lakelog.producer."
MAX_SEQUENCE = 2**31 - 1
MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def producer_txn(producer_id: int) -> str:
    return f"{PRODUCER_TXN_PREFIX}{producer_id}"


@dataclass(frozen=True)
class PreparedBatch:
    """One request's records: validated, partitioned and timestamped.

    ``table`` has the produce columns plus ``timestamp_type``; offsets are
    the only thing left to assign, at commit time. ``writer`` is set only on
    the batches of an internal topic's owner (``lakelog.internal_topics``).
    """

    table: pa.Table
    producer_id: int | None = None
    base_sequence: int | None = None
    writer: InternalWriter | None = field(default=None, repr=False, compare=False)

    @property
    def num_records(self) -> int:
        return int(self.table.num_rows)

    @property
    def last_sequence(self) -> int | None:
        if self.base_sequence is None:
            return None
        return self.base_sequence + self.num_records - 1

    @property
    def size_bytes(self) -> int:
        return int(self.table.nbytes)


def prepare_batch(
    records: Sequence[Record] | pa.Table,
    *,
    topic: str,
    num_partitions: int,
    config: TopicConfig,
    keyless: Partitioner,
    now_ms: int,
    producer_id: int | None = None,
    base_sequence: int | None = None,
    writer: InternalWriter | None = None,
) -> PreparedBatch:
    """Validate and complete one request's records, or raise the error that names the problem.

    An internal topic is refused first, as Kafka does, unless ``writer`` is its owner's.
    """
    check_append(topic, writer)
    table = records if isinstance(records, pa.Table) else records_to_table(records)
    if table.num_rows == 0:
        raise InvalidRequestError("a produce request needs at least one record")
    _check_producer(producer_id, base_sequence, table.num_rows)
    table = conform(table)
    table = assign_partitions(table, num_partitions, keyless)
    validate(table, topic, num_partitions, config)
    timestamps, ts_type = stamp(table, config, now_ms)
    table = table.set_column(
        table.schema.get_field_index("timestamp"), "timestamp", timestamps
    ).append_column("timestamp_type", pa.array(np.full(table.num_rows, ts_type, np.int32)))
    if producer_id is not None and base_sequence is not None:
        n = table.num_rows
        table = table.set_column(
            table.schema.get_field_index("producer_id"),
            "producer_id",
            pa.array(np.full(n, producer_id, np.int64)),
        ).set_column(
            table.schema.get_field_index("sequence"),
            "sequence",
            pa.array(np.arange(base_sequence, base_sequence + n, dtype=np.int32)),
        )
    return PreparedBatch(table, producer_id, base_sequence, writer)


def _check_producer(producer_id: int | None, base_sequence: int | None, n: int) -> None:
    if (producer_id is None) != (base_sequence is None):
        raise InvalidRequestError("producer_id and sequence must be given together")
    if producer_id is None or base_sequence is None:
        return
    if not 0 <= producer_id < 2**63:
        raise InvalidRequestError(f"producer_id {producer_id} must be a non-negative 64-bit int")
    if base_sequence < 0 or base_sequence + n - 1 > MAX_SEQUENCE:
        raise InvalidRequestError(
            f"sequence {base_sequence} (+{n} records) is outside 0..{MAX_SEQUENCE}; "
            "start a new producer id instead of wrapping"
        )


def conform(table: pa.Table) -> pa.Table:
    """Fill optional produce columns and cast to the produce schema, or say what is wrong."""
    unknown = set(table.column_names) - set(PRODUCE_SCHEMA.names)
    if unknown:
        raise InvalidRecordError(f"unknown record columns: {', '.join(sorted(unknown))}")
    n = len(table)
    columns = []
    try:
        # Arrow from outside (an IPC body, a caller's table) may be malformed: check it
        # in full here (~40 us per 10,000 rows), since nothing below would.
        table.validate(full=True)
        if table.schema.equals(PRODUCE_SCHEMA):
            return table  # built for this schema (the broker's JSON path): nothing to cast
        for f in PRODUCE_SCHEMA:  # cast only what differs: a cast copies every value
            if f.name not in table.column_names:
                columns.append(pa.chunked_array([pa.nulls(n, f.type)]))
                continue
            column = table.column(f.name)
            columns.append(column if column.type == f.type else column.cast(f.type))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise InvalidRecordError(f"records do not match the record schema: {exc}") from exc
    return pa.Table.from_arrays(columns, schema=PRODUCE_SCHEMA)


def assign_partitions(table: pa.Table, num_partitions: int, keyless: Partitioner) -> pa.Table:
    """Kafka's choice: explicit partition, else murmur2 of the key, else the sticky partition."""
    partitions = table.column("partition")
    if partitions.null_count == 0:
        return table
    keys = table.column("key").to_pylist()
    given = partitions.to_pylist()
    sticky = keyless.partition(num_partitions)
    chosen = [
        g if g is not None else (partition_for_key(k, num_partitions) if k is not None else sticky)
        for g, k in zip(given, keys, strict=True)
    ]
    keyless.on_new_batch()
    return table.set_column(0, "partition", pa.array(chosen, pa.int32()))


def record_sizes(table: pa.Table) -> np.ndarray:
    """Per record: key + value + header bytes (what max.message.bytes limits)."""
    sizes = binary_lengths(table.column("key")) + binary_lengths(table.column("value"))
    headers = table.column("headers")
    if headers.null_count < table.num_rows and any(_list_values(c) for c in headers.chunks):
        flat = pc.list_flatten(headers)
        header_bytes = pc.add(
            pc.fill_null(pc.binary_length(pc.struct_field(flat, "key")), 0),
            pc.fill_null(pc.binary_length(pc.struct_field(flat, "value")), 0),
        ).to_numpy()
        parents = pc.list_parent_indices(headers).to_numpy()
        sizes = sizes + np.bincount(parents, weights=header_bytes, minlength=table.num_rows).astype(
            np.int64
        )
    return sizes


def binary_lengths(column: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """Byte length of every binary value (0 for null), read off the offsets buffers.

    No compute kernel: on a busy broker each kernel call gives up the GIL and
    then waits to get it back, which cost far more than the arithmetic.
    """
    pieces = [np.zeros(0, np.int64)]
    for chunk in column.chunks:
        n, start = len(chunk), chunk.offset
        if chunk.null_count == n:
            pieces.append(np.zeros(n, np.int64))
            continue
        validity, offsets = chunk.buffers()[:2]
        ends = np.frombuffer(offsets, dtype=np.int32, count=n + 1, offset=start * 4)
        lengths = np.diff(ends).astype(np.int64)
        if chunk.null_count:
            bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
            lengths[bits[start : start + n] == 0] = 0
        pieces.append(lengths)
    return np.concatenate(pieces)


def _list_values(chunk: pa.ListArray) -> int:
    """How many elements the lists of ``chunk`` hold in all (nulls and empty lists: none)."""
    ends = np.frombuffer(
        chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1, offset=chunk.offset * 4
    )
    return int(ends[-1] - ends[0])


def validate(table: pa.Table, topic: str, num_partitions: int, config: TopicConfig) -> None:
    partitions = table.column("partition")
    chosen = partitions.to_numpy()
    lo, hi = int(chosen.min()), int(chosen.max())
    if lo < 0 or hi >= num_partitions:
        bad = lo if lo < 0 else hi
        index = _first_index(partitions, bad)
        raise UnknownTopicOrPartitionError(
            f"record {index}: partition {bad} does not exist in topic {topic!r} "
            f"(it has {num_partitions} partitions)",
            record_index=index,
        )
    sizes = record_sizes(table)
    limit = config.max_message_bytes
    if len(sizes) and int(sizes.max()) > limit:
        index = int(sizes.argmax())
        raise MessageTooLargeError(
            f"record {index} is {int(sizes[index])} bytes, more than max.message.bytes={limit} "
            f"of topic {topic!r}",
            record_index=index,
        )
    keys = table.column("key")
    if config.compacted and keys.null_count:
        index = int(pc.index(pc.is_null(keys), True).as_py())
        raise InvalidRecordError(
            f"record {index}: topic {topic!r} is compacted "
            f"(cleanup.policy={config.get('cleanup.policy')}) "
            "and cannot accept a record without a key",
            record_index=index,
        )
    ts = table.column("timestamp")
    if ts.null_count < table.num_rows:
        millis = ts.cast(pa.int64())
        earliest, latest = (v.as_py() for v in pc.min_max(millis).values())
        if earliest is not None and earliest < 0:
            index = _first_index(millis, earliest)
            raise InvalidTimestampError(
                f"record {index}: timestamp {earliest} is negative", record_index=index
            )
        if latest is not None and latest > MAX_TIMESTAMP_MS:
            index = _first_index(millis, latest)
            raise InvalidTimestampError(
                f"record {index}: timestamp {latest} is after 9999-12-31, "
                "the largest Delta timestamp",
                record_index=index,
            )


def _first_index(column: pa.ChunkedArray, value: int) -> int:
    """Where the offending value first occurs, so the error names the record at fault."""
    return int(pc.index(column, pa.scalar(value, column.type)).as_py())


def stamp(table: pa.Table, config: TopicConfig, now_ms: int) -> tuple[pa.ChunkedArray, int]:
    """Timestamps as the topic's message.timestamp.type says, and that type's code."""
    if config.log_append_time:
        now = pa.array(np.full(table.num_rows, now_ms, np.int64)).cast(TIMESTAMP_TYPE)
        return pa.chunked_array([now]), LOG_APPEND_TIME
    given = table.column("timestamp")
    if given.null_count == table.num_rows:  # the usual request: the broker stamps them all
        millis = np.full(table.num_rows, now_ms, np.int64)
        stamped = pa.Array.from_buffers(TIMESTAMP_TYPE, len(millis), [None, pa.py_buffer(millis)])
        return pa.chunked_array([stamped]), CREATE_TIME
    now_scalar = pa.scalar(now_ms, TIMESTAMP_TYPE)
    return pc.fill_null(given, now_scalar), CREATE_TIME


@dataclass(frozen=True)
class SequenceCheck:
    """Which batches repeat sequences already written, and which skip ahead."""

    duplicates: list[int]
    out_of_order: list[tuple[int, int]]  # (batch index, expected base sequence)

    def __bool__(self) -> bool:
        return bool(self.duplicates or self.out_of_order)


def check_sequences(
    batches: Sequence[PreparedBatch], last_sequence: Callable[[int], int | None]
) -> SequenceCheck:
    """Kafka's idempotence rules, applied in batch order on top of the committed state.

    A batch whose sequences were all written (by an earlier commit or an
    earlier batch of this commit) is a duplicate; one that starts after a gap
    is out of order. A producer unknown to the table may start anywhere.
    """
    last: dict[int, int | None] = {}
    duplicates: list[int] = []
    out_of_order: list[tuple[int, int]] = []
    for i, batch in enumerate(batches):
        pid, base = batch.producer_id, batch.base_sequence
        if pid is None or base is None:
            continue
        if pid not in last:
            last[pid] = last_sequence(pid)
        seen = last[pid]
        if seen is not None and base <= seen:
            duplicates.append(i)
        elif seen is not None and base != seen + 1:
            out_of_order.append((i, seen + 1))
        else:
            last[pid] = batch.last_sequence
    return SequenceCheck(duplicates, out_of_order)
