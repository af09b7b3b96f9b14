"""Value types every part of lakelog shares (clients, groups, brokers, the Spark connector)."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One partition of one topic: the unit a consumer is assigned and positions are kept for.

    A NamedTuple so it hashes, sorts and unpacks (``topic, p = tp``) like Kafka clients'.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


__all__ = ["TopicPartition"]
