"""DeleteRecords with each unmodified admin client against broker subprocesses.

confluent-kafka's ``AdminClient.delete_records``, kafka-python's
``KafkaAdminClient.delete_records`` and aiokafka's
``AIOKafkaAdminClient.delete_records`` move partitions' log start offsets, on
a local and an S3-protocol root. The deleted records are unreadable at once
(HTTP fetch 416, a consumer from the beginning starts at the new start), the
segments wholly below it leave the table, the new start survives a SIGKILL,
and bad requests answer Kafka's error codes and change nothing.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from lakelog.catalog import Catalog
from lakelog.testing.brokers import free_port
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import CLIENTS, Message, kafka_client
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.sasl import client_settings
from tests.server.security.helpers import ADMIN, acl, add_acls, call, eventually, start_secured

pytestmark = pytest.mark.integration

TIMEOUT_S = 30
DELETE_RECORDS = 21
OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION = 1, 3
TOPIC_AUTHORIZATION_FAILED, POLICY_VIOLATION = 29, 44


class Refused(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def delete_with(client_name: str, bootstrap: str, topic: str, partition: int, offset: int) -> int:
    """The partition's new low watermark; ``Refused`` with the Kafka error code."""
    if client_name == "confluent":
        admin = AdminClient({"bootstrap.servers": bootstrap})
        (future,) = admin.delete_records([TopicPartition(topic, partition, offset)]).values()
        try:
            return int(future.result(timeout=TIMEOUT_S).low_watermark)
        except KafkaException as exc:
            raise Refused(exc.args[0].code()) from None
    if client_name == "kafka-python":
        client = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            (answer,) = client.delete_records({KpTopicPartition(topic, partition): offset}).values()
        except KafkaError as exc:
            raise Refused(int(getattr(exc, "errno", -1))) from None
        finally:
            client.close()
        return int(answer["low_watermark"])

    async def run() -> int:
        client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await client.start()
        try:
            wanted = {AioTopicPartition(topic, partition): RecordsToDelete(offset)}
            (low,) = (await client.delete_records(wanted)).values()
            return int(low)
        except AioKafkaError as exc:
            raise Refused(int(getattr(exc, "errno", -1))) from None
        finally:
            await client.close()

    return asyncio.run(run())


def fetch_status(broker: BrokerProcess, topic: str, partition: int, offset: int) -> int:
    answer = httpx.get(
        f"{broker.url}/v1/topics/{topic}/partitions/{partition}/records",
        params={"offset": offset},
        timeout=TIMEOUT_S,
    )
    return answer.status_code


def produce(broker: BrokerProcess, topic: str, partition: int, values: list[str]) -> None:
    """One produce request: one segment of the partition."""
    assert broker.kafka is not None
    sent = [Message(b"k", v.encode(), partition=partition) for v in values]
    kafka_client("confluent").produce(broker.kafka, topic, sent)


@pytest.mark.parametrize("client_name", CLIENTS)
def test_each_client_deletes_records_durably(
    client_name: str,
    root: RootSpec,
    make_catalog: Callable[..., Catalog],
    start_broker: Callable[..., BrokerProcess],
) -> None:
    # Fixed ports: the restarted broker is the same node, not a second one beside the dead.
    port, kafka = free_port(), f"127.0.0.1:{free_port()}"
    broker = start_broker(root, port=port, kafka_listeners=f"PLAINTEXT://{kafka}")
    broker.kafka = kafka
    topic = f"purge-{uuid.uuid4().hex[:6]}"
    make_catalog().create_topic(topic, 2)
    produce(broker, topic, 0, [f"a{i}" for i in range(5)])
    produce(broker, topic, 0, [f"b{i}" for i in range(5)])
    produce(broker, topic, 1, ["c0", "c1", "c2"])

    assert delete_with(client_name, broker.kafka, topic, 0, 7) == 7
    assert delete_with(client_name, broker.kafka, topic, 1, -1) == 3  # -1: up to the end
    assert delete_with(client_name, broker.kafka, topic, 0, 2) == 7  # never moves back
    assert fetch_status(broker, topic, 0, 6) == 416
    assert fetch_status(broker, topic, 0, 7) == 200
    got = kafka_client(client_name).consume(broker.kafka, topic, [0], 3, timeout_s=TIMEOUT_S)
    assert [(m.offset, m.value) for m in got] == [(7, b"b2"), (8, b"b3"), (9, b"b4")]

    # The first segment (offsets 0-4) left the table; the one the new start cuts through stays.
    log = make_catalog().topic(topic)
    assert [(s.base_offset, s.end_offset) for s in log.segments(0)] == [(5, 10)]
    assert log.segments(1) == []

    broker.kill()
    again = start_broker(root, port=port, kafka_listeners=f"PLAINTEXT://{kafka}")
    assert fetch_status(again, topic, 0, 6) == 416
    assert delete_with(client_name, kafka, topic, 0, 7) == 7


