"""Small value types shared by the producer, consumer and admin client."""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.structs import TopicPartition


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a produced record was written.

    With ``acks=0`` nothing is confirmed, so ``offset`` is -1 (as in Kafka) and
    ``partition`` is the requested partition, or -1 if the broker chose it.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed (or to-be-committed) position: the offset of the next record to read.

    As in Kafka, the committed offset is the *next* record, not the last one
    processed; ``metadata`` is free text stored with it. ``commit_timestamp_ms``
    is set on offsets read back from the group (when the broker wrote them).
    """

    offset: int
    metadata: str = ""
    commit_timestamp_ms: int | None = None


__all__ = ["OffsetAndMetadata", "RecordMetadata", "TopicPartition"]
