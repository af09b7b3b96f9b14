"""The admin client against a real broker: the calls the CLI tools make."""

from __future__ import annotations

import pytest

from lakelog.client import AdminClient, Producer, TopicPartition
from lakelog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from tests.fixtures.brokers import BrokerProcess


def test_topic_lifecycle_offsets_and_brokers(broker: BrokerProcess) -> None:
    with AdminClient(broker.url) as admin:
        created = admin.create_topic("orders", 2, {"retention.ms": "60000"}, replication_factor=3)
        assert (created.name, created.num_partitions) == ("orders", 2)
        assert created.overrides() == {"retention.ms": "60000"}
        assert created.configs["cleanup.policy"].is_default
        with pytest.raises(TopicAlreadyExistsError) as exists:
            admin.create_topic("orders")
        assert not exists.value.retriable
        with pytest.raises(InvalidConfigError):
            admin.create_topic("bad", 1, {"no.such.config": "1"})
        assert admin.list_topics() == ["orders"]

        altered = admin.alter_configs(
            "orders", set={"max.message.bytes": "2048"}, delete=["retention.ms"]
        )
        assert altered.overrides() == {"max.message.bytes": "2048"}
        assert admin.describe_topic("orders").overrides() == {"max.message.bytes": "2048"}

        assert admin.create_partitions("orders", 3).num_partitions == 3
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions("orders", 2)

        with Producer(broker.url) as producer:
            for ts in (100, 200, 300):
                producer.send("orders", b"x", partition=2, timestamp_ms=ts)
        offsets = admin.topic_offsets("orders")
        assert {p: (o.log_start_offset, o.high_watermark) for p, o in offsets.items()} == {
            0: (0, 0),
            1: (0, 0),
            2: (0, 3),
        }
        tp = TopicPartition("orders", 2)
        listed = admin.list_offsets({tp: "earliest"})[tp], admin.list_offsets({tp: "latest"})[tp]
        assert [o.offset for o in listed] == [0, 3]
        by_time = admin.list_offsets({tp: 150})[tp]
        assert (by_time.offset, by_time.timestamp_ms) == (1, 200)
        described = admin.describe_topic("orders")
        assert described.partitions[2].high_watermark == 3
        assert described.partitions[2].num_records == 3

        cluster = admin.brokers()
        assert [b.url for b in cluster.brokers] == [broker.url]
        assert cluster.cluster_id

        admin.delete_topic("orders")
        assert admin.list_topics() == []
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_topic("orders")
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topic("orders")
