"""Where an append's records landed: per record, and per partition touched."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lakelog.partitioner import stable_order


@dataclass(frozen=True, slots=True)
class PartitionBatch:
    """The records one append placed in one partition."""

    partition: int
    base_offset: int
    count: int


IntColumn = Sequence[int] | npt.NDArray[np.int64] | npt.NDArray[np.int32]


def _as_list(column: IntColumn) -> list[int]:
    return column.tolist() if isinstance(column, np.ndarray) else list(column)


class AppendResult:
    """Where every appended record landed, in input order.

    The per-record columns are kept as numpy arrays and turned into Python
    lists only when asked for: a 10,000-record append would otherwise spend
    more time building three lists of ints than committing, and a broker
    answering with per-partition base offsets (``batches``) never needs them.
    """

    __slots__ = ("_offsets", "_partitions", "_timestamps_ms", "batches", "duplicate", "version")

    def __init__(
        self,
        partitions: IntColumn,
        offsets: IntColumn,
        timestamps_ms: IntColumn,
        batches: list[PartitionBatch],
        version: int,
        duplicate: bool = False,
    ) -> None:
        self._partitions = partitions
        self._offsets = offsets
        self._timestamps_ms = timestamps_ms
        self.batches = batches
        self.version = version
        #: True when this is the original result of a retried idempotent request.
        self.duplicate = duplicate

    @property
    def num_records(self) -> int:
        return len(self._offsets)

    @property
    def partitions(self) -> list[int]:
        """Partition of each record, in input order."""
        self._partitions = _as_list(self._partitions)
        return self._partitions

    @property
    def offsets(self) -> list[int]:
        """Offset of each record, in input order."""
        self._offsets = _as_list(self._offsets)
        return self._offsets

    @property
    def timestamps_ms(self) -> list[int]:
        """Stored timestamp (ms) of each record, in input order."""
        self._timestamps_ms = _as_list(self._timestamps_ms)
        return self._timestamps_ms

    def arrays(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(partitions, offsets, timestamps_ms) as int64 numpy arrays, without building lists."""
        return (
            np.asarray(self._partitions, dtype=np.int64),
            np.asarray(self._offsets, dtype=np.int64),
            np.asarray(self._timestamps_ms, dtype=np.int64),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AppendResult):
            return NotImplemented
        return (
            self.partitions == other.partitions
            and self.offsets == other.offsets
            and self.timestamps_ms == other.timestamps_ms
            and self.batches == other.batches
            and (self.version, self.duplicate) == (other.version, other.duplicate)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable caches; like the dataclass before

    def __repr__(self) -> str:
        return (
            f"AppendResult(records={self.num_records}, batches={self.batches!r}, "
            f"version={self.version}, duplicate={self.duplicate})"
        )


def partition_batches(
    partitions: npt.NDArray[np.int64] | npt.NDArray[np.int32], offsets: npt.NDArray[np.int64]
) -> list[PartitionBatch]:
    """Per partition (ascending): the lowest offset and the record count, vectorised."""
    if len(partitions) == 0:
        return []
    first = partitions[0]
    if (partitions == first).all():  # the common case: one partition per request
        return [PartitionBatch(int(first), int(offsets.min()), len(offsets))]
    order = stable_order(partitions)
    ordered = partitions[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    lowest = np.minimum.reduceat(offsets[order], starts)
    counts = np.diff(np.r_[starts, len(ordered)])
    return [
        PartitionBatch(int(p), int(o), int(n))
        for p, o, n in zip(ordered[starts].tolist(), lowest.tolist(), counts.tolist(), strict=True)
    ]


def grouped_batches(
    parts: Sequence[npt.NDArray[np.int32]], bases: dict[int, int]
) -> list[list[PartitionBatch]]:
    """``partition_batches`` of every request of one group commit, from counts alone.

    A partition's rows are stored in request order from ``bases[p]``, so a request's
    records in ``p`` are one run right after the earlier requests': counting suffices,
    with no sort per request (which a keyed request, over every partition, would pay).
    """
    if not parts:
        return []
    touched = np.array(sorted(bases), dtype=np.int64)
    column = np.zeros(int(touched[-1]) + 1, dtype=np.intp)
    column[touched] = np.arange(len(touched))
    filled = dict.fromkeys(bases, 0)
    out = []
    for request in parts:
        first = int(request[0])
        if (request == first).all():  # the common case: one partition per request
            ids, counts = [first], [len(request)]
        else:
            per_partition = np.bincount(column[request], minlength=len(touched))
            present = np.flatnonzero(per_partition)
            ids, counts = touched[present].tolist(), per_partition[present].tolist()
        runs = []
        for p, n in zip(ids, counts, strict=True):
            runs.append(PartitionBatch(p, bases[p] + filled[p], n))
            filled[p] += n
        out.append(runs)
    return out
