"""Kafka's idempotent producer on lakelog: ids unique across brokers, retries deduplicated.

Batches are sent as raw Produce frames so that a retry is exactly the
retried bytes: the same batch again (answered with its first offsets and
stored once), a gap (OUT_OF_ORDER_SEQUENCE_NUMBER, nothing stored), and the
same retry after a broker restart and through another broker on the root.
Sequences are per partition, as in Kafka.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import httpx
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.test_produce_consume import create_topic

TOPIC = "payments"
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def producer_id(broker: BrokerProcess) -> int:
    assert broker.kafka is not None
    conn = RawConnection(broker.kafka)
    try:
        answer = conn.request(
            22,
            4,
            InitProducerIdRequest(
                transactional_id=None,
                transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
                producer_id=ProducerId(-1),
                producer_epoch=i16(-1),
            ),
        )
        assert answer.error_code == 0 and answer.producer_epoch == 0
        return int(answer.producer_id)
    finally:
        conn.close()


def batch(pid: int, base_sequence: int, n: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 0, pid, 0, base_sequence, 2**31 - 1)
    for i in range(n):
        builder.append(i, 1_700_000_000_000, b"key", b"payment-%d" % (base_sequence + i), [])
    return bytes(builder.build())


def produce(broker: BrokerProcess, partition: int, records: bytes) -> tuple[int, int]:
    """(error code, base offset) of one partition's batch."""
    assert broker.kafka is not None
    conn = RawConnection(broker.kafka)
    try:
        answer = conn.request(
            0,
            9,
            ProduceRequest(
                acks=i16(-1),
                timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
                topic_data=(
                    TopicProduceData(
                        name=TopicName(TOPIC),
                        partition_data=(
                            PartitionProduceData(index=i32(partition), records=Records(records)),
                        ),
                    ),
                ),
            ),
        )
        (part,) = answer.responses[0].partition_responses
        return int(part.error_code), int(part.base_offset)
    finally:
        conn.close()


def stored(broker: BrokerProcess) -> list[int]:
    response = httpx.get(f"{broker.url}/v1/topics/{TOPIC}/offsets", timeout=60)
    assert response.status_code == 200, response.text
    return [int(p["high_watermark"]) for p in response.json()["partitions"]]


def test_retries_are_stored_once_across_restarts_and_brokers(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    first = start_broker(root, broker_id="b1")
    create_topic(first, TOPIC, partitions=2)
    pid = producer_id(first)

    assert produce(first, 0, batch(pid, 0, 3)) == (0, 0)
    assert produce(first, 0, batch(pid, 0, 3)) == (0, 0), "a retry gets its first offsets"
    # Each partition numbers its own sequence from 0, as Kafka's producer does.
    assert produce(first, 1, batch(pid, 0, 2)) == (0, 0)
    assert produce(first, 0, batch(pid, 3, 2)) == (0, 3)
    code, _ = produce(first, 0, batch(pid, 9, 1))
    assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert stored(first) == [5, 2]

    first.kill()
    restarted = start_broker(root, broker_id="b1")
    other = start_broker(root, broker_id="b2")
    assert produce(restarted, 0, batch(pid, 3, 2)) == (0, 3)
    assert produce(other, 0, batch(pid, 3, 2)) == (0, 3)
    assert produce(other, 1, batch(pid, 2, 1)) == (0, 2)
    assert produce(restarted, 1, batch(pid, 2, 1)) == (0, 2)
    assert stored(other) == [5, 3]

    ids = {producer_id(restarted), producer_id(other), producer_id(restarted), producer_id(other)}
    assert len(ids) == 4 and pid not in ids, "no two InitProducerId answers share an id"


def test_a_broker_with_a_stale_view_accepts_the_next_sequence(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    """The next batch of a producer whose previous one another broker committed is
    appended, however long ago this broker last read the topic.

    Each broker commits for itself (no handoff), so the second one checks the
    sequence against its own view, which its last read left behind the log.
    """
    first = start_broker(root, broker_id="b1", commit_handoff=False)
    second = start_broker(root, broker_id="b2", commit_handoff=False)
    create_topic(first, TOPIC, partitions=1)
    pid = producer_id(first)
    assert produce(first, 0, batch(pid, 0, 3)) == (0, 0)
    assert stored(second) == [3], "the second broker reads the topic: sequences 0..2"
    assert produce(first, 0, batch(pid, 3, 2)) == (0, 3)
    assert produce(second, 0, batch(pid, 5, 1)) == (0, 5)
    assert produce(first, 0, batch(pid, 6, 1)) == (0, 6)
    code, _ = produce(second, 0, batch(pid, 9, 1))
    assert code == OUT_OF_ORDER_SEQUENCE_NUMBER, "a real gap is still refused"
    assert stored(first) == [7]
