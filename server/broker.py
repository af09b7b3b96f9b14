"""The broker service: what the HTTP routes call. One per process, injected into routes.

It owns the catalog of the storage root, the produce batcher, the cache of
recent batches and the long-poll machinery. All blocking storage work runs on
worker threads so the event loop keeps accepting requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import weakref
from collections import defaultdict
from typing import Literal

import pyarrow as pa

from lakelog.catalog import Catalog
from lakelog.delta.checkpoint_process import CheckpointProcess
from lakelog.errors import (
    InvalidRecordError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    LakelogError,
    SchemaValidationError,
)
from lakelog.fetch import FetchResult, limit_bytes
from lakelog.internal_topics import check_append
from lakelog.produce import PreparedBatch, RecordCheck
from lakelog.produce_batch import ProduceBatch, ProduceInput
from lakelog.producer_ids import ProducerIdAllocator
from lakelog.storage import open_storage
from lakelog.topic_log import AppendResult, TopicLog
from server.batcher import ProduceBatcher
from server.commit_leader.handoff import HandoffClient
from server.commit_leader.router import CommitRouter
from server.groups.service import GroupService
from server.loop_lag import LoopLagMonitor
from server.metrics import BrokerMetrics, TopicCommitCollector
from server.peer_tls import peer_tls_context
from server.recent_batches import RecentBatches
from server.registry import BrokerRegistry
from server.schema_registry.dead_letters import dead_letter_batch, merge_results
from server.schema_registry.registry import SchemaRegistry
from server.schema_registry.typed_columns import RegistryColumns
from server.schema_registry.validation import Problem, SchemaValidator
from server.settings import BrokerSettings

log = logging.getLogger(__name__)

Acks = Literal[0, 1, -1]
#: How long a broker waits for a commit leader's answer to a handoff.
HANDOFF_TIMEOUT_S = 60.0
OffsetSpec = int | Literal["earliest", "latest"]


_ACKS: dict[str, Acks] = {"all": -1, "-1": -1, "1": 1, "0": 0}


def parse_acks(value: str | int | None) -> Acks:
    """Kafka's acks: 0, 1, all (= -1). 1 and all both wait for the durable commit."""
    if value is None:
        return -1
    acks = _ACKS.get(str(value).strip().lower())
    if acks is None:
        raise InvalidRequiredAcksError(f"acks must be 0, 1 or all, got {value!r}")
    return acks


def _checked(problems: list[Problem], *_: object) -> list[Problem]:
    """A ``RecordCheck`` answering with the findings of a check already made."""
    return problems


