"""Where sent records wait for company: per-topic queues, linger, batch size, memory bound.

A topic's queue becomes a request when ``batch_size`` bytes wait, its oldest
record has lingered ``linger_ms``, or someone flushes; the request takes all
that is queued up to ``max_request_size``, so a busy topic sends few large
requests (each is a Delta commit on the broker).

Sequence numbers are given out here, when a batch is formed, per topic (the
broker keeps one Delta app transaction per producer id in each table), and
each topic has its own producer id, replaced after a batch fails for good.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from lakelog.client.batch import PendingRecord, ProducerBatch
from lakelog.producer_ids import FIRST_ALLOCATED_ID

#: The broker's largest sequence number; a topic past it switches producer ids.
MAX_SEQUENCE = 2**31 - 1


def new_producer_id() -> int:
    """A random id below those brokers allocate to Kafka producers: 62 random bits make a
    collision negligible, and no Kafka producer's id is ever drawn."""
    return random.randrange(FIRST_ALLOCATED_ID)


@dataclass
class _TopicQueue:
    records: deque[PendingRecord] = field(default_factory=deque)
    bytes: int = 0
    in_flight: int = 0
    producer_id: int | None = None
    next_sequence: int = 0
    first_enqueued: float = 0.0


class RecordAccumulator:
    """Thread-safe queues between ``Producer.send`` and the sender thread; ``cond`` is
    notified whenever the sender might have work."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        max_request_size: int,
        buffer_memory: int,
        idempotent: bool,
        max_in_flight_per_topic: int,
        id_source: Callable[[], int] = new_producer_id,
    ) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.idempotent = idempotent
        self.max_in_flight = 1 if idempotent else max_in_flight_per_topic
        self._new_id = id_source
        self._topics: dict[str, _TopicQueue] = {}
        self._buffered = 0
        self._flushing = 0
        self._closing = False
        self.cond = threading.Condition()

    # -- producer side -----------------------------------------------------------

    def append(self, topic: str, pending: PendingRecord, max_block_s: float) -> None:
        """Queue a record, waiting up to ``max_block_s`` for buffer memory, then BufferError
        (as confluent-kafka); RuntimeError once the producer is closing."""
        deadline = time.monotonic() + max_block_s
        with self.cond:
            while (
                not self._closing
                and self._buffered
                and self._buffered + pending.size > self.buffer_memory
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BufferError(
                        f"producer buffer full: {self._buffered} of buffer_memory="
                        f"{self.buffer_memory} bytes waited on for max_block_ms"
                    )
                self.cond.wait(remaining)
            if self._closing:
                raise RuntimeError("the producer is closed")
            queue = self._topics.get(topic)
            if queue is None:
                queue = self._topics[topic] = _TopicQueue()
            if not queue.records:
                queue.first_enqueued = time.monotonic()
            queue.records.append(pending)
            queue.bytes += pending.size
            self._buffered += pending.size
            if len(queue.records) == 1 or queue.bytes >= self.batch_size:
                self.cond.notify_all()

    def begin_flush(self) -> None:
        """Make every queue sendable now, regardless of linger, until ``end_flush``."""
        with self.cond:
            self._flushing += 1
            self.cond.notify_all()

    def end_flush(self) -> None:
        with self.cond:
            self._flushing -= 1

    def close(self) -> None:
        """Refuse new records and send what is queued without lingering."""
        with self.cond:
            self._closing = True
            self.cond.notify_all()

    # -- sender side (call with ``cond`` held) ------------------------------------

    def drain(self, now: float) -> tuple[list[ProducerBatch], float | None]:
        """Batches to send now, and when to look again (None: only when notified)."""
        force = self._flushing > 0 or self._closing
        batches: list[ProducerBatch] = []
        wake: float | None = None
        for topic, queue in self._topics.items():
            if not queue.records or queue.in_flight >= self.max_in_flight:
                continue
            linger_end = queue.first_enqueued + self.linger_s
            if force or queue.bytes >= self.batch_size or now >= linger_end:
                batches.append(self._form_batch(topic, queue, now))
                if queue.records and queue.in_flight < self.max_in_flight:
                    wake = now  # more is waiting and may go at once
            else:
                wake = linger_end if wake is None else min(wake, linger_end)
        return batches, wake

    def _form_batch(self, topic: str, queue: _TopicQueue, now: float) -> ProducerBatch:
        taken: list[PendingRecord] = []
        size = 0
        while queue.records and (
            not taken or size + queue.records[0].size <= self.max_request_size
        ):
            pending = queue.records.popleft()
            taken.append(pending)
            size += pending.size
        queue.bytes -= size
        queue.first_enqueued = now
        queue.in_flight += 1
        batch = ProducerBatch(topic, taken)
        if self.idempotent:
            if queue.producer_id is None or queue.next_sequence + len(taken) - 1 > MAX_SEQUENCE:
                queue.producer_id = self._new_id()
                queue.next_sequence = 0
            batch.producer_id = queue.producer_id
            batch.base_sequence = queue.next_sequence
            queue.next_sequence += len(taken)
        return batch

    def expire(self, now: float) -> list[PendingRecord]:
        """Queued records past their delivery deadline, removed from the queues."""
        expired: list[PendingRecord] = []
        for queue in self._topics.values():
            if not queue.records or queue.records[0].deadline > now:
                continue
            kept: deque[PendingRecord] = deque()
            gone: list[PendingRecord] = []
            for pending in queue.records:
                (gone if pending.deadline <= now else kept).append(pending)
            queue.records = kept
            freed = sum(p.size for p in gone)
            queue.bytes -= freed
            self._buffered -= freed
            expired += gone
        if expired:
            self.cond.notify_all()
        return expired

    def next_deadline(self) -> float | None:
        """The earliest delivery deadline among queued records (queues are in send order)."""
        firsts = [q.records[0].deadline for q in self._topics.values() if q.records]
        return min(firsts) if firsts else None

    def take_all(self) -> list[PendingRecord]:
        """Every queued record, removed (a forced close fails them)."""
        taken: list[PendingRecord] = []
        for queue in self._topics.values():
            taken.extend(queue.records)
            self._buffered -= queue.bytes
            queue.records.clear()
            queue.bytes = 0
        self.cond.notify_all()
        return taken

    def idle(self) -> bool:
        """Nothing queued and nothing in flight."""
        return all(not q.records and not q.in_flight for q in self._topics.values())

    # -- completion (any thread) -----------------------------------------------

    def batch_done(self, batch: ProducerBatch, failed: bool) -> None:
        """Free the batch's memory and in-flight slot; after a failure, a fresh producer id.

        A failed batch may or may not have been written, so the next sequence
        could leave a gap (refused) or be taken for a retry of old records; a new
        producer id has no history to conflict with.
        """
        with self.cond:
            queue = self._topics[batch.topic]
            queue.in_flight -= 1
            self._buffered -= batch.size
            if failed and self.idempotent and queue.producer_id == batch.producer_id:
                queue.producer_id = None
            self.cond.notify_all()

    def producer_id(self, topic: str) -> int | None:
        """The topic's current producer id (None before its first batch or after a failure)."""
        with self.cond:
            queue = self._topics.get(topic)
            return queue.producer_id if queue else None


__all__ = ["MAX_SEQUENCE", "RecordAccumulator", "new_producer_id"]
