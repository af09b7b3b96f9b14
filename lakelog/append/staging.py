"""A group commit's rows, grouped by partition and written as segments before their commit."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakelog.offset_index import Segment
from lakelog.partitioner import stable_order
from lakelog.produce import PreparedBatch
from lakelog.segments import SegmentWriter


@dataclass
class PreparedSegments:
    """Segments written for one attempt, reusable while their base offsets stay valid;
    ``numbered``: each partition's rows as stored, reused for the listeners."""

    bases: dict[int, int] = field(default_factory=dict)
    segments: dict[int, Segment] = field(default_factory=dict)
    numbered: dict[int, pa.Table] = field(default_factory=dict)

    def discard(self, writer: SegmentWriter) -> None:
        """Delete segments that were written but never committed (nobody can see them)."""
        for segment in self.segments.values():
            writer.discard(segment)
        self.segments.clear()
        self.bases.clear()
        self.numbered.clear()


@dataclass
class StagedAppend:
    """Requests whose segments are written, at predicted offsets, but not yet committed.

    Staging is the slow part (Parquet, fsync) and needs no lock, so a broker stages its
    next group commit while the previous one commits.
    """

    batches: list[PreparedBatch]
    by_partition: dict[int, pa.Table]
    locate: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]]
    prepared: PreparedSegments
    released: bool = False
    #: per segment path: its flush to stable storage, running while the commit is prepared
    flushes: dict[str, Future[None]] = field(default_factory=dict)

    def wait_flushed(self) -> None:
        """Block until every staged segment still to be committed is durable (just before
        the commit is published, so the flush overlaps building it)."""
        current = {s.path for s in self.prepared.segments.values()}
        for path, flush in self.flushes.items():
            try:
                flush.result()
            except FileNotFoundError:
                if path in current:
                    raise
                # Rewritten at other offsets and deleted before its flush: nothing to keep.

    def settle(self) -> None:
        """Wait for the flushes before the segments are thrown away; their outcome no longer
        matters (a failed flush of a deleted, never published file loses nothing)."""
        futures.wait(list(self.flushes.values()))


def group_by_partition(
    batches: Sequence[PreparedBatch],
) -> tuple[dict[int, pa.Table], list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]]]:
    """Each partition's rows in request order, and where each request's records land.

    For every request: its records' partitions and positions in their partition's rows.
    Requests of one partition each are only concatenated; otherwise the whole commit
    is reordered with one stable sort and one ``take`` (one copy per commit, not one
    ``take`` per partition of every request and segments of many small chunks).
    """
    parts = [b.table.column("partition").to_numpy() for b in batches]
    if all((p == p[0]).all() for p in parts):
        return _concatenated(batches, parts)
    everything = np.concatenate(parts)
    order = stable_order(everything)
    ordered = everything[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(ordered)) + 1))
    counts = np.diff(np.append(starts, len(ordered)))
    # position of each row within its partition: its rank in the stably sorted order
    positions = np.empty(len(everything), dtype=np.int64)
    positions[order] = np.arange(len(ordered)) - np.repeat(starts, counts)
    rows = pa.concat_tables([b.table.drop_columns(["partition"]) for b in batches])
    taken = take_rows(rows, order)
    by_partition = {
        int(ordered[start]): taken.slice(int(start), int(count))
        for start, count in zip(starts, counts, strict=True)
    }
    bounds = np.cumsum([0] + [len(p) for p in parts])
    locate = [(p, positions[bounds[i] : bounds[i + 1]]) for i, p in enumerate(parts)]
    return by_partition, locate


def take_rows(rows: pa.Table, order: npt.NDArray[np.int64]) -> pa.Table:
    """``rows.take(order).combine_chunks()``, without gathering the columns that need none.

    All-null columns (``producer_id`` of a non-idempotent producer) and all-empty
    ``headers`` are built at the length of ``order``: on 8 keyed requests of 10,000
    records, 1.58 ms instead of 2.14 ms.
    """
    indices = pa.array(order)
    n = len(order)
    columns: list[pa.Array] = []
    for column in rows.columns:
        if column.null_count == len(column):
            columns.append(pa.nulls(n, column.type))
        elif _all_empty_lists(column):
            offsets = pa.array(np.zeros(n + 1, np.int32))
            empty = pa.array([], column.type.value_type)
            columns.append(pa.ListArray.from_arrays(offsets, empty, type=column.type))
        else:
            taken = column.take(indices)
            columns.append(taken.chunk(0) if taken.num_chunks == 1 else taken.combine_chunks())
    return pa.Table.from_arrays(columns, schema=rows.schema)


def _all_empty_lists(column: pa.ChunkedArray) -> bool:
    return (
        pa.types.is_list(column.type)
        and column.null_count == 0
        and all(len(chunk.values) == 0 for chunk in column.chunks)
    )


def _concatenated(
    batches: Sequence[PreparedBatch], parts: Sequence[npt.NDArray[np.int32]]
) -> tuple[dict[int, pa.Table], list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]]]:
    """``group_by_partition`` of requests that each go to one partition: no copy."""
    pieces: dict[int, list[pa.Table]] = {}
    filled: dict[int, int] = {}
    locate = []
    for b, partitions in zip(batches, parts, strict=True):
        p = int(partitions[0])
        start = filled.get(p, 0)
        pieces.setdefault(p, []).append(b.table.drop_columns(["partition"]))
        filled[p] = start + len(partitions)
        locate.append((partitions, np.arange(start, start + len(partitions), dtype=np.int64)))
    by_partition = {
        p: tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        for p, tables in pieces.items()
    }
    return by_partition, locate
