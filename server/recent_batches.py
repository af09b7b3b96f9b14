"""Recently appended batches kept in memory, for consumers that are caught up.

A consumer at the head of a partition asks for exactly what this broker has
just committed; serving that from memory saves an object-store GET per poll.
Only whole committed batches are kept (added by the log's append listener),
and a read is served only from a run of batches contiguous from the requested
offset, so the cache can answer less than storage would but never something
different. Bounded by bytes, oldest batches evicted first.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import pyarrow as pa

from lakelog.fetch import fetch_sizes


@dataclass(frozen=True)
class _Batch:
    base: int
    end: int
    rows: pa.Table
    size: int
    #: Key and value bytes: what a fetch's byte limit counts.
    payload: int


@dataclass
class _Partition:
    """One partition's cached batches by base offset; ``bases`` mirrors ``batches`` so a
    lookup bisects it directly instead of rebuilding a list of every cached base per call."""

    bases: list[int] = field(default_factory=list)
    batches: list[_Batch] = field(default_factory=list)

    def insert(self, batch: _Batch) -> None:
        i = bisect.bisect_left(self.bases, batch.base)
        self.bases.insert(i, batch.base)
        self.batches.insert(i, batch)

    def remove(self, batch: _Batch) -> None:
        i = bisect.bisect_left(self.bases, batch.base)  # bases are unique: one batch per base
        del self.bases[i], self.batches[i]


class RecentBatches:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._batches: dict[tuple[str, int], _Partition] = {}
        self._order: OrderedDict[tuple[str, int, int], _Batch] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def add(self, topic: str, partition: int, rows: pa.Table) -> None:
        """Remember a committed batch (rows with offsets, ascending and contiguous)."""
        if self.max_bytes <= 0 or rows.num_rows == 0:
            return
        offsets = rows.column("offset")
        batch = _Batch(
            int(offsets[0].as_py()),
            int(offsets[-1].as_py()) + 1,
            rows,
            rows.nbytes,
            int(fetch_sizes(rows).sum()),
        )
        if batch.size > self.max_bytes:
            return
        with self._lock:
            cached = self._batches.setdefault((topic, partition), _Partition())
            # A second batch at the same base (the topic was deleted and created again) is
            # the truth: the older one leaves both _order and _batches, and its bytes are
            # released, so it can never be read again.
            old = self._order.pop((topic, partition, batch.base), None)
            if old is not None:
                cached.remove(old)
                self._bytes -= old.size
            cached.insert(batch)
            self._order[(topic, partition, batch.base)] = batch
            self._bytes += batch.size
            while self._bytes > self.max_bytes and self._order:
                (t, p, _), old = self._order.popitem(last=False)
                self._bytes -= old.size
                remaining = self._batches[(t, p)]
                remaining.remove(old)
                if not remaining.batches:
                    del self._batches[(t, p)]

    def read(
        self, topic: str, partition: int, offset: int, max_records: int, max_bytes: int
    ) -> pa.Table | None:
        """Rows from ``offset`` if a cached batch holds it; None means ask storage.

        Batches are taken until ``max_records`` rows or about ``max_bytes`` of
        keys and values (the caller trims to the exact limit): a consumer far
        behind costs one answer's worth of work, not the whole cache's.
        """
        with self._lock:
            cached = self._batches.get((topic, partition))
            batches = cached.batches if cached is not None else []
            i = bisect.bisect_right(cached.bases, offset) - 1 if cached is not None else -1
            # Never answer an empty table: callers index the answer ([-1]).
            if i < 0 or offset >= batches[i].end or max_records <= 0:
                self.misses += 1
                return None
            pieces = []
            taken = 0
            payload = 0
            expected = offset
            for j in range(i, len(batches)):
                batch = batches[j]
                if batch.base > expected:
                    break
                start = expected - batch.base
                piece = batch.rows.slice(start, max_records - taken)
                pieces.append(piece)
                taken += piece.num_rows
                payload += batch.payload * piece.num_rows // batch.rows.num_rows
                expected = batch.end
                if taken >= max_records or payload >= max_bytes:
                    break
            self.hits += 1
        return pa.concat_tables(pieces)

    def forget(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self._batches if k[0] == topic]:
                for batch in self._batches.pop(key).batches:
                    self._order.pop((key[0], key[1], batch.base), None)
                    self._bytes -= batch.size