def test_bad_deletions_answer_kafkas_errors_and_change_nothing(
    root: RootSpec,
    make_catalog: Callable[..., Catalog],
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker(root)
    assert broker.kafka is not None
    catalog = make_catalog()
    catalog.create_topic("kept", 1)
    catalog.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    produce(broker, "kept", 0, ["x", "y"])
    produce(broker, "compacted", 0, ["x"])
    version = make_catalog().topic("kept").version

    for client_name in CLIENTS:
        for topic, partition, offset, code in [
            ("kept", 0, 3, OFFSET_OUT_OF_RANGE),  # past the high watermark 2
            ("kept", 0, -5, OFFSET_OUT_OF_RANGE),
            ("compacted", 0, 1, POLICY_VIOLATION),
        ]:
            with pytest.raises(Refused) as refused:
                delete_with(client_name, broker.kafka, topic, partition, offset)
            assert refused.value.code == code, (client_name, topic, offset)
    # Clients refuse a topic they cannot find in Metadata themselves; the broker's own answer:
    conn = RawConnection(broker.kafka)
    request = DeleteRecordsRequest(
        topics=(
            DeleteRecordsTopic(
                name=TopicName("missing"),
                partitions=(DeleteRecordsPartition(partition_index=i32(0), offset=i64(1)),),
            ),
            DeleteRecordsTopic(
                name=TopicName("kept"),
                partitions=(DeleteRecordsPartition(partition_index=i32(4), offset=i64(1)),),
            ),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
    )
    answer = conn.request(DELETE_RECORDS, 2, request)
    assert [(t.name, [int(p.error_code) for p in t.partitions]) for t in answer.topics] == [
        ("missing", [UNKNOWN_TOPIC_OR_PARTITION]),
        ("kept", [UNKNOWN_TOPIC_OR_PARTITION]),
    ]
    assert make_catalog().topic("kept").version == version
    assert make_catalog().topic("kept").log_start_offset(0) == 0
    assert make_catalog().topic("compacted").log_start_offset(0) == 0


def test_deletion_needs_delete_on_the_topic(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = start_secured(start_broker, RootSpec(str(tmp_path / "root")), tmp_path)
    assert broker.kafka is not None
    assert call(broker, "POST", "/v1/topics", ADMIN, json={"name": "owned"}).status_code == 201
    add_acls(broker, acl("User:alice", "DESCRIBE", "owned"))
    admin = AdminClient(
        {"bootstrap.servers": broker.kafka, **client_settings("confluent", "PLAIN", "User:alice")}
    )

    def attempt() -> int:
        (future,) = admin.delete_records([TopicPartition("owned", 0, -1)]).values()
        try:
            future.result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            return int(exc.args[0].code())
        return 0

    eventually(lambda: attempt() == TOPIC_AUTHORIZATION_FAILED)
    add_acls(broker, acl("User:alice", "DELETE", "owned"))
    eventually(lambda: attempt() == 0)
