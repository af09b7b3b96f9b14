"""A Kafka Fetch long poll ends early on an error, as Kafka's does.

The broker's long-poll cap is raised to ten minutes and each Fetch asks for
that wait, so an answer arriving at all (within the raw socket's 60 s guard)
shows the broker did not wait the poll out.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from tests.client.conftest import create_topic
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.raw import RawConnection

FETCH = 1
TOPIC = "polled"
TEN_MINUTES_MS = 600_000
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    process = start_module_broker(
        RootSpec(str(tmp_path_factory.mktemp("root"))), fetch_max_wait_ms=TEN_MINUTES_MS
    )
    create_topic(process.url, TOPIC, 2)
    return process


def long_fetch(broker: BrokerProcess, parts: list[tuple[str, int, int]]) -> list[int]:
    """Error codes of a Fetch v12 of (topic, partition, offset) waiting up to ten minutes."""
    assert broker.kafka is not None
    topics: dict[str, list[FetchPartition]] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(
            FetchPartition(
                partition=i32(partition), fetch_offset=i64(offset), partition_max_bytes=i32(1 << 20)
            )
        )
    conn = RawConnection(broker.kafka, timeout_s=60)
    try:
        answer = conn.request(
            FETCH,
            12,
            FetchRequest(
                max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=TEN_MINUTES_MS)),
                min_bytes=i32(1),
                topics=tuple(
                    FetchTopic(topic=TopicName(name), partitions=tuple(partitions))
                    for name, partitions in topics.items()
                ),
                forgotten_topics_data=(),
            ),
        )
    finally:
        conn.close()
    return [int(p.error_code) for t in answer.responses for p in t.partitions]


def test_an_offset_out_of_range_is_answered_without_waiting(broker: BrokerProcess) -> None:
    assert long_fetch(broker, [(TOPIC, 0, 0), (TOPIC, 1, 5)]) == [0, OFFSET_OUT_OF_RANGE]


def test_an_unknown_partition_is_answered_without_waiting(broker: BrokerProcess) -> None:
    assert long_fetch(broker, [(TOPIC, 0, 0), (TOPIC, 7, 0)]) == [0, UNKNOWN_TOPIC_OR_PARTITION]
