"""Turning produce input into a validated batch, ready to commit (pure logic, no I/O).

Validated per request, before anything is written, so one bad request neither
leaves partial data nor fails the others batched into its commit. An idempotent
producer's highest committed sequence per stream (per topic, or per partition in
Kafka's protocol) is a Delta app transaction, so a retry is recognised whichever
broker it reaches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import InvalidRequestError, SchemaValidationError
from lakelog.internal_topics import InternalWriter, check_append
from lakelog.partitioner import Partitioner, partitions_for_keys
from lakelog.produce_batch import ProduceBatch, ProduceInput
from lakelog.records import CREATE_TIME, LOG_APPEND_TIME, TIMESTAMP_TYPE, timestamps_from_ms
from lakelog.topic_config import TopicConfig

PRODUCER_TXN_PREFIX = "lakelog.producer."
#: At most this many refused records are listed in one error.
MAX_RECORD_ERRORS = 100


class RecordCheck(Protocol):
    """Checks records against rules kept outside the core (the Schema Registry's, for
    topics with ``confluent.*.schema.validation``): ``(index, reason)`` per refused
    record, in order. Set by what runs the log (a broker), as the core imports nothing
    of ``server/``; a caller that checked the records already passes its findings."""

    def __call__(
        self, topic: str, config: TopicConfig, keys: pa.ChunkedArray, values: pa.ChunkedArray, /
    ) -> Sequence[tuple[int, str]]: ...


MAX_SEQUENCE = 2**31 - 1


def producer_txn(producer_id: int, partition: int | None = None) -> str:
    """The app transaction id holding the last sequence of one producer's stream."""
    if partition is None:
        return f"{PRODUCER_TXN_PREFIX}{producer_id}"
    return f"{PRODUCER_TXN_PREFIX}{producer_id}.p{partition}"


def partition_sequences(txns: Mapping[str, int], partition: int) -> dict[int, int]:
    """The last sequence of each producer numbering its batches per ``partition`` (Kafka's
    protocol), by producer id, from the app transactions ``producer_txn`` names."""
    suffix = f".p{partition}"
    found = {}
    for app_id, version in txns.items():
        if app_id.startswith(PRODUCER_TXN_PREFIX) and app_id.endswith(suffix):
            producer = app_id[len(PRODUCER_TXN_PREFIX) : -len(suffix)]
            if producer.isascii() and producer.isdecimal():
                found[int(producer)] = version
    return found


@dataclass(frozen=True)
class PreparedBatch:
    """One request's records: validated, partitioned and timestamped; only offsets are left.

    ``writer``: an internal topic's owner's batch; ``sequence_partition``: numbered
    per partition (Kafka's protocol), all rows in that partition.
    """

    table: pa.Table
    producer_id: int | None = None
    base_sequence: int | None = None
    writer: InternalWriter | None = field(default=None, repr=False, compare=False)
    sequence_partition: int | None = None

    @property
    def sequence_txn(self) -> str | None:
        """The app transaction of this batch's sequence stream (None: not idempotent)."""
        if self.producer_id is None or self.base_sequence is None:
            return None
        return producer_txn(self.producer_id, self.sequence_partition)

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
    records: ProduceInput,
    *,
    topic: str,
    num_partitions: int,
    config: TopicConfig,
    keyless: Partitioner,
    now_ms: int,
    producer_id: int | None = None,
    base_sequence: int | None = None,
    writer: InternalWriter | None = None,
    sequence_partition: int | None = None,
    record_check: RecordCheck | None = None,
) -> PreparedBatch:
    """Validate and complete one request's records, or raise the error that names the problem.

    An internal topic is refused first, as Kafka does, unless ``writer`` is its owner's.
    With ``sequence_partition`` every record must be in that partition. A topic that
    validates schemas needs ``record_check``.
    """
    check_append(topic, writer)
    if len(records) == 0:
        raise InvalidRequestError("a produce request needs at least one record")
    _check_producer(producer_id, base_sequence, len(records))
    batch = assign_partitions(ProduceBatch.of(records), num_partitions, keyless)
    batch.check(topic, num_partitions, config)
    if config.validates_schemas:
        check_schemas(topic, config, batch, record_check)
    table = batch.table
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
    # Assigned partitions have no nulls: the values buffer is the column.
    if (
        sequence_partition is not None
        and (table.column("partition").to_numpy() != sequence_partition).any()
    ):
        raise InvalidRequestError(
            f"records numbered for partition {sequence_partition} name another partition"
        )
    return PreparedBatch(table, producer_id, base_sequence, writer, sequence_partition)


