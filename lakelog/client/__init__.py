"""Clients of a lakelog cluster over the brokers' HTTP API: producer, consumer, admin.

Modelled on Kafka's clients: the same configuration names in snake_case, the
same defaults where they make sense, errors with Kafka's codes and ``retriable``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.lazy import lazy_names

if TYPE_CHECKING:
    from lakelog.client.admin import AdminClient, TopicDescription
    from lakelog.client.connection import Connection
    from lakelog.client.consumer import Consumer
    from lakelog.client.errors import NetworkError, NoOffsetForPartitionError
    from lakelog.client.offsets import OffsetAndTimestamp
    from lakelog.client.producer import Producer
    from lakelog.client.rebalance import ConsumerRebalanceListener
    from lakelog.client.structs import OffsetAndMetadata, RecordMetadata, TopicPartition

#: Each public name's module, imported when the name is first used: a tool that only
#: administers topics does not load the consumer's Arrow decoding.
_MODULES = {
    "AdminClient": "lakelog.client.admin",
    "TopicDescription": "lakelog.client.admin",
    "Connection": "lakelog.client.connection",
    "Consumer": "lakelog.client.consumer",
    "NetworkError": "lakelog.client.errors",
    "NoOffsetForPartitionError": "lakelog.client.errors",
    "OffsetAndTimestamp": "lakelog.client.offsets",
    "Producer": "lakelog.client.producer",
    "ConsumerRebalanceListener": "lakelog.client.rebalance",
    "OffsetAndMetadata": "lakelog.client.structs",
    "RecordMetadata": "lakelog.client.structs",
    "TopicPartition": "lakelog.client.structs",
}


__getattr__ = lazy_names(__name__, _MODULES)

__all__ = [
    "AdminClient",
    "Connection",
    "Consumer",
    "ConsumerRebalanceListener",
    "NetworkError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Producer",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
]
