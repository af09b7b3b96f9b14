"""Fetching for the consumer: one long-poll request per partition in flight, results buffered.

Fetches run on a thread pool, so an idle partition's long poll never delays a
busy one, and they keep running between polls (Kafka's fetch pipelining).
Results are checked against the position when used, so after a ``seek`` an
answer for the old offset is dropped. OFFSET_OUT_OF_RANGE hands the partition
to the reset policy; other retriable errors only back the partition off (the
connection already tried every broker).
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from lakelog.client.connection import Connection
from lakelog.client.offsets import topic_path
from lakelog.client.retry import Backoff
from lakelog.client.structs import TopicPartition
from lakelog.client.subscription import SubscriptionState
from lakelog.client.wire import FetchedRecords, WireFormat, decode_fetch
from lakelog.errors import LakelogError, OffsetOutOfRangeError
from lakelog.records import ConsumerRecord

log = logging.getLogger(__name__)


@dataclass
class _InFlight:
    offset: int
    future: Future[FetchedRecords]


@dataclass
class _Buffered:
    """Fetched records not yet returned by ``poll``; ``position`` is where they continue."""

    position: int
    records: list[ConsumerRecord]
    next_offset: int
    index: int = 0


class Fetcher:
    def __init__(
        self,
        conn: Connection,
        *,
        max_partition_fetch_bytes: int,
        max_records: int,
        fetch_format: WireFormat,
        request_timeout_s: float,
        backoff: Backoff,
        threads: int,
    ) -> None:
        self._conn = conn
        self._max_bytes = max_partition_fetch_bytes
        self._max_records = max_records
        self._format = fetch_format
        self._request_timeout_s = request_timeout_s
        self._backoff = backoff
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="lakelog-fetch")
        self._in_flight: dict[TopicPartition, _InFlight] = {}
        self._buffered: dict[TopicPartition, _Buffered] = {}
        self._failures: dict[TopicPartition, int] = {}
        self._retry_at: dict[TopicPartition, float] = {}
        self._rotation = 0

    def send(self, subs: SubscriptionState, max_wait_ms: int) -> None:
        """Start a fetch for every fetchable partition with nothing buffered or in flight."""
        now = time.monotonic()
        for tp, offset in subs.fetchable():
            if tp in self._in_flight or tp in self._buffered or self._retry_at.get(tp, 0) > now:
                continue
            future = self._pool.submit(self._fetch, tp, offset, max(max_wait_ms, 0))
            self._in_flight[tp] = _InFlight(offset, future)

    def _fetch(self, tp: TopicPartition, offset: int, max_wait_ms: int) -> FetchedRecords:
        params: dict[str, str | int] = {
            "offset": offset,
            "max_records": self._max_records,
            "max_bytes": self._max_bytes,
            "max_wait_ms": max_wait_ms,
            "format": self._format,
            "key_format": "base64",
            "value_format": "base64",
        }
        response = self._conn.request(
            "GET",
            f"{topic_path(tp.topic)}/partitions/{tp.partition}/records",
            params=params,
            timeout_s=self._request_timeout_s + max_wait_ms / 1000,
        )
        return decode_fetch(
            tp.topic,
            tp.partition,
            response.headers.get("content-type", ""),
            response.headers,
            response.content,
        )

    def wait(self, timeout_s: float) -> None:
        """Block until some fetch finishes, or ``timeout_s`` passes."""
        pending = [f.future for f in self._in_flight.values()]
        if pending and timeout_s > 0:
            concurrent.futures.wait(pending, timeout_s, concurrent.futures.FIRST_COMPLETED)
        elif timeout_s > 0:
            time.sleep(min(timeout_s, self._next_retry_in()))

    def _next_retry_in(self) -> float:
        now = time.monotonic()
        waits = [t - now for t in self._retry_at.values() if t > now]
        return min(waits) if waits else self._backoff.initial_ms / 1000

    def collect(self, subs: SubscriptionState) -> None:
        """Move finished fetches into the buffer; raise errors the application must see."""
        for tp, request in list(self._in_flight.items()):
            if not request.future.done():
                continue
            del self._in_flight[tp]
            if not subs.is_assigned(tp) or subs.position(tp) != request.offset:
                continue  # answer to an offset we no longer want
            try:
                fetched = request.future.result()
            except OffsetOutOfRangeError as exc:
                self._failures.pop(tp, None)
                if subs.default_reset == "none":
                    raise
                log.info("%s: %s; resetting to %s", tp, exc.message, subs.default_reset)
                subs.request_reset(tp, None)
                continue
            except LakelogError as exc:
                if not exc.retriable:
                    raise
                failures = self._failures.get(tp, 0) + 1
                self._failures[tp] = failures
                self._retry_at[tp] = time.monotonic() + self._backoff.delay_s(failures)
                log.warning("fetch of %s failed (%d in a row), will retry: %s", tp, failures, exc)
                continue
            self._failures.pop(tp, None)
            self._retry_at.pop(tp, None)
            subs.set_high_watermark(tp, fetched.high_watermark)
            records = [r for r in fetched.records if r.offset >= request.offset]
            if records:
                self._buffered[tp] = _Buffered(request.offset, records, fetched.next_offset)
            elif fetched.next_offset > request.offset:
                subs.seek(tp, fetched.next_offset)  # only gaps (compaction) up to next_offset

    def drain(
        self, subs: SubscriptionState, max_records: int
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``max_records`` buffered records, advancing positions past what is returned.

        Partitions take turns being first, so one busy partition cannot starve
        the others across polls.
        """
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        order = list(self._buffered)
        if order:
            self._rotation = (self._rotation + 1) % len(order)
            order = order[self._rotation :] + order[: self._rotation]
        remaining = max_records
        for tp in order:
            buffered = self._buffered[tp]
            if not subs.is_assigned(tp) or subs.position(tp) != buffered.position:
                del self._buffered[tp]  # unassigned or seeked away since it was fetched
                continue
            if remaining <= 0 or not subs.is_fetchable(tp):
                continue  # paused partitions keep their buffer for after resume
            taken = buffered.records[buffered.index : buffered.index + remaining]
            buffered.index += len(taken)
            remaining -= len(taken)
            position = taken[-1].offset + 1
            if buffered.index >= len(buffered.records):
                position = max(position, buffered.next_offset)
                del self._buffered[tp]
            else:
                buffered.position = position
            subs.seek(tp, position)
            out[tp] = taken
        return out

    def forget(self, keep: set[TopicPartition]) -> None:
        """Drop state of partitions no longer assigned (in-flight answers are ignored later)."""
        for table in (self._buffered, self._failures, self._retry_at):
            for tp in [tp for tp in table if tp not in keep]:
                del table[tp]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["Fetcher"]
