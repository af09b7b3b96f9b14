"""The consumer: read assigned partitions from a position, with long polls and offset reset.

Manual assignment only for now (``assign``), as with Kafka's consumer
without a group. The parts a group coordinator will need are already
separate: ``SubscriptionState.assign`` is what a rebalance calls, and
``_initialize_positions`` is where committed offsets will be looked up before
the ``auto_offset_reset`` policy is applied. ``subscribe`` and ``commit`` do
not exist yet rather than pretending to work.

Like Kafka's consumer it is not thread-safe: use it from one thread.
Positions only advance over records ``poll`` has returned.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import httpx

from lakelog.client.connection import Connection
from lakelog.client.errors import NoOffsetForPartitionError
from lakelog.client.fetcher import Fetcher
from lakelog.client.offsets import OffsetAndTimestamp, OffsetSpec, list_offset
from lakelog.client.retry import Backoff, call_with_retries
from lakelog.client.structs import TopicPartition
from lakelog.client.subscription import ResetPolicy, SubscriptionState
from lakelog.client.wire import WireFormat
from lakelog.records import ConsumerRecord

#: The brokers' default cap on a long poll (``fetch_max_wait_ms`` broker setting).
BROKER_MAX_WAIT_MS = 30_000


class Consumer:
    """Reads records of assigned partitions.

    ``auto_offset_reset`` decides where a partition without a position starts,
    and where a position outside the log (OFFSET_OUT_OF_RANGE) goes:
    ``earliest``, ``latest`` (Kafka's default), or ``none`` to raise instead.
    ``fetch_max_wait_ms`` is how long one fetch may wait on the broker for
    records (capped by the poll's timeout). ``fetch_format="arrow"`` moves
    records as Arrow IPC; ``"json"`` as base64 JSON.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        auto_offset_reset: ResetPolicy = "latest",
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1 << 20,
        max_poll_records: int = 500,
        request_timeout_ms: int = 30_000,
        default_api_timeout_ms: int = 60_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        fetch_format: WireFormat = "arrow",
        fetch_threads: int = 8,
        connection: Connection | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto_offset_reset must be earliest, latest or none: {auto_offset_reset!r}"
            )
        if not 0 <= fetch_max_wait_ms <= BROKER_MAX_WAIT_MS:
            raise ValueError(f"fetch_max_wait_ms must be in 0..{BROKER_MAX_WAIT_MS}")
        if max_poll_records < 1 or max_partition_fetch_bytes < 1:
            raise ValueError("max_poll_records and max_partition_fetch_bytes must be positive")
        self._owns_connection = connection is None
        self._conn = connection or Connection(
            bootstrap_servers, request_timeout_ms=request_timeout_ms, transport=transport
        )
        self._subs = SubscriptionState(auto_offset_reset)
        self._backoff = Backoff(retry_backoff_ms, retry_backoff_max_ms)
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._max_poll_records = max_poll_records
        self._api_timeout_ms = default_api_timeout_ms
        self._fetcher = Fetcher(
            self._conn,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            max_records=max_poll_records,
            fetch_format=fetch_format,
            request_timeout_s=request_timeout_ms / 1000,
            backoff=self._backoff,
            threads=fetch_threads,
        )
        self._closed = False

    @property
    def connection(self) -> Connection:
        return self._conn

    # -- assignment ------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replacing any previous assignment)."""
        self._check_open()
        self._subs.assign(partitions)
        self._fetcher.forget(set(self._subs.assigned()))

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assigned())

    def unassign(self) -> None:
        self.assign([])

    # -- positions -------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Read ``tp`` from ``offset`` on the next poll (OFFSET_OUT_OF_RANGE resets it)."""
        self._subs.seek(TopicPartition(*tp), offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move to the log start of these partitions (all assigned if none given), lazily."""
        for tp in partitions or tuple(self._subs.assigned()):
            self._subs.request_reset(TopicPartition(*tp), "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move to the high watermark of these partitions (all if none given), lazily."""
        for tp in partitions or tuple(self._subs.assigned()):
            self._subs.request_reset(TopicPartition(*tp), "latest")

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record ``poll`` returns for ``tp`` (resolving it if needed)."""
        tp = TopicPartition(*tp)
        if self._subs.position(tp) is None:
            self._initialize_positions([tp])
        position = self._subs.position(tp)
        assert position is not None
        return position

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark seen in the last fetch of ``tp`` (None before one)."""
        return self._subs.high_watermark(TopicPartition(*tp))

    def _initialize_positions(self, partitions: Iterable[TopicPartition]) -> None:
        """Give partitions without a position one: an explicit seek target, else the policy.

        A group coordinator will look up committed offsets here first.
        """
        for tp in partitions:
            target = self._subs.reset_target(tp)
            if target == "none":
                raise NoOffsetForPartitionError(
                    f"no position for {tp} and auto_offset_reset='none': seek first",
                    topic=tp.topic,
                    partition=tp.partition,
                )
            found = self._list_offset(tp, target)
            self._subs.seek(tp, found.offset)

    def _list_offset(self, tp: TopicPartition, spec: OffsetSpec) -> OffsetAndTimestamp:
        return call_with_retries(
            lambda: list_offset(self._conn, tp, spec),
            backoff=self._backoff,
            timeout_ms=self._api_timeout_ms,
        )

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition (assigned or not)."""
        return {tp: self._list_offset(tp, "earliest").offset for tp in map(_tp, partitions)}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark (offset of the next record written) of each partition."""
        return {tp: self._list_offset(tp, "latest").offset for tp in map(_tp, partitions)}

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset at or after each timestamp; None where no record is that new."""
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, ts in timestamps.items():
            found = self._list_offset(_tp(tp), ts)
            out[_tp(tp)] = found if found.timestamp_ms is not None else None
        return out

    # -- pause -----------------------------------------------------------------

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning and fetching these partitions until ``resume``; positions stay."""
        for tp in partitions:
            self._subs.pause(_tp(tp))

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subs.resume(_tp(tp))

    def paused(self) -> set[TopicPartition]:
        return self._subs.paused()

    # -- poll ------------------------------------------------------------------

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned, unpaused partitions; waits up to ``timeout_ms`` for some.

        Returns as soon as any partition has records. Raises OFFSET_OUT_OF_RANGE
        (policy ``none``), NoOffsetForPartitionError, and non-retriable broker
        errors such as UNKNOWN_TOPIC_OR_PARTITION; retriable ones are retried.
        """
        self._check_open()
        limit = max_records or self._max_poll_records
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            self._initialize_positions(self._subs.missing_positions())
            self._fetcher.collect(self._subs)
            records = self._fetcher.drain(self._subs, limit)
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if records:
                self._fetcher.send(self._subs, self._fetch_max_wait_ms)  # prefetch the next
                return records
            self._fetcher.send(self._subs, min(self._fetch_max_wait_ms, max(remaining_ms, 0)))
            if remaining_ms <= 0:
                return {}
            self._fetcher.wait(remaining_ms / 1000)

    # -- lifecycle -------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the consumer is closed")

    def close(self) -> None:
        """Stop fetching; outstanding long polls are abandoned. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._fetcher.close()
        if self._owns_connection:
            self._conn.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tp(tp: TopicPartition) -> TopicPartition:
    return TopicPartition(*tp)


__all__ = ["Consumer"]
