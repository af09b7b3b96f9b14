"""Code that runs inside Spark tasks: read segments into Arrow, write groups as segments.

Tasks receive small picklable values (storage, table path, segment
descriptors) and open storage themselves, so the same code works in local mode
and on a cluster with no Hadoop connector. Errors are lakelog errors naming the
segment, which ``compaction.task_errors`` turns back into the same class.
"""

from __future__ import annotations

import base64
import itertools
import json
import pickle
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import from_arrow_schema

from lakelog.errors import CorruptRecordError, KafkaStorageError, LakelogError
from lakelog.offset_index import Segment
from lakelog.records import HEADERS_TYPE, SEGMENT_SCHEMA, TIMESTAMP_TYPE
from lakelog.segments import SegmentReader, with_typed, write_segment
from lakelog.storage import Storage
from spark_connector.schema import typed_ddl

#: Records as they travel through Spark (timestamps as epoch ms to avoid time-zone games).
ROWS_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("group", pa.int32(), nullable=False),
        pa.field("group_base", pa.int64(), nullable=False),
        pa.field("group_last", pa.int64(), nullable=False),
        *(
            pa.field("ts_ms", pa.int64(), nullable=False) if f.name == "timestamp" else f
            for f in SEGMENT_SCHEMA
        ),
    ]
)
#: The columns ``ROWS_SCHEMA`` adds to a segment's: the group a row belongs to.
GROUP_COLUMNS = ("partition", "group", "group_base", "group_last")
ROWS_DDL = (
    "partition int, group int, group_base long, group_last long, offset long, ts_ms long, "
    "timestamp_type int, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>, producer_id long, sequence int"
)

#: Optional boolean column of writer input: rows with ``false`` are dropped (and counted).
KEEP_COLUMN = "_keep"

#: What a writing task reports back to the driver for every segment it wrote.
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
        pa.field("dropped", pa.int64()),
    ]
)
WRITTEN_ROW = from_arrow_schema(WRITTEN_SCHEMA)


def headers_from_json(column: pa.ChunkedArray) -> pa.Array:
    """Record headers from the JSON text Spark's ``to_json`` makes of them (values base64).

    Spark hands array columns to Python tasks several times slower than flat
    ones (docs/architecture.md, "Rejected alternatives").
    """
    if column.null_count == len(column):
        return pa.nulls(len(column), HEADERS_TYPE)
    decoded: list[list[dict[str, object]] | None] = []
    for text in column.to_pylist():
        if text is None or text == "[]":
            decoded.append(None if text is None else [])
            continue
        decoded.append(
            [
                {
                    "key": header["key"],
                    "value": None
                    if header.get("value") is None
                    else base64.b64decode(header["value"]),
                }
                for header in json.loads(text)
            ]
        )
    return pa.array(decoded, type=HEADERS_TYPE)


_WORKER_LOCK = threading.Lock()
_WORKER_STORAGES: dict[bytes, Storage] = {}
_WORKER_READERS: dict[tuple[bytes, str], SegmentReader] = {}


def worker_storage(storage: Storage) -> Storage:
    """One storage object per root and Python worker process, reused across tasks.

    Each task unpickles its own copy, and for S3 each copy would open a new
    client on its first request (~1 s: botocore session, endpoint data).
    """
    key = pickle.dumps(storage)
    with _WORKER_LOCK:
        return _WORKER_STORAGES.setdefault(key, storage)


def worker_reader(storage: Storage, table_path: str) -> SegmentReader:
    """A segment reader (with its footer cache) per root and table, reused across tasks."""
    key = (pickle.dumps(storage), table_path)
    with _WORKER_LOCK:
        reader = _WORKER_READERS.get(key)
    if reader is None:
        reader = SegmentReader(worker_storage(storage), table_path)
        with _WORKER_LOCK:
            reader = _WORKER_READERS.setdefault(key, reader)
    return reader


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


def rows_ddl(typed: Sequence[pa.Field] = ()) -> str:
    """``ROWS_DDL`` with the table's typed columns after it."""
    return ROWS_DDL + typed_ddl(typed)


def read_segment(
    reader: SegmentReader, ref: SegmentRef, typed: Sequence[pa.Field] = ()
) -> pa.Table:
    """All rows of one segment, checked against the offset range the Delta log gives it.

    A maintenance job must never rewrite data it cannot vouch for: a bad
    segment is CORRUPT_MESSAGE naming it; a storage failure is
    KAFKA_STORAGE_ERROR, retriable.
    """
    segment = Segment(ref.base_offset, ref.last_offset, ref.path, ref.partition)
    with segment_errors(ref):
        rows = reader.read(segment, ref.base_offset, 2**62, typed=typed)
    if rows.num_rows:
        offsets = rows.column("offset")
        low, high = pc.min(offsets).as_py(), pc.max(offsets).as_py()
        if (error := out_of_range(ref, low, high, nulls=offsets.null_count > 0)) is not None:
            raise error
    return rows


@contextmanager
def segment_errors(ref: SegmentRef, exists: Callable[[], bool] | None = None) -> Iterator[None]:
    """Failures reading ``ref`` as lakelog errors naming it; OSError is the storage's, retriable.

    ``exists`` tells a missing file from a storage failure where the storage
    reports both as OSError.
    """
    where = f"segment {ref.path} of partition {ref.partition}"
    try:
        yield
    except FileNotFoundError as exc:
        raise CorruptRecordError(f"{where} is missing from storage") from exc
    except LakelogError:
        raise
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise CorruptRecordError(f"{where} is unreadable: {exc}") from exc
    except OSError as exc:
        if exists is not None and not exists():
            raise CorruptRecordError(f"{where} is missing from storage") from exc
        raise KafkaStorageError(f"cannot read {where}: {exc}") from exc


