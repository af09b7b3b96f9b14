"""What an application hears when its consumer's partitions change: Kafka's rebalance listener.

Callbacks run on the thread calling ``poll``, ``close`` or ``unsubscribe``, never on
the heartbeat thread, so they may use the consumer freely, as in Kafka.
"""

from __future__ import annotations

from lakelog.client.structs import TopicPartition


class ConsumerRebalanceListener:
    """Override what you need; every callback does nothing by default."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before partitions are given up in an orderly rebalance; commits here still count."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """After a rebalance, with the partitions gained (positions are set on the next poll)."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """When the member was dropped: the partitions may be someone else's already, so
        committing is pointless. As in Kafka, forwards to ``on_partitions_revoked``."""
        self.on_partitions_revoked(lost)


__all__ = ["ConsumerRebalanceListener"]
