"""The producer: ``send()`` returns a future at once; a background sender delivers in batches.

Defaults follow Kafka's (``acks="all"``, idempotence, retries bounded by
``delivery_timeout_ms``), but a request carries one topic's records for any
partitions (the broker partitions keyed records with murmur2), so
``batch_size`` and ``linger_ms`` apply per topic. With idempotence each record
is written at most once however its request is retried, and each partition
keeps send order. Every future is settled, by metadata, an error, or
REQUEST_TIMED_OUT. A request fails as a whole: a record the broker rejects
fails the others batched with it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Literal

import httpx

from lakelog.client.accumulator import RecordAccumulator
from lakelog.client.batch import PendingRecord
from lakelog.client.connection import ClientBase, Connection
from lakelog.client.retry import Backoff
from lakelog.client.sender import Acks, Sender
from lakelog.client.structs import RecordMetadata
from lakelog.client.wire import WireFormat, record_size
from lakelog.errors import MessageTooLargeError, RequestTimedOutError
from lakelog.records import Record

log = logging.getLogger(__name__)

#: The last millisecond of year 9999: the latest timestamp a record can carry.
MAX_TIMESTAMP_MS = 253_402_300_799_999

Serializer = Callable[[Any], bytes | None]
DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], None]
HeaderInput = Sequence[tuple[str, bytes | str | None]]


def _to_bytes(data: object, what: str) -> bytes | None:
    """Bytes as given; str as UTF-8; anything else needs a serializer."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode()
    raise TypeError(
        f"{what} must be bytes, str or None without a {what}_serializer, got {type(data).__name__}"
    )


def _header_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"header keys must be str, got {type(key).__name__}")
    return key


def _normalise_acks(acks: str | int) -> Acks:
    text = str(acks).strip().lower()
    if text in ("all", "-1"):
        return "all"
    if text in ("0", "1"):
        return "1" if text == "1" else "0"
    raise ValueError(f"acks must be 0, 1 or 'all', got {acks!r}")


