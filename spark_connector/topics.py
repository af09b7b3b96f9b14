"""The driver's view of the storage root: which partitions a subscription covers, and their state.

The only module of the read path that opens the catalog.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import pyarrow as pa

from lakelog.catalog import META_TOPICS, Catalog
from lakelog.errors import InvalidConfigError, UnknownTopicOrPartitionError
from lakelog.offset_index import Segment
from lakelog.structs import TopicPartition
from lakelog.typed_columns import TYPED_COLUMNS, typed_fields
from spark_connector.options import (
    Assign,
    StorageSpec,
    Subscribe,
    SubscribePattern,
    Subscription,
    option_error,
)
from spark_connector.planning import PartitionSnapshot


class TopicSource:
    """Topics of one root as seen by a reader on the driver. Not picklable; close when done."""

    def __init__(self, storage: StorageSpec) -> None:
        self.spec = storage
        self.catalog = Catalog(storage.open())

    def close(self) -> None:
        self.catalog.close()

    def check_root(self) -> list[str]:
        """The root's topics; a root that was never used by lakelog is an error naming ``root``."""
        topics = self.catalog.list_topics()
        if not topics and not self.catalog.storage.list_dir(META_TOPICS.split("/")[0]):
            raise option_error(
                "root",
                f"{self.spec.url!r} is not a lakelog storage root (it has no {META_TOPICS}); "
                "check the URL",
            )
        return topics

    def topics(self, subscription: Subscription) -> list[str]:
        """The topics a subscription names now, every one checked to exist."""
        existing = self.check_root()
        if isinstance(subscription, SubscribePattern):
            return [t for t in existing if subscription.matches(t)]
        if isinstance(subscription, Subscribe):
            option, names = "subscribe", list(subscription.topics)
        else:
            option, names = "assign", [t for t, _ in subscription.partitions]
        missing = [t for t in names if t not in existing]
        if missing:
            raise UnknownTopicOrPartitionError(
                f"option '{option}': topic {missing[0]!r} does not exist in {self.spec.url!r}"
                + (f" (topics there: {', '.join(existing)})" if len(existing) <= 20 else "")
            )
        return names

    def snapshots(
        self,
        subscription: Subscription,
        topics: Sequence[str] | None = None,
        *,
        segments: bool = True,
        segments_from: Mapping[TopicPartition, int] | None = None,
    ) -> list[PartitionSnapshot]:
        """Current state of every subscribed partition (topics refreshed first).

        ``segments=False``: no segments (log start and high watermark only);
        ``segments_from``: a partition's segments from the first that can hold
        that offset; so the cost does not grow with segments a read skips.
        """
        names = list(topics) if topics is not None else self.topics(subscription)
        assigned = subscription.as_dict() if isinstance(subscription, Assign) else {}
        wanted_from = segments_from or {}
        out = []
        for name in names:
            try:
                topic_log = self.catalog.topic(name)
            except UnknownTopicOrPartitionError:
                if isinstance(subscription, Subscribe | Assign):
                    raise
                continue  # a pattern's topic deleted meanwhile: no longer subscribed
            topic_log.refresh()
            count = topic_log.num_partitions
            partitions = assigned.get(name, tuple(range(count)))
            for p in partitions:
                if p >= count:
                    raise UnknownTopicOrPartitionError(
                        f"option 'assign': partition {p} does not exist in topic {name!r} "
                        f"(it has {count} partitions)"
                    )
                live: tuple[Segment, ...] = ()
                if segments:
                    listed = topic_log.segments(p)
                    start = wanted_from.get(TopicPartition(name, p))
                    if start is not None:
                        first = bisect.bisect_left(listed, start, key=lambda s: s.last_offset)
                        listed = listed[first:]
                    live = tuple(listed)
                out.append(
                    PartitionSnapshot(
                        topic=name,
                        table_path=topic_log.table_path,
                        partition=p,
                        log_start=topic_log.log_start_offset(p),
                        high_watermark=topic_log.high_watermark(p),
                        segments=live,
                    )
                )
        return out

    def typed_fields(self, topics: Sequence[str]) -> tuple[pa.Field, ...]:
        """The typed columns a read of ``topics`` has: each one every topic has with one
        type (a read of topics typed differently leaves that column out)."""
        per_topic = []
        for name in topics:
            try:
                per_topic.append(typed_fields(self.catalog.topic(name).metadata))
            except UnknownTopicOrPartitionError:
                continue
        if not per_topic:
            return ()
        first = per_topic[0]
        return tuple(
            first[name]
            for name in TYPED_COLUMNS
            if name in first and all(other.get(name) == first[name] for other in per_topic)
        )

    def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        found = self.catalog.topic(topic).offset_for_timestamp(partition, timestamp_ms)
        return None if found is None else found[0]


@contextmanager
def open_topics(storage: StorageSpec) -> Iterator[TopicSource]:
    try:
        source = TopicSource(storage)
    except InvalidConfigError as exc:
        raise option_error("root", exc.message) from exc
    try:
        yield source
    finally:
        source.close()
