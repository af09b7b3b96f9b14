"""Automatic topic creation, as a Kafka broker does it on Metadata.

Each unmodified client produces to a topic nobody created, on broker
subprocesses over a local and an S3-protocol root: the topic appears with the
broker's ``num_partitions`` and the records are read back. A broker with
``auto_create_topics_enable=false``, a request with
``allow_auto_topic_creation=false``, a principal without CREATE and a bad
name each create nothing and get Kafka's error code.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import CLIENTS, Message, kafka_client
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.sasl import sasl_connection
from tests.server.security.helpers import ADMIN, acl, add_acls, call, eventually, start_secured

pytestmark = pytest.mark.integration

METADATA = 3
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC, TOPIC_AUTHORIZATION_FAILED = 0, 3, 17, 29


def partitions_over_http(broker: BrokerProcess, topic: str) -> int | None:
    """The topic's partition count, or None when the broker does not know it."""
    answer = httpx.get(f"{broker.url}/v1/topics/{topic}", timeout=30)
    if answer.status_code == 404:
        return None
    answer.raise_for_status()
    return len(answer.json()["partitions"])


def ask(conn: RawConnection, topic: str, allow_auto_topic_creation: bool = True) -> int:
    """The error code a Metadata v12 answer gives ``topic``."""
    answer = conn.request(
        METADATA,
        12,
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
            allow_auto_topic_creation=allow_auto_topic_creation,
            include_topic_authorized_operations=False,
        ),
    )
    (only,) = answer.topics
    return int(only.error_code)


@pytest.mark.parametrize("client_name", CLIENTS)
def test_each_client_produces_to_a_topic_nobody_created(
    client_name: str, root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, num_partitions=3)
    assert broker.kafka is not None
    topic = f"auto-{client_name}-{uuid.uuid4().hex[:6]}"
    client = kafka_client(client_name)
    sent = [Message(b"k", f"v{i}".encode(), partition=0) for i in range(3)]
    delivered = client.produce(broker.kafka, topic, sent)
    assert [d.offset for d in delivered] == [0, 1, 2]
    assert partitions_over_http(broker, topic) == 3
    got = client.consume(broker.kafka, topic, [0], 3, timeout_s=30)
    assert [m.value for m in got] == [b"v0", b"v1", b"v2"]


def test_nothing_is_created_when_the_broker_or_the_request_says_no(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    off = start_broker(root, auto_create_topics_enable=False)
    assert off.kafka is not None
    conn = RawConnection(off.kafka)
    assert ask(conn, "never-made") == UNKNOWN_TOPIC_OR_PARTITION
    assert partitions_over_http(off, "never-made") is None

    on = start_broker(root)
    assert on.kafka is not None
    conn = RawConnection(on.kafka)
    assert ask(conn, "not-asked", allow_auto_topic_creation=False) == UNKNOWN_TOPIC_OR_PARTITION
    assert partitions_over_http(on, "not-asked") is None
    assert ask(conn, "bad name!") == INVALID_TOPIC
    assert ask(conn, "made") == NONE
    assert partitions_over_http(on, "made") == 1


def test_creation_needs_create_on_the_topic_or_the_cluster(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = start_secured(start_broker, RootSpec(str(tmp_path / "root")), tmp_path)
    assert broker.kafka is not None
    add_acls(broker, acl("User:alice", "DESCRIBE", "orders"), acl("User:alice", "WRITE", "orders"))
    eventually(lambda: ask(sasl_connection(broker.kafka or "", "User:alice"), "orders") != 0)
    conn = sasl_connection(broker.kafka, "User:alice")
    assert ask(conn, "orders") == TOPIC_AUTHORIZATION_FAILED
    assert call(broker, "GET", "/v1/topics/orders", ADMIN).status_code == 404

    add_acls(broker, acl("User:alice", "CREATE", "orders"))
    eventually(lambda: ask(sasl_connection(broker.kafka or "", "User:alice"), "orders") == NONE)
    assert len(call(broker, "GET", "/v1/topics/orders", ADMIN).json()["partitions"]) == 1