def check_schemas(
    topic: str, config: TopicConfig, batch: ProduceBatch, record_check: RecordCheck | None
) -> None:
    """INVALID_RECORD naming every refused record (Kafka's record-level errors); a batch
    with one refused record is refused whole."""
    if record_check is None:
        raise SchemaValidationError(
            f"topic {topic!r} validates schemas on produce (confluent.*.schema.validation); "
            "only a broker, which serves the Schema Registry, can append to it"
        )
    problems = record_check(topic, config, batch.column("key"), batch.column("value"))
    if not problems:
        return
    first, reason = problems[0]
    more = f" ({len(problems) - 1} more refused)" if len(problems) > 1 else ""
    raise SchemaValidationError(
        f"record {first}: {reason}{more}",
        [(int(i), str(why)) for i, why in problems],
        record_index=first,
        record_errors=[
            {"batch_index": i, "message": why} for i, why in problems[:MAX_RECORD_ERRORS]
        ],
    )


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


def assign_partitions(
    batch: ProduceBatch, num_partitions: int, keyless: Partitioner
) -> ProduceBatch:
    """Kafka's choice: explicit partition, else murmur2 of the key, else the sticky partition,
    column-wise for the whole batch."""
    partitions = batch.column("partition")
    if partitions.null_count == 0:
        return batch
    sticky = keyless.partition(num_partitions)
    keyless.on_new_batch()
    keys = batch.column("key")
    if keys.null_count == len(keys):
        hashed = np.full(len(keys), sticky, np.int32)
    else:
        hashed = partitions_for_keys(keys.combine_chunks(), num_partitions)
        if keys.null_count:
            hashed[hashed < 0] = sticky
    if partitions.null_count == len(partitions):
        chosen = hashed
    else:
        given = partitions.combine_chunks()
        chosen = given.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32)
        missing = ~given.is_valid().to_numpy(zero_copy_only=False)
        chosen[missing] = hashed[missing]
    return batch.with_column("partition", pa.array(chosen, pa.int32()))


def stamp(table: pa.Table, config: TopicConfig, now_ms: int) -> tuple[pa.ChunkedArray, int]:
    """Timestamps as the topic's message.timestamp.type says, and that type's code."""
    if config.log_append_time:
        now = pa.array(np.full(table.num_rows, now_ms, np.int64)).cast(TIMESTAMP_TYPE)
        return pa.chunked_array([now]), LOG_APPEND_TIME
    given = table.column("timestamp")
    if given.null_count == table.num_rows:  # the usual request: the broker stamps them all
        stamped = timestamps_from_ms(np.full(table.num_rows, now_ms, np.int64))
        return pa.chunked_array([stamped]), CREATE_TIME
    if given.null_count == 0:  # a Kafka producer's batch: every record stamped by the client
        return given, CREATE_TIME
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
    batches: Sequence[PreparedBatch], last_sequence: Callable[[str], int | None]
) -> SequenceCheck:
    """Kafka's idempotence rules, applied in batch order on top of the committed state.

    ``last_sequence``: a stream's committed last sequence. A batch already written (or
    earlier in this commit) is a duplicate, one after a gap out of order; an unknown
    stream may start anywhere.
    """
    last: dict[str, int | None] = {}
    duplicates: list[int] = []
    out_of_order: list[tuple[int, int]] = []
    for i, batch in enumerate(batches):
        stream, base = batch.sequence_txn, batch.base_sequence
        if stream is None or base is None:
            continue
        if stream not in last:
            last[stream] = last_sequence(stream)
        seen = last[stream]
        if seen is not None and base <= seen:
            duplicates.append(i)
        elif seen is not None and base != seen + 1:
            out_of_order.append((i, seen + 1))
        else:
            last[stream] = batch.last_sequence
    return SequenceCheck(duplicates, out_of_order)
