"""Small value types shared by the producer, consumer and admin client."""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.structs import TopicPartition


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a produced record was written; with ``acks=0`` the offset is -1 (as in Kafka),
    and so is the partition if the broker chose it."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed position: as in Kafka, the offset of the *next* record to read.

    ``commit_timestamp_ms`` is set on offsets read back from the group.
    """

    offset: int
    metadata: str = ""
    commit_timestamp_ms: int | None = None


__all__ = ["OffsetAndMetadata", "RecordMetadata", "TopicPartition"]
