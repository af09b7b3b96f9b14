"""Code that runs inside Spark tasks: read segments into Arrow, write groups as segments.

Tasks receive small picklable values (the storage root, a table path,
segment descriptors) and open storage themselves, so the same functions work
in local mode and on a cluster, against local disks, HDFS or S3, with no
Hadoop connector.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.errors import CorruptRecordError
from lakelog.records import HEADERS_TYPE, SEGMENT_SCHEMA, TIMESTAMP_TYPE
from lakelog.segments import SegmentReader, write_segment
from lakelog.storage import Storage

#: Records as they travel through Spark (timestamps as epoch ms to avoid time-zone games).
ROWS_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("group", pa.int32(), nullable=False),
        pa.field("group_base", pa.int64(), nullable=False),
        pa.field("group_last", pa.int64(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("ts_ms", pa.int64(), nullable=False),
        pa.field("timestamp_type", pa.int32(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS_TYPE),
        pa.field("producer_id", pa.int64()),
        pa.field("sequence", pa.int32()),
    ]
)
ROWS_DDL = (
    "partition int, group int, group_base long, group_last long, offset long, ts_ms long, "
    "timestamp_type int, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>, producer_id long, sequence int"
)

#: What a writing task reports back to the driver for every segment it wrote.
WRITTEN_DDL = (
    "partition int, group int, path string, size long, num_records long, "
    "min_ts long, max_ts long, base_offset long, last_offset long"
)


@dataclass(frozen=True)
class SegmentRef:
    """A segment to read, with the group (output segment) it belongs to."""

    partition: int
    group: int
    group_base: int
    group_last: int
    path: str
    base_offset: int
    last_offset: int


def read_segments(
    storage: Storage, table_path: str, refs: list[SegmentRef]
) -> Iterator[pa.RecordBatch]:
    """All rows of the given segments, tagged with partition and group."""
    reader = SegmentReader(storage, table_path)
    from lakelog.offset_index import Segment

    for ref in refs:
        segment = Segment(ref.base_offset, ref.last_offset, ref.path, ref.partition)
        try:
            rows = reader.read(segment, ref.base_offset, 2**62)
        except FileNotFoundError as exc:
            raise CorruptRecordError(
                f"segment {ref.path} of partition {ref.partition} is missing from storage"
            ) from exc
        n = rows.num_rows
        if n == 0:
            continue
        table = pa.table(
            {
                "partition": pa.array([ref.partition] * n, pa.int32()),
                "group": pa.array([ref.group] * n, pa.int32()),
                "group_base": pa.array([ref.group_base] * n, pa.int64()),
                "group_last": pa.array([ref.group_last] * n, pa.int64()),
                "offset": rows.column("offset"),
                "ts_ms": rows.column("timestamp").cast(pa.int64()),
                "timestamp_type": rows.column("timestamp_type"),
                "key": rows.column("key"),
                "value": rows.column("value"),
                "headers": rows.column("headers"),
                "producer_id": rows.column("producer_id"),
                "sequence": rows.column("sequence"),
            },
            schema=ROWS_SCHEMA,
        )
        yield from table.to_batches(max_chunksize=65_536)


def write_groups(
    storage: Storage, table_path: str, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Write each (partition, group) of offset-sorted rows as one segment; report them.

    Rows arrive sorted by partition, group and offset, so one group is
    buffered at a time. The new segment keeps the group's whole offset range
    (its base and last offsets), whatever records survived inside it.
    """
    current: tuple[int, int] | None = None
    pending: list[pa.RecordBatch] = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch])
        keys = pc.add(
            pc.multiply(table.column("partition").cast(pa.int64()), 2**32),
            table.column("group").cast(pa.int64()),
        ).to_numpy()
        starts = [0, *[i for i in range(1, len(keys)) if keys[i] != keys[i - 1]], len(keys)]
        for a, b in itertools.pairwise(starts):
            piece = table.slice(a, b - a)
            key = (int(piece.column("partition")[0].as_py()), int(piece.column("group")[0].as_py()))
            if current is not None and key != current:
                yield _write_group(storage, table_path, pending)
                pending = []
            current = key
            pending.extend(piece.to_batches())
    if pending:
        yield _write_group(storage, table_path, pending)


def _write_group(
    storage: Storage, table_path: str, batches: list[pa.RecordBatch]
) -> pa.RecordBatch:
    table = pa.Table.from_batches(batches)
    partition = int(table.column("partition")[0].as_py())
    group = int(table.column("group")[0].as_py())
    base = int(table.column("group_base")[0].as_py())
    last = int(table.column("group_last")[0].as_py())
    rows = pa.table(
        {
            "offset": table.column("offset"),
            "timestamp": table.column("ts_ms").cast(TIMESTAMP_TYPE),
            "timestamp_type": table.column("timestamp_type"),
            "key": table.column("key"),
            "value": table.column("value"),
            "headers": table.column("headers"),
            "producer_id": table.column("producer_id"),
            "sequence": table.column("sequence"),
        },
        schema=SEGMENT_SCHEMA,
    )
    segment = write_segment(
        storage, table_path, partition, rows, base_offset=base, last_offset=last
    )
    return pa.RecordBatch.from_pylist(
        [
            {
                "partition": partition,
                "group": group,
                "path": segment.path,
                "size": segment.size_bytes,
                "num_records": segment.num_records,
                "min_ts": segment.min_timestamp_ms,
                "max_ts": segment.max_timestamp_ms,
                "base_offset": segment.base_offset,
                "last_offset": segment.last_offset,
            }
        ],
        schema=WRITTEN_SCHEMA,
    )


WRITTEN_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("group", pa.int32()),
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("num_records", pa.int64()),
        pa.field("min_ts", pa.int64()),
        pa.field("max_ts", pa.int64()),
        pa.field("base_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
    ]
)
