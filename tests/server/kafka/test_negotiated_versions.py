"""Each client library negotiates its newest layout of the APIs lakelog serves, and works.

librdkafka logs every request it sends with its version (``debug=protocol``):
a producer and a consumer group must send Fetch v16 (topics by id), Produce
v10, Metadata v13, OffsetCommit v9 and OffsetFetch v9, and still read what they
wrote. kafka-python's admin client resolves each API's version from
ApiVersions (``broker_version_data``): Metadata v13, DescribeGroups v6,
ListGroups v5, DeleteTopics v6, DescribeCluster v2 and OffsetFetch v10, and
its calls answer through them. aiokafka's newest versions of the APIs it uses
are all older than these, so it has nothing new to negotiate; the existing
tests of tests/server/kafka/ keep it working.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import (
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.test_produce_consume import create_topic

pytestmark = pytest.mark.integration

SENT = re.compile(r"Sent (\w+)Request \(v(\d+)")


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory,
    start_module_broker: Callable[..., BrokerProcess],
) -> BrokerProcess:
    return start_module_broker(RootSpec(str(tmp_path_factory.mktemp("root"))))


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def newest_sent(self) -> dict[str, int]:
        """The newest version librdkafka sent of each request it sent."""
        sent: dict[str, int] = {}
        for line in self.lines:
            for name, version in SENT.findall(line):
                sent[name] = max(sent.get(name, 0), int(version))
        return sent


def test_librdkafka_sends_its_newest_versions(broker: BrokerProcess) -> None:
    create_topic(broker, "rdkafka", partitions=1)
    lines = _Lines()
    logger = logging.getLogger("test_negotiated_versions.rdkafka")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    common = {"bootstrap.servers": broker.kafka, "debug": "protocol", "logger": logger}
    producer = Producer(common)
    for i in range(3):
        producer.produce("rdkafka", value=b"v%d" % i)
    assert producer.flush(60) == 0
    consumer = Consumer(
        {
            **common,
            "group.id": "rdkafka-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["rdkafka"])
        values: list[bytes | None] = []
        while len(values) < 3:
            message = consumer.poll(30)
            assert message is not None, "no record within 30 s"
            assert message.error() is None, message.error()
            values.append(message.value())
        consumer.commit(asynchronous=False)
        (committed,) = consumer.committed([ConfluentTopicPartition("rdkafka", 0)], timeout=30)
    finally:
        consumer.close()
    assert values == [b"v0", b"v1", b"v2"]
    assert committed.offset == 3
    sent = lines.newest_sent()
    expected = {"Fetch": 16, "Produce": 10, "Metadata": 13, "OffsetCommit": 9, "OffsetFetch": 9}
    assert {name: sent.get(name) for name in expected} == expected


def test_kafka_python_admin_negotiates_and_uses_the_newest_versions(
    broker: BrokerProcess,
) -> None:
    create_topic(broker, "kp-admin", partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=broker.kafka, client_id="kp-admin")
    try:
        versions = admin._manager.broker_version_data
        negotiated = {
            request.__name__: versions.api_version(request)
            for request in (
                MetadataRequest,
                DescribeGroupsRequest,
                ListGroupsRequest,
                DeleteTopicsRequest,
                DescribeClusterRequest,
                OffsetFetchRequest,
            )
        }
        assert negotiated == {
            "MetadataRequest": 13,
            "DescribeGroupsRequest": 6,
            "ListGroupsRequest": 5,
            "DeleteTopicsRequest": 6,
            "DescribeClusterRequest": 2,
            "OffsetFetchRequest": 10,
        }
        committed = {TopicPartition("kp-admin", 0): OffsetAndMetadata(2, "", -1)}
        admin.alter_group_offsets("kp-group", committed)
        offsets = admin.list_group_offsets({"kp-group": None})
        assert offsets["kp-group"][TopicPartition("kp-admin", 0)].offset == 2
        listed = {g["group_id"]: g["group_type"] for g in admin.list_groups()}
        assert listed["kp-group"] == "classic"
        described = admin.describe_groups(["kp-group"])["kp-group"]
        assert described["group_state"] == "Empty"  # errors are raised
        cluster = admin.describe_cluster()
        assert len(cluster["brokers"]) == 1
        admin.delete_topics(["kp-admin"])
        assert "kp-admin" not in admin.list_topics()
    finally:
        admin.close()
