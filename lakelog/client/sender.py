"""The producer's background I/O: turn ready queues into requests, retry them, settle futures.

One sender thread decides *when* to send; a pool of I/O threads each carries
one batch through its attempts, since a produce request blocks until the
broker's Delta commit is durable and one slow topic must not hold up others.
Retries reuse the batch's encoded body, producer id and base sequence, so a
lost response or crashed broker costs no duplicates. Backoff waits on the abort
event so a forced close is not delayed.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import httpx

from lakelog.client.accumulator import RecordAccumulator
from lakelog.client.batch import ProducerBatch, settle_error
from lakelog.client.connection import Connection
from lakelog.client.offsets import topic_path
from lakelog.client.retry import Backoff
from lakelog.client.structs import RecordMetadata
from lakelog.client.wire import EncodedProduce, WireFormat, encode_produce
from lakelog.errors import LakelogError, RequestTimedOutError, UnknownServerError

log = logging.getLogger(__name__)

Acks = Literal["0", "1", "all"]

#: With ``wire_format="auto"``, requests at least this large go as Arrow IPC.
ARROW_MIN_BYTES = 32 * 1024


class Sender:
    """Delivers the accumulator's batches: one thread forming them, a pool sending them."""

    def __init__(
        self,
        accumulator: RecordAccumulator,
        connection: Connection,
        *,
        acks: Acks,
        retries: int,
        backoff: Backoff,
        request_timeout_s: float,
        wire_format: WireFormat | Literal["auto"],
        io_threads: int,
    ) -> None:
        self._acc = accumulator
        self._conn = connection
        self._acks = acks
        self._retries = retries
        self._backoff = backoff
        self._request_timeout_s = request_timeout_s
        self._wire_format = wire_format
        self._pool = ThreadPoolExecutor(io_threads, thread_name_prefix="lakelog-producer-io")
        self._in_flight: set[ProducerBatch] = set()
        self._in_flight_lock = threading.Lock()
        self._abort = threading.Event()
        self._abort_error: LakelogError = RequestTimedOutError("the producer was closed")
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="lakelog-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- the sender thread -------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # never leave futures hanging on a bug
            log.exception("producer sender thread failed")
            self.abort(UnknownServerError(f"producer sender thread failed: {exc!r}"))

    def _loop(self) -> None:
        acc = self._acc
        while True:
            with acc.cond:
                while True:
                    if self._abort.is_set() or (self._stopping and acc.idle()):
                        return
                    now = time.monotonic()
                    expired = acc.expire(now)
                    batches, wake = acc.drain(now)
                    if expired or batches:
                        with self._in_flight_lock:  # under cond, so abort() sees them
                            self._in_flight.update(batches)
                        break
                    deadline = acc.next_deadline()
                    times = [t for t in (wake, deadline) if t is not None]
                    acc.cond.wait(max(min(times) - now, 0.001) if times else None)
            for pending in expired:
                settle_error(
                    pending.future,
                    RequestTimedOutError(
                        "record expired in the producer's queue: delivery_timeout_ms passed "
                        "before it could be sent (an earlier request to the topic kept failing)"
                    ),
                )
            for batch in batches:
                try:
                    self._pool.submit(self._deliver, batch)
                except RuntimeError:  # the pool was shut down by a forced close
                    with self._in_flight_lock:
                        self._in_flight.discard(batch)
                    batch.fail(self._abort_error)
                    self._acc.batch_done(batch, failed=True)

    # -- I/O threads -----------------------------------------------------------

    def _deliver(self, batch: ProducerBatch) -> None:
        delivered = False
        try:
            delivered = self._attempt_until_done(batch)
        except BaseException as exc:  # a bug must still settle the futures
            log.exception("producer batch for %s failed unexpectedly", batch.topic)
            batch.fail(exc)
        finally:
            with self._in_flight_lock:
                self._in_flight.discard(batch)
            self._acc.batch_done(batch, failed=not delivered)

    def _encode(self, batch: ProducerBatch) -> EncodedProduce:
        if batch.encoded is None:
            fmt: WireFormat
            if self._wire_format == "auto":
                fmt = "arrow" if batch.size >= ARROW_MIN_BYTES else "json"
            else:
                fmt = self._wire_format
            records = [p.record for p in batch.records]
            batch.encoded = encode_produce(
                records, fmt, self._acks, batch.producer_id, batch.base_sequence
            )
        return batch.encoded

    def _attempt_until_done(self, batch: ProducerBatch) -> bool:
        """Send until success, a non-retriable error, retries, or the delivery timeout run out."""
        encoded = self._encode(batch)
        path = f"{topic_path(batch.topic)}/records"
        last: LakelogError | None = None
        while True:
            if self._abort.is_set():
                batch.fail(self._abort_error)  # no-op if abort() got to it first
                return False
            remaining = batch.deadline - time.monotonic()
            if remaining <= 0:
                error = RequestTimedOutError(
                    f"{len(batch.records)} record(s) for topic {batch.topic!r} expired: "
                    f"delivery_timeout_ms passed after {batch.attempts} attempt(s); "
                    f"last error: {last}"
                )
                error.__cause__ = last
                batch.fail(error)
                return False
            batch.attempts += 1
            try:
                response = self._conn.request(
                    "POST",
                    path,
                    params=encoded.params,
                    content=encoded.body,
                    headers={"Content-Type": encoded.content_type},
                    timeout_s=min(self._request_timeout_s, remaining),
                )
            except LakelogError as exc:
                last = exc
                if not exc.retriable or batch.attempts > self._retries:
                    batch.fail(exc)
                    return False
                delay = self._backoff.delay_s(batch.attempts)
                log.info(
                    "produce to %s failed (attempt %d, retrying in %.0f ms): %s",
                    batch.topic,
                    batch.attempts,
                    delay * 1000,
                    exc,
                )
                self._abort.wait(min(delay, max(batch.deadline - time.monotonic(), 0)))
                continue
            return self._settle(batch, response)

    def _settle(self, batch: ProducerBatch, response: httpx.Response) -> bool:
        try:
            metadata = self._metadata(batch, response.json())
        except (ValueError, KeyError, TypeError) as exc:
            batch.fail(UnknownServerError(f"unreadable produce response: {exc}"))
            return False
        if batch.complete(metadata) and batch.attempts > 1:
            log.info("produce to %s delivered after %d attempts", batch.topic, batch.attempts)
        return True

    def _metadata(self, batch: ProducerBatch, body: dict[str, object]) -> list[RecordMetadata]:
        topic = batch.topic
        if self._acks == "0":
            return [
                RecordMetadata(
                    topic,
                    -1 if p.record.partition is None else p.record.partition,
                    -1,
                    -1 if p.record.timestamp_ms is None else p.record.timestamp_ms,
                )
                for p in batch.records
            ]
        rows = body["records"]
        if not isinstance(rows, list) or len(rows) != len(batch.records):
            raise ValueError(f"expected {len(batch.records)} record offsets, got {rows!r:.200}")
        return [
            RecordMetadata(topic, int(r["partition"]), int(r["offset"]), int(r["timestamp_ms"]))
            for r in rows
        ]

    # -- shutdown --------------------------------------------------------------

    def stop(self, timeout_s: float | None = None) -> None:
        """End the sender thread once nothing is queued or in flight."""
        with self._acc.cond:
            self._stopping = True
            self._acc.cond.notify_all()
        self._thread.join(timeout_s)
        self._pool.shutdown(wait=not self._abort.is_set())

    def abort(self, error: LakelogError) -> None:
        """Fail everything queued or in flight with ``error`` and stop retrying."""
        self._abort_error = error
        self._abort.set()
        with self._acc.cond:
            queued = self._acc.take_all()
            with self._in_flight_lock:
                in_flight = list(self._in_flight)
        for pending in queued:
            settle_error(pending.future, error)
        for batch in in_flight:
            batch.fail(error)


__all__ = ["ARROW_MIN_BYTES", "Acks", "Sender"]
