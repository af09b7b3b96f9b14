"""Segment files: one partition's contiguous offset range as one Parquet file.

A file is invisible until its add action is committed, so a crash in between
leaves only an orphan for vacuum. Reads skip to an offset by the row groups'
``offset`` statistics.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.column_buffers import int64_range
from lakelog.delta.actions import AddFile, RemoveFile
from lakelog.errors import CorruptRecordError, KafkaStorageError
from lakelog.offset_index import Segment, stats_timestamp
from lakelog.records import SEGMENT_SCHEMA
from lakelog.storage import Storage, join
from lakelog.typed_columns import conform

ROW_GROUP_ROWS = 16_384
DEFAULT_COMPRESSION = "snappy"
#: Threads writing and flushing one append's segments (one per partition touched) in parallel.
SEGMENT_IO_THREADS = 8

T = TypeVar("T")


def encode_segment(table: pa.Table, sink: Any, compression: str = DEFAULT_COMPRESSION) -> None:
    """Write segment rows as Parquet to a file-like ``sink``.

    No dictionaries: offsets and timestamps never repeat, and on keys one cost 14% of
    a keyed segment's encoding; a key bloom filter lets Spark's ``key = ...`` skip.
    """
    fixed = SEGMENT_SCHEMA
    if table.num_columns > len(SEGMENT_SCHEMA):  # typed columns follow the fixed ones
        fixed = pa.schema([*SEGMENT_SCHEMA, *list(table.schema)[len(SEGMENT_SCHEMA) :]])
    pq.write_table(
        table.cast(fixed) if table.schema != fixed else table,
        sink,
        compression=compression,
        row_group_size=ROW_GROUP_ROWS,
        use_dictionary=False,
        write_statistics=["offset", "timestamp", *typed_leaves(fixed)],
        bloom_filter_options=key_bloom_filter(table),
    )


def typed_leaves(schema: pa.Schema) -> list[str]:
    """Column paths of the typed columns' primitive leaves outside lists and maps: their
    row-group statistics let Spark skip row groups on a filter such as ``value_fields.x > 3``."""
    paths: list[str] = []

    def walk(prefix: str, type_: pa.DataType) -> None:
        if pa.types.is_struct(type_):
            for f in type_:
                walk(f"{prefix}.{f.name}", f.type)
        elif not (pa.types.is_list(type_) or pa.types.is_map(type_)):
            paths.append(prefix)

    for f in list(schema)[len(SEGMENT_SCHEMA) :]:
        walk(f.name, f.type)
    return paths


#: False-positive rate of the key bloom filter: a lookup reads 1 in 20 row groups
#: without the key, for about 6 bits per record of the row group.
KEY_BLOOM_FPP = 0.05


def key_bloom_filter(table: pa.Table) -> dict[str, dict[str, float]] | None:
    """Bloom filter options for the ``key`` column, sized for all-distinct keys; None when
    no record has a key (no lookup could match)."""
    keys = table.column("key")
    if keys.null_count == len(keys):
        return None
    return {"key": {"ndv": min(table.num_rows, ROW_GROUP_ROWS), "fpp": KEY_BLOOM_FPP}}


def add_action(segment: Segment, data_change: bool = True) -> AddFile:
    """The Delta add action publishing a segment (tags + Delta-standard stats)."""
    stats = {
        "numRecords": segment.num_records,
        "minValues": {
            "offset": segment.base_offset,
            "timestamp": stats_timestamp(segment.min_timestamp_ms),
        },
        "maxValues": {
            "offset": segment.last_offset,
            "timestamp": stats_timestamp(segment.max_timestamp_ms),
        },
        "nullCount": {"offset": 0, "timestamp": 0},
    }
    return AddFile(
        path=segment.path,
        partition_values={"partition": str(segment.partition)},
        size=segment.size_bytes,
        modification_time=segment.modification_time,
        data_change=data_change,
        stats=json.dumps(stats, separators=(",", ":")),
        tags=segment.tags(),
    )


def remove_action(segment: Segment, now_ms: int, data_change: bool = True) -> RemoveFile:
    """The Delta remove action taking a segment out of the table at ``now_ms``."""
    return RemoveFile(
        path=segment.path,
        deletion_timestamp=now_ms,
        data_change=data_change,
        partition_values={"partition": str(segment.partition)},
        size=segment.size_bytes,
    )


def write_segment(
    storage: Storage,
    table_path: str,
    partition: int,
    table: pa.Table,
    compression: str = DEFAULT_COMPRESSION,
    *,
    base_offset: int,
    last_offset: int,
    sync: bool = True,
) -> Segment:
    """Write rows of one partition as a new, uncommitted segment of ``base_offset..last_offset``
    (wider than the rows after compaction); with ``sync=False`` the caller flushes it
    (``Storage.sync_new``) before any commit may reference it."""
    # Kafka-like naming: the base offset leads, so a listing sorts in log order.
    relative = (
        f"partition={partition}/{base_offset:020d}-{last_offset:020d}-{uuid.uuid4().hex}.parquet"
    )
    path = join(table_path, relative)
    try:
        size = storage.write_new(
            path, lambda sink: encode_segment(table, sink, compression), sync=sync
        )
    except OSError as exc:
        raise KafkaStorageError(f"cannot write segment {path}: {exc}") from exc
    earliest, latest = int64_range(table.column("timestamp")) or (0, 0)
    return Segment(
        base_offset=base_offset,
        last_offset=last_offset,
        path=relative,
        partition=partition,
        size_bytes=size,
        num_records=table.num_rows,
        min_timestamp_ms=earliest,
        max_timestamp_ms=latest,
        modification_time=int(time.time() * 1000),
    )


class SegmentWriter:
    """Writes one table's segments, partitions in parallel (Parquet encoding releases the GIL).

    After ``close`` work runs on the caller's thread, so a writer still held keeps working.
    """

    def __init__(
        self, storage: Storage, table_path: str, name: str, compression: str = DEFAULT_COMPRESSION
    ) -> None:
        self.storage = storage
        self.table_path = table_path
        self.name = name
        self.compression = compression
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    SEGMENT_IO_THREADS, thread_name_prefix=f"seg-{self.name}"
                )
            return self._pool

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``fn`` on the I/O pool, or here if ``close`` shut that pool down meanwhile."""
        try:
            return self._executor().submit(fn, *args)
        except RuntimeError:  # "cannot schedule new futures after shutdown"
            done: Future[T] = Future()
            try:
                done.set_result(fn(*args))
            except BaseException as exc:
                done.set_exception(exc)
            return done

    def write(self, tables: dict[int, pa.Table], sync: bool = True) -> dict[int, Segment]:
        """One new segment per partition from its rows (numbered: base, base+1, ...)."""

        def one(p: int) -> Segment:
            table = tables[p]
            first = int(table.column("offset")[0].as_py())  # offsets are base, base+1, ...
            return write_segment(
                self.storage,
                self.table_path,
                p,
                table,
                self.compression,
                base_offset=first,
                last_offset=first + table.num_rows - 1,
                sync=sync,
            )

        if len(tables) == 1:
            (p,) = tables
            return {p: one(p)}
        running = {p: self.submit(one, p) for p in tables}
        return {p: f.result() for p, f in running.items()}

    def flush(self, segment: Segment) -> Future[None]:
        """Make a segment written with ``sync=False`` durable, on the pool."""
        return self.submit(self.storage.sync_new, [join(self.table_path, segment.path)])

    def discard(self, segment: Segment) -> None:
        """Delete a segment no commit references (nobody can be reading it)."""
        self.storage.delete(join(self.table_path, segment.path))

    def close(self, wait: bool = True) -> None:
        """Stop the pool; ``wait=False`` lets queued writes finish on their own."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait)


class SegmentReader:
    """Reads offset ranges from segments, caching their (immutable) Parquet footers."""

    def __init__(self, storage: Storage, table_path: str, cache_size: int = 1024) -> None:
        self.storage = storage
        self.table_path = table_path
        self._fs = storage.arrow_filesystem()
        self._footers: OrderedDict[str, pq.FileMetaData] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def _open(self, path: str) -> pq.ParquetFile:
        where = join(self.table_path, path)
        full = self.storage.arrow_path(where)
        with self._lock:
            metadata = self._footers.get(path)
            if metadata is not None:
                self._footers.move_to_end(path)
        try:
            source = self._fs.open_input_file(full)
            parquet = pq.ParquetFile(source, metadata=metadata)
        except FileNotFoundError:
            raise
        except pa.ArrowInvalid as exc:  # not Parquet, truncated footer, ...
            raise CorruptRecordError(
                f"segment {where} is not a readable Parquet file: {exc}"
            ) from exc
        except OSError as exc:
            if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
                raise FileNotFoundError(full) from exc
            raise KafkaStorageError(f"segment {where} could not be read: {exc}") from exc
        if metadata is None:
            with self._lock:
                self._footers[path] = parquet.metadata
                while len(self._footers) > self._cache_size:
                    self._footers.popitem(last=False)
        return parquet

    def read(
        self,
        segment: Segment,
        from_offset: int,
        max_records: int,
        columns: Sequence[str] | None = None,
        typed: Sequence[pa.Field] = (),
    ) -> pa.Table:
        """Up to ``max_records`` rows of ``segment`` with offset >= ``from_offset``.

        ``columns``: only these (``offset`` among them), in this order; None: the fixed
        columns, then ``typed`` columns as those types (``lakelog.typed_columns``:
        null where the file has no such column or field).
        """
        names = list(SEGMENT_SCHEMA.names if columns is None else columns)
        parquet = self._open(segment.path)
        stored = parquet.schema_arrow
        wanted = names
        if typed and columns is None:
            wanted = names + [f.name for f in typed if stored.get_field_index(f.name) >= 0]
        whole = len(stored) == len(wanted)  # every column of the file: no selection to make
        try:
            offset_col = stored.get_field_index("offset")
            pieces = []
            remaining = max_records
            for i in range(parquet.metadata.num_row_groups):
                stats = parquet.metadata.row_group(i).column(offset_col).statistics
                if stats is not None and stats.has_min_max and stats.max < from_offset:
                    continue
                rows = parquet.read_row_group(i, columns=None if whole else wanted)
                if from_offset > segment.base_offset:
                    rows = rows.filter(pc.greater_equal(rows.column("offset"), from_offset))
                if rows.num_rows > remaining:
                    rows = rows.slice(0, remaining)
                pieces.append(rows)
                remaining -= rows.num_rows
                if remaining <= 0:
                    break
        except (OSError, pa.ArrowInvalid) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise CorruptRecordError(
                f"segment {join(self.table_path, segment.path)} is unreadable: {exc}"
            ) from exc
        if not pieces:
            table = SEGMENT_SCHEMA.empty_table().select(names)
        else:
            table = pa.concat_tables(pieces).select(wanted)
        return with_typed(table, typed) if typed and columns is None else table


def with_typed(table: pa.Table, typed: Sequence[pa.Field]) -> pa.Table:
    """Segment rows with exactly the ``typed`` columns after the fixed ones, as those types:
    a column or field a file lacks (written before it existed) is null."""
    fixed = table.select(SEGMENT_SCHEMA.names)
    for f in typed:
        if f.name in table.column_names:
            column = table.column(f.name)
            fixed = fixed.append_column(
                f, pa.chunked_array([conform(c, f.type) for c in column.chunks], f.type)
            )
        else:
            fixed = fixed.append_column(f, pa.nulls(table.num_rows, f.type))
    return fixed
