"""What an application hears when its consumer's partitions change: Kafka's rebalance listener.

Kept in its own module because applications implement it and the group
coordinator calls it; neither should need the other's internals. The
callbacks run on the thread that calls ``Consumer.poll`` (or ``close`` /
``unsubscribe``), never on the heartbeat thread, so they may use the
consumer (commit, seek, position) freely, exactly as in Kafka.
"""

from __future__ import annotations

from lakelog.client.structs import TopicPartition


class ConsumerRebalanceListener:
    """Override what you need; every callback does nothing by default.

    * ``on_partitions_revoked``: the consumer is about to give these up in an
      orderly rebalance; offsets committed here still count (the consumer has
      already committed its positions if auto-commit is on).
    * ``on_partitions_assigned``: these are now the consumer's, positions are
      set from committed offsets (or the reset policy) on the next poll.
    * ``on_partitions_lost``: the consumer was dropped from the group (session
      timeout, poll interval exceeded, coordinator lost its generation); the
      partitions may already belong to someone else, so committing is
      pointless. As in Kafka, the default forwards to ``on_partitions_revoked``.
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Called before partitions are taken away in an orderly rebalance."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """Called after a rebalance with the partitions this consumer gained."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """Called when partitions were lost without an orderly revoke."""
        self.on_partitions_revoked(lost)


__all__ = ["ConsumerRebalanceListener"]
