"""Where each producer's last batches landed: the answer to a retried batch, from memory.

A retried batch (its answer lost) is a duplicate by sequence and must get the
offsets its records were first given; Kafka keeps each producer's last five
batches for this. Reading the newest segments instead costs a store round trip
per segment on the commit path, and after a broker dies every batch it held comes
back at once; that search is the fallback only for a batch this process did not
commit (another broker wrote it, or this process has restarted since).

Pure logic: no I/O, one lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lakelog.append.result import AppendResult, PartitionBatch
from lakelog.produce import PreparedBatch

#: Batches remembered per sequence stream: Kafka's, the most an idempotent producer
#: has in flight per connection (max.in.flight.requests.per.connection <= 5).
BATCHES_PER_STREAM = 5
#: Records remembered in all, over every stream: the least recently written streams are
#: forgotten first. Three int64 columns per record, so about 24 MB at the limit.
MAX_RECORDS = 1_000_000


@dataclass(frozen=True, slots=True)
class _Written:
    """One batch: its first sequence and size, and where its records landed."""

    base_sequence: int
    count: int
    partitions: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]
    timestamps_ms: npt.NDArray[np.int64]
    batches: list[PartitionBatch]
    version: int


class ProducerState:
    """The outcome of each sequence stream's last ``BATCHES_PER_STREAM`` batches."""

    def __init__(
        self, batches_per_stream: int = BATCHES_PER_STREAM, max_records: int = MAX_RECORDS
    ) -> None:
        self._per_stream = batches_per_stream
        self._max_records = max_records
        self._streams: OrderedDict[str, deque[_Written]] = OrderedDict()
        self._records = 0
        self._lock = threading.Lock()

    @property
    def records(self) -> int:
        """Records remembered now (bounded by ``max_records`` plus one stream's batches)."""
        return self._records

    def remember(self, batch: PreparedBatch, result: AppendResult) -> None:
        """Note where an idempotent batch was written; other batches are ignored."""
        stream, base = batch.sequence_txn, batch.base_sequence
        if stream is None or base is None:
            return
        # Arrays taken now: the caller's result may turn its columns into lists later.
        partitions, offsets, timestamps = result.arrays()
        written = _Written(
            base, batch.num_records, partitions, offsets, timestamps, result.batches, result.version
        )
        with self._lock:
            entries = self._streams.pop(stream, None)
            if entries is None:
                entries = deque()
            if len(entries) == self._per_stream:
                self._records -= entries.popleft().count
            entries.append(written)
            self._records += written.count
            self._streams[stream] = entries
            while self._records > self._max_records and len(self._streams) > 1:
                _, dropped = self._streams.popitem(last=False)
                self._records -= sum(w.count for w in dropped)

    def original(self, batch: PreparedBatch) -> AppendResult | None:
        """Where this retried batch was first written, if it is one of its stream's last."""
        stream, base = batch.sequence_txn, batch.base_sequence
        if stream is None or base is None:
            return None
        with self._lock:
            entries = self._streams.get(stream)
            if entries is None:
                return None
            for w in entries:
                if w.base_sequence == base and w.count == batch.num_records:
                    return AppendResult(
                        w.partitions, w.offsets, w.timestamps_ms, w.batches, w.version, True
                    )
        return None