class Broker:
    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.storage = open_storage(settings.root)
        self.checkpoints: CheckpointProcess | None = None
        if settings.checkpoint_process and not self.storage.process_local:
            self.checkpoints = CheckpointProcess(self.storage)
        self.catalog = Catalog(
            self.storage,
            checkpoint_interval=settings.checkpoint_interval,
            checkpointer=self.checkpoints,
        )
        self.metrics = BrokerMetrics(
            TopicCommitCollector(self.catalog.topic_opens, self.catalog.commit_stats)
        )
        self.cache = RecentBatches(settings.fetch_cache_bytes)
        self.registry = BrokerRegistry(self.storage, settings)
        self.groups = GroupService(settings, self.storage, self.catalog, self.registry)
        #: Kafka's InitProducerId: blocks of ids claimed in storage, unique across brokers.
        self.producer_ids = ProducerIdAllocator(self.storage, settings.broker_id)
        #: Confluent's Schema Registry, its state in the root: shared by every broker on it.
        self.schema_registry = SchemaRegistry(
            self.storage, max_schema_bytes=settings.schema_registry_max_schema_bytes
        )
        #: Validation on produce: each topic's ``record_check`` (set in ``topic``).
        self.schema_validator = SchemaValidator(self.schema_registry)
        #: Typed columns of validated keys and values, decoded where rows are staged.
        self.typed_columns = RegistryColumns(self.schema_registry.schema_by_id)
        self.metrics.live_brokers.set_function(lambda: len(self.groups.live_brokers()))
        self._loop_lag = LoopLagMonitor(self.metrics.loop_lag)
        self.commit_router = self._commit_router()
        self.batcher = ProduceBatcher(
            settings,
            on_commit=self.metrics.observe_commit,
            router=self.commit_router,
            on_phase=self.metrics.observe_commit_phase,
        )
        # The TopicLog itself, not its id(): a recreated topic's log may reuse a freed id and
        # must still be wired. Weak: a replaced log closes once no request holds it.
        self._wired: dict[str, weakref.ref[TopicLog]] = {}
        self._waiters: dict[tuple[str, int], set[asyncio.Event]] = defaultdict(set)
        self._refresh_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        #: When each topic's last refresh started, and when it was last known to be stale.
        self._refreshed_at: dict[str, float] = {}
        self._stale_at: dict[str, float] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.started_ms = int(time.time() * 1000)

    def _commit_router(self) -> CommitRouter | None:
        """Handoffs to commit leaders, unless off, in-process only, or without a peer identity."""
        s = self.settings
        if not s.commit_handoff or self.storage.process_local:
            return None
        if s.auth_mode != "none" and s.peer_authorization is None:
            log.warning(
                "commit handoff is off: auth_mode=%s needs peer_authorization (a principal "
                "with CLUSTER_ACTION) for brokers to hand commits to each other",
                s.auth_mode,
            )
            return None
        client = HandoffClient(
            s.broker_id,
            HANDOFF_TIMEOUT_S,
            verify=peer_tls_context(s),
            authorization=s.peer_authorization.get_secret_value() if s.peer_authorization else None,
        )
        return CommitRouter(
            s.broker_id, self.groups.live_brokers, client, self.metrics, self._on_leader_commit
        )

    def commit_leader(self, topic: str) -> str | None:
        """The broker id that commits ``topic``; None when every broker commits its own."""
        return None if self.commit_router is None else self.commit_router.leader_id(topic)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_lag.start()
        if self.checkpoints is not None:
            self.checkpoints.start()
        await self.registry.start()
        await self.groups.start()
        try:
            # Read ahead so that the first schema look-ups by id answer from memory.
            await asyncio.to_thread(self.schema_registry.refresh)
        except (LakelogError, OSError) as exc:
            # Produce and fetch do not need the registry; its requests report the problem.
            log.warning("schema registry: could not read its log at start: %s", exc)

    async def stop(self) -> None:
        self._loop_lag.stop()
        await self.groups.stop()
        await self.batcher.close()
        if self.commit_router is not None:
            await self.commit_router.close()
        for task in list(self._background):
            await task
        await self.registry.stop()
        await asyncio.to_thread(self.catalog.close)
        if self.checkpoints is not None:
            await asyncio.to_thread(self.checkpoints.close)

    # -- topics ----------------------------------------------------------------

    async def topic(self, name: str) -> TopicLog:
        """The topic's log, wired to this broker's cache and long polls on first use."""
        topic_log = self.catalog.cached_topic(name)  # no thread hop while the pointer is fresh
        if topic_log is None:
            topic_log = await asyncio.to_thread(self.catalog.topic, name)
        wired = self._wired.get(name)
        if wired is None or wired() is not topic_log:
            self._wired[name] = weakref.ref(topic_log)
            self.cache.forget(name)
            topic_log.appender.add_listener(functools.partial(self._on_append, name))
            topic_log.record_check = self.schema_validator.check
            topic_log.appender.decoder = self.typed_columns
        return topic_log

    def _on_append(self, topic: str, partition: int, rows: pa.Table) -> None:
        """Runs on the committing thread right after a durable commit."""
        self.cache.add(topic, partition, rows)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake, topic, partition)

    def _on_leader_commit(self, topic: str, partitions: set[int]) -> None:
        """The commit leader committed this broker's records: the next look refreshes."""
        self._stale_at[topic] = time.monotonic()
        for partition in partitions:
            self._wake(topic, partition)

    def _wake(self, topic: str, partition: int) -> None:
        for event in self._waiters.get((topic, partition), ()):
            event.set()

    async def refresh(self, topic_log: TopicLog, max_age_s: float) -> None:
        """Look for other brokers' commits, at most once per ``max_age_s`` per topic.

        Sooner when a commit leader has committed this broker's records since the
        last refresh started: a producer reads its writes back through this broker.
        """
        name = topic_log.name
        async with self._refresh_locks[name]:
            started = time.monotonic()
            last = self._refreshed_at.get(name)
            if (
                last is not None
                and started - last < max_age_s
                and self._stale_at.get(name, float("-inf")) < last
            ):
                return
            await asyncio.to_thread(topic_log.refresh)
            self._refreshed_at[name] = started

    # -- produce ---------------------------------------------------------------

    async def submit(
        self,
        topic: str,
        records: ProduceInput,
        acks: Acks = -1,
        producer_id: int | None = None,
        base_sequence: int | None = None,
        sequence_partition: int | None = None,
        *,
        dead_letters: bool = True,
    ) -> asyncio.Future[AppendResult]:
        """Validate and queue for the next group commit; the future of the durable result.

        Requests submitted one after another commit in that order. An acks=0 failure is
        logged here (nobody waits for it). A write to an internal topic is refused before
        the lookup, so the refusal is the same whether or not the topic exists yet.

        On a topic that validates schemas, the records are checked first: here, where
        every id is in memory and its format checks a whole batch at once, else on a
        worker thread (a registry read, or decoding record by record), so neither holds
        up the event loop; ``prepare`` takes that check's findings. A refused batch goes,
        with a dead-letter topic configured, to that topic instead: its bad records
        there, the others here (``_dead_letter``).
        """
        check_append(topic, None)
        topic_log = await self.topic(topic)
        rows = ProduceBatch.of(records)
        config = topic_log.config
        checked: RecordCheck | None = None
        if config.validates_schemas:
            keys, values = rows.column("key"), rows.column("value")
            problems = self.schema_validator.check_in_memory(topic, config, keys, values)
            if problems is None:
                problems = await asyncio.to_thread(
                    self.schema_validator.check, topic, config, keys, values
                )
            checked = functools.partial(_checked, problems)
        try:
            batch = topic_log.prepare(
                rows,
                producer_id,
                base_sequence,
                sequence_partition=sequence_partition,
                record_check=checked,
            )
        except SchemaValidationError as refused:
            if not config.dead_letter_topic or producer_id is not None or not dead_letters:
                raise
            return await self._dead_letter(topic_log, rows, refused, acks)
        future = await self.batcher.submit(topic_log, batch)
        future.add_done_callback(functools.partial(self._produced, topic, batch.num_records, acks))
        return future

    async def _dead_letter(
        self, topic_log: TopicLog, rows: ProduceBatch, refused: SchemaValidationError, acks: Acks
    ) -> asyncio.Future[AppendResult]:
        """Store a refused batch's good records and send its bad ones to the topic's
        dead-letter topic (bytes unchanged, the reason in headers); one future for both.

        An idempotent producer's batch is refused whole instead: its sequence numbers
        cover every record, and the log would hold only some of them.
        """
        topic = topic_log.name
        target = topic_log.config.dead_letter_topic
        bad = dict(refused.refused)
        good = [i for i in range(rows.num_rows) if i not in bad]
        try:
            dead_future = await self.submit(
                target, dead_letter_batch(rows, bad, topic), acks, dead_letters=False
            )
        except LakelogError as exc:
            raise InvalidRecordError(
                f"{refused.message}; its dead-letter topic {target!r} refused it: {exc.message}"
            ) from exc
        futures = [dead_future]
        if good:
            # Checked already: these are the records the check let through.
            kept = topic_log.prepare(rows.take(good), record_check=functools.partial(_checked, []))
            futures.insert(0, await self.batcher.submit(topic_log, kept))
        loop = asyncio.get_running_loop()
        combined: asyncio.Future[AppendResult] = loop.create_future()

        def settle(_: object) -> None:
            if combined.done() or not all(f.done() for f in futures):
                return
            for f in futures:
                if f.cancelled():
                    combined.cancel()
                    return
                if f.exception() is not None:
                    combined.set_exception(f.exception())  # type: ignore[arg-type]
                    return
            kept_result = futures[0].result() if good else None
            combined.set_result(merge_results(rows.num_rows, good, kept_result))

        for f in futures:
            f.add_done_callback(settle)
        combined.add_done_callback(functools.partial(self._produced, topic, len(good), acks))
        return combined

    async def take_handoff(
        self, topic: str, batches: list[PreparedBatch]
    ) -> list[AppendResult | LakelogError | asyncio.Future[AppendResult]]:
        """Queue another broker's group, in order, for this broker's next group commit.

        Each request is checked against this broker's view of the topic (a peer's may be
        older); a refused one gets its error, the others the future of their outcome.
        """
        topic_log = await self.topic(topic)
        self.metrics.handoffs.labels(topic, "received").inc()
        taken: list[AppendResult | LakelogError | asyncio.Future[AppendResult]] = []
        for batch in batches:
            try:
                rows = ProduceBatch(batch.table.drop_columns(["timestamp_type"]))
                rows.check(topic, topic_log.num_partitions, topic_log.config)
                taken.append(await self.batcher.submit(topic_log, batch, handed_off=True))
            except LakelogError as exc:
                taken.append(exc)
        return taken

    def _produced(
        self, topic: str, records: int, acks: Acks, future: asyncio.Future[AppendResult]
    ) -> None:
        """Counts the records once durable (refusals and duplicate retries wrote nothing);
        an acks=0 caller is gone, so its failure must still reach operators."""
        if future.cancelled():
            return
        exc = future.exception()
        if exc is None:
            if not future.result().duplicate:
                self.metrics.records_in.labels(topic).inc(records)
        elif acks == 0:
            self.metrics.acks0_failures.inc()
            log.warning("acks=0 produce failed: %s", exc)

    # -- fetch -----------------------------------------------------------------

    async def resolve_offset(self, topic_log: TopicLog, partition: int, spec: OffsetSpec) -> int:
        if isinstance(spec, int):
            return spec
        await self.refresh(topic_log, self.settings.refresh_interval_ms / 1000)
        if spec == "earliest":
            return topic_log.log_start_offset(partition)
        return topic_log.high_watermark(partition)

    async def fetch(
        self,
        topic: str,
        partition: int,
        offset: OffsetSpec,
        max_records: int = 500,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
    ) -> FetchResult:
        """Records from ``offset``; if there are none yet, wait up to ``max_wait_ms`` for some.

        The high watermark answered is at most ``refresh_interval_ms`` old wherever the
        fetch reads: consumers compute their lag from it.
        """
        if max_wait_ms < 0 or max_wait_ms > self.settings.fetch_max_wait_ms:
            raise InvalidRequestError(
                f"max_wait_ms must be between 0 and {self.settings.fetch_max_wait_ms}"
            )
        topic_log = await self.fresh_topic(topic, partition)
        interval = self.settings.refresh_interval_ms / 1000
        position = await self.resolve_offset(topic_log, partition, offset)
        deadline = time.monotonic() + max_wait_ms / 1000
        while True:
            hwm = topic_log.high_watermark(partition)
            if position >= hwm:
                # Maybe another broker wrote more: look before answering or waiting.
                await self.refresh(topic_log, interval)
                hwm = topic_log.high_watermark(partition)
            if position != hwm or time.monotonic() >= deadline:
                result = await self._read(topic_log, partition, position, max_records, max_bytes)
                self.metrics.records_out.labels(topic).inc(result.records.num_rows)
                return result
            timeout = min(interval, deadline - time.monotonic())
            await self.wait_for_appends([(topic, partition)], timeout)

    async def _read(
        self, topic_log: TopicLog, partition: int, offset: int, max_records: int, max_bytes: int
    ) -> FetchResult:
        hwm = topic_log.high_watermark(partition)
        start = topic_log.log_start_offset(partition)
        if offset == hwm and start <= offset and max_records > 0 and max_bytes > 0:
            # Caught up: the read would find no segment at or past the high watermark.
            return FetchResult.nothing(partition, hwm, start, hwm)
        if start <= offset < hwm:
            # A commit can land between reading hwm and the cache; the answer never reaches
            # past the high watermark it reports.
            limit = min(max_records, hwm - offset)
            cached = self.cache.read(topic_log.name, partition, offset, limit, max_bytes)
            if cached is not None:
                cached = limit_bytes(cached, max_bytes)
                next_offset = int(cached.column("offset")[-1].as_py()) + 1
                return FetchResult(partition, cached, hwm, start, next_offset)
        return await asyncio.to_thread(topic_log.read, partition, offset, max_records, max_bytes)

    async def wait_for_appends(self, partitions: list[tuple[str, int]], timeout: float) -> None:
        """Until a commit this broker sees lands in any of ``partitions``, or ``timeout``."""
        if timeout <= 0:
            return
        event = asyncio.Event()
        for key in partitions:
            self._waiters[key].add(event)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        finally:
            for key in partitions:
                self._waiters[key].discard(event)
                if not self._waiters[key]:
                    del self._waiters[key]

    async def offset_for_time(
        self, topic: str, partition: int, timestamp_ms: int
    ) -> tuple[int, int] | None:
        """Kafka's ListOffsets by time: (offset, timestamp) of the first record at/after it;
        None when every record is older (Kafka answers offset -1 then)."""
        topic_log = await self.fresh_topic(topic, partition)
        return await asyncio.to_thread(topic_log.offset_for_timestamp, partition, timestamp_ms)

    async def offset_of_max_timestamp(self, topic: str, partition: int) -> tuple[int, int] | None:
        """Kafka's ListOffsets MAX_TIMESTAMP: (offset, timestamp) of the largest timestamp."""
        topic_log = await self.fresh_topic(topic, partition)
        return await asyncio.to_thread(topic_log.offset_of_max_timestamp, partition)

    async def fresh_topic(self, topic: str, partition: int) -> TopicLog:
        """The topic's log, ``partition`` checked, refreshed at most ``refresh_interval_ms`` ago."""
        topic_log = await self.topic(topic)
        topic_log.check_partition(partition)
        await self.refresh(topic_log, self.settings.refresh_interval_ms / 1000)
        return topic_log
