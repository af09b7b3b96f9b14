"""A producer request in the making: its records, their futures, and its sequence numbers.

A batch is finished exactly once: of the sender, a delivery timeout and a
forced close, the first wins, so callbacks run once. Records are settled in
send order, which keeps one partition's callbacks in order.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from lakelog.client.structs import RecordMetadata
from lakelog.client.wire import EncodedProduce
from lakelog.records import Record


@dataclass(eq=False)
class PendingRecord:
    """A record accepted by ``send`` and not yet settled."""

    record: Record
    future: Future[RecordMetadata]
    size: int
    deadline: float  # time.monotonic() by which it must be settled (delivery_timeout_ms)


def settle_error(future: Future[RecordMetadata], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


@dataclass(eq=False)
class ProducerBatch:
    """The records of one produce request to one topic, resent unchanged on every retry, so
    any broker recognises a retry by its base sequence and answers the original offsets."""

    topic: str
    records: list[PendingRecord]
    producer_id: int | None = None
    base_sequence: int | None = None
    encoded: EncodedProduce | None = None
    attempts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _finished: bool = False

    @property
    def deadline(self) -> float:
        return min(r.deadline for r in self.records)

    @property
    def size(self) -> int:
        return sum(r.size for r in self.records)

    def _claim(self) -> bool:
        with self._lock:
            if self._finished:
                return False
            self._finished = True
            return True

    def complete(self, metadata: list[RecordMetadata]) -> bool:
        """Resolve every future with its metadata (in send order); False if already finished."""
        if not self._claim():
            return False
        for pending, meta in zip(self.records, metadata, strict=True):
            if not pending.future.done():
                pending.future.set_result(meta)
        return True

    def fail(self, error: BaseException) -> bool:
        """Fail every future with ``error``; False if the batch was already finished."""
        if not self._claim():
            return False
        for pending in self.records:
            settle_error(pending.future, error)
        return True


__all__ = ["PendingRecord", "ProducerBatch", "settle_error"]