def out_of_range(
    ref: SegmentRef, low: int | None, high: int | None, *, nulls: bool = False
) -> CorruptRecordError | None:
    """The error for a segment holding offsets outside its Delta range (or null ones), if so."""
    if nulls or low is None or high is None or low < ref.base_offset or high > ref.last_offset:
        return CorruptRecordError(
            f"segment {ref.path} of partition {ref.partition} holds offsets {low}..{high} "
            f"outside its range {ref.base_offset}..{ref.last_offset}"
        )
    return None


def _tagged(rows: pa.Table, ref: SegmentRef, typed: Sequence[pa.Field] = ()) -> pa.Table:
    n = rows.num_rows
    columns = {name: pa.repeat(getattr(ref, name), n) for name in GROUP_COLUMNS}
    columns.update({name: rows.column(name) for name in SEGMENT_SCHEMA.names})
    columns["ts_ms"] = columns.pop("timestamp").cast(pa.int64())
    columns.update({f.name: rows.column(f.name) for f in typed})
    schema = pa.schema([*ROWS_SCHEMA, *typed]) if typed else ROWS_SCHEMA
    return pa.table(columns, schema=schema)


def read_segments(
    storage: Storage, table_path: str, refs: Sequence[SegmentRef], typed: Sequence[pa.Field] = ()
) -> Iterator[pa.RecordBatch]:
    """All rows of the given segments, tagged with partition and group."""
    reader = worker_reader(storage, table_path)
    for ref in refs:
        rows = read_segment(reader, ref, typed)
        if rows.num_rows:
            yield from _tagged(rows, ref, typed).to_batches(max_chunksize=65_536)


def write_groups(
    storage: Storage,
    table_path: str,
    batches: Iterator[pa.RecordBatch],
    typed: Sequence[pa.Field] = (),
) -> Iterator[pa.RecordBatch]:
    """Write each (partition, group) of rows sorted by partition, group, offset as one segment.

    One group is buffered at a time; ``write_group`` says what is written.
    """
    storage = worker_storage(storage)
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
                yield write_group(storage, table_path, pa.Table.from_batches(pending), typed=typed)
                pending = []
            current = key
            pending.extend(piece.to_batches())
    if pending:
        yield write_group(storage, table_path, pa.Table.from_batches(pending), typed=typed)


def rewrite_groups(
    storage: Storage,
    table_path: str,
    groups: Sequence[Sequence[SegmentRef]],
    typed: Sequence[pa.Field] = (),
) -> Iterator[pa.RecordBatch]:
    """For merging: read each group's segments in order and write them as one segment.

    A task owns whole groups, so no shuffle; an empty group still gets an
    (empty) segment, so its offset range stays covered.
    """
    reader = worker_reader(storage, table_path)
    storage = reader.storage
    for refs in groups:
        tables = [_tagged(read_segment(reader, ref, typed), ref, typed) for ref in refs]
        yield write_group(storage, table_path, pa.concat_tables(tables), refs[0], typed)


def write_group(
    storage: Storage,
    table_path: str,
    table: pa.Table,
    ref: SegmentRef | None = None,
    typed: Sequence[pa.Field] = (),
) -> pa.RecordBatch:
    """Write one group's rows as a segment keeping the group's whole offset range, with
    the table's ``typed`` columns.

    Rows whose ``_keep`` is false are only counted. ``ref`` names the group
    when ``table`` may be empty; otherwise the rows do.
    """
    if ref is None:
        first = {name: int(table.column(name)[0].as_py()) for name in GROUP_COLUMNS}
        ref = SegmentRef(**first, path="", base_offset=0, last_offset=0)
    dropped = 0
    if KEEP_COLUMN in table.column_names:
        keep = pc.fill_null(table.column(KEEP_COLUMN), False)
        dropped = table.num_rows - int(pc.sum(keep.cast(pa.int64())).as_py() or 0)
        table = table.filter(keep)
    headers = table.column("headers")
    if pa.types.is_string(headers.type) or pa.types.is_large_string(headers.type):
        headers = headers_from_json(headers)
    columns = {name: table.column(name) for name in SEGMENT_SCHEMA.names if name != "timestamp"}
    columns.update(timestamp=table.column("ts_ms").cast(TIMESTAMP_TYPE), headers=headers)
    rows = pa.table(columns, schema=SEGMENT_SCHEMA)
    if typed:  # fields the rows lack (older files) as null, Spark's types as the table's
        given = [f.name for f in typed if f.name in table.column_names]
        rows = with_typed(
            pa.Table.from_arrays(
                [*rows.columns, *(table.column(name) for name in given)],
                names=[*rows.column_names, *given],
            ),
            typed,
        )
    segment = write_segment(
        storage,
        table_path,
        ref.partition,
        rows,
        base_offset=ref.group_base,
        last_offset=ref.group_last,
    )
    return pa.RecordBatch.from_pylist(
        [
            {
                "partition": ref.partition,
                "group": ref.group,
                "path": segment.path,
                "size": segment.size_bytes,
                "num_records": segment.num_records,
                "min_ts": segment.min_timestamp_ms,
                "max_ts": segment.max_timestamp_ms,
                "base_offset": segment.base_offset,
                "last_offset": segment.last_offset,
                "dropped": dropped,
            }
        ],
        schema=WRITTEN_SCHEMA,
    )
