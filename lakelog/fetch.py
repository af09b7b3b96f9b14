"""Reading one partition of a topic from an offset, and the fetch size rule.

The rule (Kafka's fetch.max.bytes): stop before the record whose key and value
bytes would pass ``max_bytes``, but return at least one record, so a consumer
moves on. ``rows_within`` is its one place: storage reads and the broker's
recent-batch cache both apply it, so they never answer differently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakelog.column_buffers import binary_lengths
from lakelog.errors import InvalidRequestError, OffsetOutOfRangeError
from lakelog.records import SEGMENT_SCHEMA, ConsumerRecord, table_to_records
from lakelog.segments import SegmentReader
from lakelog.topic_table import TopicTable, log_start_of, partition_txn


@dataclass(frozen=True)
class FetchResult:
    """Records of one partition from an offset, with the partition's bounds at read time."""

    partition: int
    records: pa.Table
    high_watermark: int
    log_start_offset: int
    next_offset: int

    @classmethod
    def nothing(
        cls, partition: int, high_watermark: int, log_start_offset: int, next_offset: int
    ) -> FetchResult:
        """A fetch that returns no records: only the partition's bounds and where to go on."""
        return cls(
            partition, SEGMENT_SCHEMA.empty_table(), high_watermark, log_start_offset, next_offset
        )

    def to_records(self, topic: str) -> list[ConsumerRecord]:
        return table_to_records(topic, self.partition, self.records)


def fetch_sizes(rows: pa.Table) -> npt.NDArray[np.int64]:
    """Each row's size as a fetch's byte limit counts it: key and value bytes (null = 0)."""
    return binary_lengths(rows.column("key")) + binary_lengths(rows.column("value"))


def rows_within(rows: pa.Table, max_bytes: int, *, at_least_one: bool = True) -> tuple[int, int]:
    """How many leading rows fit in ``max_bytes`` of keys and values, and their bytes
    (with ``at_least_one``, the start of a fetch, the first row always fits)."""
    if rows.num_rows == 0:
        return 0, 0
    cumulative = np.cumsum(fetch_sizes(rows))
    fits = int(np.searchsorted(cumulative, max_bytes, side="right"))
    if fits == 0 and at_least_one:
        fits = 1
    return fits, int(cumulative[fits - 1]) if fits else 0


def limit_bytes(rows: pa.Table, max_bytes: int) -> pa.Table:
    """The leading rows a fetch of ``max_bytes`` returns, as segment rows."""
    fits, _ = rows_within(rows, max_bytes)
    return rows.slice(0, fits).select(SEGMENT_SCHEMA.names)


def read(
    table: TopicTable,
    reader: SegmentReader,
    partition: int,
    offset: int,
    max_records: int = 500,
    max_bytes: int = 1024 * 1024,
) -> FetchResult:
    """Records from ``offset`` on; the first record is returned even if over ``max_bytes``.

    An offset removed by compaction yields the next record present, as in Kafka; out
    of the log is OFFSET_OUT_OF_RANGE. A segment vacuumed meanwhile refreshes and retries.
    """
    table.check_partition(partition)
    if max_records <= 0 or max_bytes <= 0:
        raise InvalidRequestError("max_records and max_bytes must be positive")
    for attempt in range(3):
        with table.state_lock:
            hwm = table.state.txn_version(partition_txn(partition))
            index = table.index.partition(partition)
            start = log_start_of(table.state, index, partition)
            segments = index.segments_from(offset)
        if offset < start or offset > hwm:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {table.name}-{partition}: "
                f"valid offsets are {start}..{hwm}",
                log_start_offset=start,
                high_watermark=hwm,
            )
        pieces: list[pa.Table] = []
        remaining_records, remaining_bytes = max_records, max_bytes
        next_offset = offset
        try:
            for segment in segments:
                if segment.base_offset >= hwm:
                    break
                rows = reader.read(segment, max(offset, segment.base_offset), remaining_records)
                if rows.num_rows:
                    fits, size = rows_within(rows, remaining_bytes, at_least_one=not pieces)
                    if fits < rows.num_rows:
                        rows = rows.slice(0, fits)
                        remaining_records = 0
                    if rows.num_rows:
                        pieces.append(rows)
                        remaining_records -= rows.num_rows
                        remaining_bytes -= size
                        next_offset = int(rows.column("offset")[-1].as_py()) + 1
                    if remaining_records <= 0 or remaining_bytes <= 0:
                        break
                else:
                    next_offset = max(next_offset, segment.end_offset)
        except FileNotFoundError:
            if attempt == 2:
                raise
            table.refresh()
            continue
        records = pa.concat_tables(pieces) if pieces else SEGMENT_SCHEMA.empty_table()
        return FetchResult(
            partition, records, hwm, start, min(next_offset, hwm) if segments else hwm
        )
    raise AssertionError("unreachable")


def offset_of_max_timestamp(
    table: TopicTable, reader: SegmentReader, partition: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the record with the largest timestamp, the first of equals
    (Kafka's ListOffsets MAX_TIMESTAMP, KIP-734); None for an empty partition.

    Only segments whose statistics may hold it are read, and only two columns.
    """
    table.check_partition(partition)
    with table.state_lock:
        segments = table.index.partition(partition).segments
    best: tuple[int, int] | None = None
    for segment in sorted(segments, key=lambda s: (-s.max_timestamp_ms, s.base_offset)):
        if best is not None and segment.max_timestamp_ms < best[1]:
            break
        rows = reader.read(segment, segment.base_offset, 2**62, columns=("offset", "timestamp"))
        if not rows.num_rows:
            continue
        millis = rows.column("timestamp").cast(pa.int64()).to_numpy()
        i = int(np.argmax(millis))  # the first of the largest
        found = (int(rows.column("offset")[i].as_py()), int(millis[i]))
        if best is None or found[1] > best[1] or (found[1] == best[1] and found[0] < best[0]):
            best = found
    return best


def offset_for_timestamp(
    table: TopicTable, reader: SegmentReader, partition: int, timestamp_ms: int
) -> tuple[int, int] | None:
    """First (offset, timestamp) with timestamp >= ``timestamp_ms`` (Kafka's ListOffsets)."""
    table.check_partition(partition)
    with table.state_lock:
        segments = table.index.partition(partition).segments_for_timestamp(timestamp_ms)
    for segment in segments:
        # 0: no count in the stats, or no rows: read it all.
        limit = segment.num_records + 1 if segment.num_records else 2**62
        rows = reader.read(segment, segment.base_offset, limit)
        millis = rows.column("timestamp").cast(pa.int64()).to_numpy()
        hits = np.flatnonzero(millis >= timestamp_ms)
        if len(hits):
            i = int(hits[0])
            return int(rows.column("offset")[i].as_py()), int(millis[i])
    return None