class Producer(ClientBase):
    """Thread-safe; share one per process. Use as a context manager or call ``close()``.

    ``enable_idempotence=None`` means on unless ``acks`` is not ``"all"`` (as in
    Kafka); asking for it explicitly with other acks is an error. ``batch_size``
    and ``max_request_size`` are bytes of keys, values and headers.
    ``wire_format="auto"`` sends small requests as JSON and large ones as
    Arrow IPC. ``connection`` lets clients share one, ``transport`` replaces
    httpx's network layer (tests).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        acks: str | int = "all",
        linger_ms: float = 5,
        batch_size: int = 16_384,
        max_request_size: int = 1 << 20,
        buffer_memory: int = 32 << 20,
        max_block_ms: int = 60_000,
        retries: int = 2**31 - 1,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        request_timeout_ms: int = 30_000,
        delivery_timeout_ms: int = 120_000,
        enable_idempotence: bool | None = None,
        max_in_flight_requests_per_topic: int = 1,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
        wire_format: WireFormat | Literal["auto"] = "auto",
        io_threads: int = 8,
        connection: Connection | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.acks = _normalise_acks(acks)
        if enable_idempotence is None:
            enable_idempotence = self.acks == "all"
        elif enable_idempotence and self.acks != "all":
            raise ValueError("enable_idempotence=True needs acks='all'")
        if enable_idempotence and max_in_flight_requests_per_topic != 1:
            raise ValueError(
                "with idempotence a topic has one request in flight (a later request must "
                "never overtake a retried one); set enable_idempotence=False for more"
            )
        if max_in_flight_requests_per_topic < 1 or io_threads < 1:
            raise ValueError("max_in_flight_requests_per_topic and io_threads must be >= 1")
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ValueError("delivery_timeout_ms must be >= linger_ms + request_timeout_ms")
        if batch_size < 1 or max_request_size < 1 or buffer_memory < 1:
            raise ValueError("batch_size, max_request_size and buffer_memory must be positive")
        self.enable_idempotence = enable_idempotence
        self._max_request_size = max_request_size
        self._buffer_memory = buffer_memory
        self._max_block_s = max_block_ms / 1000
        self._delivery_timeout_s = delivery_timeout_ms / 1000
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        super().__init__(bootstrap_servers, connection, request_timeout_ms, transport)
        self._accumulator = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=linger_ms,
            max_request_size=max_request_size,
            buffer_memory=buffer_memory,
            idempotent=enable_idempotence,
            max_in_flight_per_topic=max_in_flight_requests_per_topic,
        )
        self._sender = Sender(
            self._accumulator,
            self._conn,
            acks=self.acks,
            retries=retries,
            backoff=Backoff(retry_backoff_ms, retry_backoff_max_ms),
            request_timeout_s=request_timeout_ms / 1000,
            wire_format=wire_format,
            io_threads=io_threads,
        )
        self._incomplete: set[Future[RecordMetadata]] = set()
        self._incomplete_lock = threading.Lock()
        self._closed = False
        self._sender.start()

    def producer_id(self, topic: str) -> int | None:
        """The producer id the topic's next request will carry (None before the first)."""
        return self._accumulator.producer_id(topic)

    def send(
        self,
        topic: str,
        value: object = None,
        key: object = None,
        *,
        partition: int | None = None,
        headers: HeaderInput | None = None,
        timestamp_ms: int | None = None,
        callback: DeliveryCallback | None = None,
    ) -> Future[RecordMetadata]:
        """Queue a record; the future resolves to where it was written.

        ``partition=None`` lets the broker choose (murmur2 of the key, else its
        sticky partition). ``callback(metadata, error)`` runs once on a producer
        thread, in send order per partition; it must not call ``flush`` or
        ``close`` (they would wait on its own thread). Blocks only while the
        buffer is full (up to ``max_block_ms``, then BufferError).
        """
        if self._closed:
            raise RuntimeError("the producer is closed")
        if not topic:
            raise ValueError("topic must be a non-empty string")
        if partition is not None and partition < 0:
            raise ValueError(f"partition must be >= 0, got {partition}")
        if timestamp_ms is not None and not 0 <= timestamp_ms <= MAX_TIMESTAMP_MS:
            # Refused here, not by the broker, where it would fail the whole request.
            raise ValueError(f"timestamp_ms must be in 0..{MAX_TIMESTAMP_MS}, got {timestamp_ms}")
        key_bytes = self._key_serializer(key) if self._key_serializer else _to_bytes(key, "key")
        value_bytes = (
            self._value_serializer(value) if self._value_serializer else _to_bytes(value, "value")
        )
        record = Record(
            value=value_bytes,
            key=key_bytes,
            timestamp_ms=int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
            headers=tuple((_header_key(k), _to_bytes(v, "header")) for k, v in headers or ()),
            partition=partition,
        )
        future: Future[RecordMetadata] = Future()
        future.set_running_or_notify_cancel()  # delivery cannot be cancelled, as in Kafka
        size = record_size(record)
        if size > min(self._max_request_size, self._buffer_memory):
            self._track(future, callback)
            future.set_exception(
                MessageTooLargeError(
                    f"record of {size} bytes is larger than max_request_size="
                    f"{self._max_request_size} or buffer_memory={self._buffer_memory}"
                )
            )
            return future
        pending = PendingRecord(record, future, size, time.monotonic() + self._delivery_timeout_s)
        self._accumulator.append(topic, pending, self._max_block_s)
        self._track(future, callback)
        return future

    def _track(self, future: Future[RecordMetadata], callback: DeliveryCallback | None) -> None:
        """Count the future as unsettled for flush/close; hook the delivery callback."""
        with self._incomplete_lock:
            self._incomplete.add(future)
        future.add_done_callback(self._forget)  # runs at once if already settled
        if callback is not None:
            future.add_done_callback(_callback_adapter(callback))

    def _forget(self, future: Future[RecordMetadata]) -> None:
        with self._incomplete_lock:
            self._incomplete.discard(future)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until every record sent so far is settled
        (failed ones too: check the futures); TimeoutError after ``timeout`` seconds."""
        with self._incomplete_lock:
            waiting = list(self._incomplete)
        self._accumulator.begin_flush()
        try:
            _, not_done = concurrent.futures.wait(waiting, timeout)
        finally:
            self._accumulator.end_flush()
        if not_done:
            raise TimeoutError(f"flush: {len(not_done)} record(s) unsettled after {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout`` seconds), then stop; idempotent.

        What is still unsettled then fails with REQUEST_TIMED_OUT, so every
        future is done when ``close`` returns.
        """
        if self._closed:
            return
        self._closed = True
        self._accumulator.close()
        with self._incomplete_lock:
            waiting = list(self._incomplete)
        _, not_done = concurrent.futures.wait(waiting, timeout)
        if not_done:
            self._sender.abort(
                RequestTimedOutError(
                    f"the producer was closed with {len(not_done)} record(s) unconfirmed after "
                    f"{timeout} s; they may or may not have been written"
                )
            )
        self._sender.stop(timeout_s=None if not not_done else 1.0)
        super().close()


def _callback_adapter(callback: DeliveryCallback) -> Callable[[Future[RecordMetadata]], None]:
    def on_done(future: Future[RecordMetadata]) -> None:
        error = future.exception()
        callback(None if error is not None else future.result(), error)

    return on_done


__all__ = ["DeliveryCallback", "Producer", "Serializer"]
