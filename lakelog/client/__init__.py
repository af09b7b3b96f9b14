"""Clients of a lakelog cluster over the brokers' HTTP API: producer, consumer, admin.

Modelled on Kafka's clients: the same configuration names in snake_case, the
same defaults where they make sense, errors with Kafka's codes and ``retriable``.
"""

from lakelog.client.admin import AdminClient, TopicDescription
from lakelog.client.connection import Connection
from lakelog.client.consumer import Consumer
from lakelog.client.errors import NetworkError, NoOffsetForPartitionError
from lakelog.client.offsets import OffsetAndTimestamp
from lakelog.client.producer import Producer
from lakelog.client.rebalance import ConsumerRebalanceListener
from lakelog.client.structs import OffsetAndMetadata, RecordMetadata, TopicPartition

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
