"""The committed-offsets store: the compacted ``_consumer_offsets`` topic table.

An ordinary compacted lakelog topic (``__consumer_offsets``, its table at
``_consumer_offsets/``); reading folds records into the latest value per key,
exactly what compaction keeps, and incrementally per partition. The store is
its only writer (``lakelog.internal_topics``). A record it cannot decode is
skipped with a warning naming it, so one bad record never hides the other
groups; ``lakelog doctor --repair`` removes such records.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lakelog.catalog import META_TOPICS, Catalog, TopicPointer
from lakelog.delta.log import DeltaLog
from lakelog.errors import CorruptRecordError, LakelogError, UnknownTopicOrPartitionError
from lakelog.groups.codec import (
    DEFAULT_OFFSETS_PARTITIONS,
    OFFSETS_TABLE,
    OFFSETS_TOPIC,
    CommittedOffset,
    OffsetKey,
    decode_record,
    encode_key,
    encode_value,
    offsets_partition,
)
from lakelog.internal_topics import issue_writer
from lakelog.produce import PreparedBatch
from lakelog.records import Record
from lakelog.storage import join
from lakelog.structs import TopicPartition
from lakelog.topic_config import TopicConfig
from lakelog.topic_log import AppendResult, TopicLog
from lakelog.topic_table import create_table_actions

#: One group's commit: partition -> new value (None deletes the committed offset).
GroupOffsets = Mapping[TopicPartition, CommittedOffset | None]

_READ_RECORDS = 10_000
_READ_BYTES = 64 << 20
#: The store's right to append to the offsets table; nothing else holds one.
_WRITER = issue_writer(OFFSETS_TOPIC)

log = logging.getLogger(__name__)


@dataclass
class _PartitionView:
    """The latest value per key of one offsets partition, folded up to ``position``."""

    position: int = 0
    latest: dict[OffsetKey, CommittedOffset] = field(default_factory=dict)


class OffsetsStore:
    """Commit, fetch and delete committed offsets in the root's offsets table. Thread-safe."""

    def __init__(self, catalog: Catalog, num_partitions: int = DEFAULT_OFFSETS_PARTITIONS) -> None:
        self.catalog = catalog
        self.num_partitions = num_partitions
        self._lock = threading.Lock()
        self._create_lock = threading.Lock()
        self._views: dict[tuple[str, int], _PartitionView] = {}

    # -- the table -------------------------------------------------------------

    def table(self, create: bool = False) -> TopicLog | None:
        """The offsets table's log; None if it does not exist and ``create`` is False."""
        try:
            return self.catalog.topic(OFFSETS_TOPIC)
        except UnknownTopicOrPartitionError:
            if not create:
                return None
        with self._create_lock:
            self._create()
        return self.catalog.topic(OFFSETS_TOPIC)

    def _create(self) -> None:
        """Create the table, then its topic pointer, both put-if-absent: of racing brokers
        a loser uses what the winner wrote."""
        storage = self.catalog.storage
        now = int(time.time() * 1000)
        config = TopicConfig({"cleanup.policy": "compact"})
        actions = create_table_actions(
            OFFSETS_TOPIC, uuid.uuid4(), self.num_partitions, config, now
        )
        delta = DeltaLog(storage, OFFSETS_TABLE)
        delta.try_commit(0, actions)
        # The table of whoever won version 0: its id is the topic id.
        metadata = delta.load().metadata
        if metadata is None:
            raise UnknownTopicOrPartitionError(f"topic {OFFSETS_TOPIC!r} has no Delta metadata")
        pointer = TopicPointer(
            OFFSETS_TOPIC, metadata.table_id.replace("-", ""), OFFSETS_TABLE, now
        )
        storage.put_if_absent(join(META_TOPICS, f"{OFFSETS_TOPIC}.json"), pointer.to_bytes())

    # -- writing ---------------------------------------------------------------

    def _writable(self) -> TopicLog:
        topic_log = self.table(create=True)
        assert topic_log is not None
        return topic_log

    def prepare(
        self, group_id: str, offsets: GroupOffsets, now_ms: int
    ) -> tuple[TopicLog, PreparedBatch]:
        """One group's commit validated for a group commit (``append_prepared``) of the table."""
        topic_log = self._writable()
        records = _records(topic_log, group_id, offsets, now_ms)
        return topic_log, topic_log.prepare(records, writer=_WRITER)

    def commit_many(
        self, commits: Sequence[tuple[str, GroupOffsets]], now_ms: int | None = None
    ) -> AppendResult:
        """Many groups' commits as ONE Delta commit; durable when this returns."""
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        topic_log = self._writable()
        records = [
            r for group, offsets in commits for r in _records(topic_log, group, offsets, now)
        ]
        (result,) = topic_log.append_prepared([topic_log.prepare(records, writer=_WRITER)])
        if isinstance(result, LakelogError):
            raise result
        return result

    def commit(self, group_id: str, offsets: GroupOffsets, now_ms: int | None = None) -> None:
        self.commit_many([(group_id, offsets)], now_ms)

    def delete_group(self, group_id: str, now_ms: int | None = None) -> int:
        """Tombstone every committed offset of the group; returns how many there were."""
        current = self.fetch(group_id)
        if current:
            self.commit(group_id, dict.fromkeys(current), now_ms)
        return len(current)

    # -- reading ---------------------------------------------------------------

    def fetch(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets as of the table's latest version."""
        topic_log = self.table()
        if topic_log is None:
            return {}
        topic_log.refresh()
        view = self._catch_up(topic_log, offsets_partition(group_id, topic_log.num_partitions))
        return {
            TopicPartition(k.topic, k.partition): v
            for k, v in view.items()
            if k.group_id == group_id
        }

    def groups(self) -> set[str]:
        """Every group with at least one committed offset."""
        topic_log = self.table()
        if topic_log is None:
            return set()
        topic_log.refresh()
        found: set[str] = set()
        for partition in range(topic_log.num_partitions):
            found.update(k.group_id for k in self._catch_up(topic_log, partition))
        return found

    def _catch_up(self, topic_log: TopicLog, partition: int) -> dict[OffsetKey, CommittedOffset]:
        """Fold the partition's records since the last call; returns a copy of the view."""
        with self._lock:
            key = (topic_log.topic_id, partition)
            view = self._views.setdefault(key, _PartitionView())
            start = topic_log.log_start_offset(partition)
            end = topic_log.high_watermark(partition)
            if view.position < start or view.position > end:
                view.position, view.latest = start, {}
            while view.position < end:
                fetched = topic_log.read(partition, view.position, _READ_RECORDS, _READ_BYTES)
                records = fetched.records
                _fold(
                    view.latest,
                    partition,
                    records.column("offset").to_pylist(),
                    records.column("key").to_pylist(),
                    records.column("value").to_pylist(),
                )
                if fetched.next_offset <= view.position:
                    break
                view.position = fetched.next_offset
            return dict(view.latest)


def _records(
    topic_log: TopicLog, group_id: str, offsets: GroupOffsets, now_ms: int
) -> list[Record]:
    """The table records of one group's commit (a None value is a tombstone)."""
    partition = offsets_partition(group_id, topic_log.num_partitions)
    return [
        Record(
            value=encode_value(value),
            key=encode_key(OffsetKey(group_id, tp.topic, tp.partition)),
            timestamp_ms=now_ms,
            partition=partition,
        )
        for tp, value in offsets.items()
    ]


def _fold(
    latest: dict[OffsetKey, CommittedOffset],
    partition: int,
    offsets: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
) -> None:
    """Fold the records into ``latest``; one that does not decode is logged and skipped."""
    for offset, key, value in zip(offsets, keys, values, strict=True):
        try:
            offset_key, committed = decode_record(key, value)
        except CorruptRecordError as exc:
            log.warning(
                "skipping record of topic %s partition %d offset %d: %s "
                "(lakelog doctor --repair removes it)",
                OFFSETS_TOPIC,
                partition,
                offset,
                exc.message,
            )
            continue
        if committed is None:
            latest.pop(offset_key, None)
        else:
            latest[offset_key] = committed
