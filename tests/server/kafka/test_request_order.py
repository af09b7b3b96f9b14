"""Requests of one Kafka connection take effect in the order they were sent.

Kafka's rule: a broker applies the requests of one connection in arrival
order. Clients rely on it without saying so: a consumer that commits
asynchronously and then synchronously expects the synchronous commit to be
the one that stays, and a producer with several requests in flight and no
idempotence expects its records stored in send order. Each test drives an
unmodified client library against a real broker, on a local and an S3 root.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.test_produce_consume import create_topic

TOPIC = "ordered"
#: Asynchronous commits sent before the final synchronous one.
ASYNC_COMMITS = 50
FINAL_OFFSET = 100
#: kafka-python's default max_in_flight_requests_per_connection.
KAFKA_PYTHON_IN_FLIGHT = 5


def committed(broker: BrokerProcess, group: str) -> dict[int, int]:
    response = httpx.get(f"{broker.url}/v1/groups/{group}/offsets", timeout=60)
    assert response.status_code == 200, response.text
    return {int(o["partition"]): int(o["offset"]) for o in response.json()["offsets"]}


def test_confluent_async_commits_then_a_sync_commit_leave_the_last(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    broker = start_broker(root)
    assert broker.kafka is not None
    create_topic(broker, TOPIC, partitions=1)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.kafka,
            "group.id": "async-then-sync",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        for offset in range(1, ASYNC_COMMITS + 1):
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=True)
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, FINAL_OFFSET)], asynchronous=False)
        (seen,) = consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)
        assert seen.offset == FINAL_OFFSET
    finally:
        consumer.close()
    assert committed(broker, "async-then-sync") == {0: FINAL_OFFSET}


def test_kafka_python_commit_async_then_commit_leave_the_last(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    broker = start_broker(root)
    assert broker.kafka is not None
    create_topic(broker, TOPIC, partitions=1)
    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.kafka, group_id="async-then-sync", enable_auto_commit=False
    )
    try:
        consumer.assign([tp])
        assert consumer.committed(tp) is None  # the coordinator's connection is up
        # kafka-python fails an asynchronous commit at once when its connection has five
        # requests in flight (max_in_flight_requests_per_connection): stay within them.
        for offset in range(1, KAFKA_PYTHON_IN_FLIGHT):
            consumer.commit_async({tp: OffsetAndMetadata(offset, "", -1)})
        consumer.commit({tp: OffsetAndMetadata(FINAL_OFFSET, "", -1)})
        assert consumer.committed(tp) == FINAL_OFFSET
    finally:
        consumer.close()
    assert committed(broker, "async-then-sync") == {0: FINAL_OFFSET}


def test_aiokafka_commits_sent_together_leave_the_last(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    broker = start_broker(root)
    assert broker.kafka is not None
    create_topic(broker, TOPIC, partitions=1)
    tp = TopicPartition(TOPIC, 0)

    async def run() -> int | None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.kafka, group_id="together", enable_auto_commit=False
        )
        await consumer.start()
        try:
            consumer.assign([tp])
            # Sent without waiting for each other: one connection, in this order.
            commits = [consumer.commit({tp: o}) for o in range(1, ASYNC_COMMITS + 1)]
            await asyncio.gather(*commits)
            await consumer.commit({tp: FINAL_OFFSET})
            seen: int | None = await consumer.committed(tp)
            return seen
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == FINAL_OFFSET
    assert committed(broker, "together") == {0: FINAL_OFFSET}


@pytest.mark.parametrize("acks", ["1", "all"])
def test_non_idempotent_producer_with_five_in_flight_stores_send_order(
    acks: str, root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    from confluent_kafka import Producer

    broker = start_broker(root, linger_ms=1)
    assert broker.kafka is not None
    create_topic(broker, TOPIC, partitions=1)
    producer = Producer(
        {
            "bootstrap.servers": broker.kafka,
            "enable.idempotence": False,
            "acks": acks,
            "max.in.flight.requests.per.connection": 5,
            # Small requests, sent at once: up to five of them in flight at any time.
            "linger.ms": 0,
            "batch.num.messages": 20,
        }
    )
    failures: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    sent = [b"record-%05d" % i for i in range(2_000)]
    for value in sent:
        producer.produce(TOPIC, value=value, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failures, failures[:3]

    response = httpx.get(
        f"{broker.url}/v1/topics/{TOPIC}/partitions/0/records",
        params={"offset": 0, "max_records": 10_000, "value_format": "string"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    stored = [str(r["value"]).encode() for r in response.json()["records"]]
    assert stored == sent
