"""Two brokers on one root behind one Kafka bootstrap address, and one of them SIGKILLed.

The client is given only the first broker; Metadata tells it of both, and
the two topics are led by different brokers, so it produces and consumes
through both. Killing the first broker mid-load: the idempotent producer
fails over to the survivor, and every acknowledged record is stored exactly
once (its retries of batches the dead broker had already committed are
recognised by sequence).
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from lakelog.testing.brokers import wait_for
from server.commit_leader.router import choose_commit_leader
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import kafka_client
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.test_produce_consume import create_topic

FETCH = 1
BROKERS = ["kb1", "kb2"]
FAST_REGISTRY = {"heartbeat_interval_ms": 500, "broker_session_timeout_ms": 3000}


def topics_led_by_each() -> dict[str, str]:
    """A topic name per broker, led (committed) by that broker."""
    found: dict[str, str] = {}
    for i in range(1000):
        name = f"topic-{i}"
        found.setdefault(choose_commit_leader(name, BROKERS), name)
        if len(found) == len(BROKERS):
            return found
    raise AssertionError("no topic names split over the brokers")


class LoadProducer:
    """An idempotent confluent-kafka producer sending until told to stop, counting acks."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
            }
        )
        self.topics = topics
        self.acked: list[tuple[str, int, int, bytes]] = []
        self.failed: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _deliver(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))

    def _run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            for topic in self.topics:
                self._send(topic, b"k%d" % (i % 17), b"v%d" % i)
                i += 1
            self.producer.poll(0)
            if i % 200 == 0:
                time.sleep(0.01)
        assert self.producer.flush(120) == 0

    def _send(self, topic: str, key: bytes, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, on_delivery=self._deliver)
                return
            except BufferError:  # the local queue is full: wait for deliveries
                self.producer.poll(0.05)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(180)


def leaders_seen_from(bootstrap: str, topics: list[str]) -> int:
    """How many distinct brokers lead ``topics``, as Metadata from ``bootstrap`` says."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    leaders = {
        partition.leader
        for topic in topics
        if topic in metadata.topics
        for partition in metadata.topics[topic].partitions.values()
    }
    return len(leaders & set(metadata.brokers))


def stored_values(broker: BrokerProcess, topic: str) -> list[tuple[int, int, bytes]]:
    out = []
    for partition in range(3):
        offset = 0
        while True:
            response = httpx.get(
                f"{broker.url}/v1/topics/{topic}/partitions/{partition}/records",
                params={"offset": offset, "max_records": 10_000, "value_format": "string"},
                timeout=60,
            )
            assert response.status_code == 200, response.text
            records = response.json()["records"]
            if not records:
                break
            out += [(partition, r["offset"], r["value"].encode()) for r in records]
            offset = records[-1]["offset"] + 1
    return out


@pytest.mark.slow
def test_client_uses_both_brokers_and_survives_a_killed_one(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    b1 = start_broker(root, broker_id=BROKERS[0], **FAST_REGISTRY)
    b2 = start_broker(root, broker_id=BROKERS[1], **FAST_REGISTRY)
    assert b1.kafka is not None and b2.kafka is not None
    led = topics_led_by_each()
    for topic in led.values():
        create_topic(b1, topic)
    # The premise, established rather than assumed: b1's Metadata names both brokers,
    # each leading one topic (b1 learns of b2 at its next registry read).
    bootstrap = b1.kafka
    wait_for(
        lambda: leaders_seen_from(bootstrap, list(led.values())) == 2,
        "the first broker's Metadata to name both brokers as leaders",
        60,
    )

    # Produce and consume through both, bootstrapped on b1 only.
    load = LoadProducer(b1.kafka, list(led.values()))
    load.start()
    wait_for(lambda: len(load.acked) >= 2000, "records acknowledged through both brokers", 120)
    seen = kafka_client("confluent").consume(b1.kafka, led[BROKERS[1]], range(3), 100, 60)
    assert len(seen) >= 100, "consumed the topic the second broker leads"

    b1.kill()
    before_kill = len(load.acked)
    wait_for(lambda: len(load.acked) >= before_kill + 2000, "acknowledgements after the kill", 120)
    load.stop()
    assert not load.failed, load.failed[:3]

    for topic in led.values():
        acked = {(p, o): v for t, p, o, v in load.acked if t == topic}
        stored = stored_values(b2, topic)
        values = [v for _, _, v in stored]
        assert len(values) == len(set(values)), "a record was stored twice"
        positions = {(p, o): v for p, o, v in stored}
        assert {k: positions.get(k) for k in acked} == acked, "an acknowledged record is lost"


def fetch_high_watermark(broker: BrokerProcess, topic: str, offset: int) -> tuple[int, int]:
    """(records, high watermark) of a Fetch v12 of partition 0 at ``offset``, a few KB long."""
    assert broker.kafka is not None
    conn = RawConnection(broker.kafka)
    try:
        answer = conn.request(
            FETCH,
            12,
            FetchRequest(
                max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
                min_bytes=i32(1),
                topics=(
                    FetchTopic(
                        topic=TopicName(topic),
                        partitions=(
                            FetchPartition(
                                partition=i32(0),
                                fetch_offset=i64(offset),
                                partition_max_bytes=i32(4096),
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            ),
        )
    finally:
        conn.close()
    (part,) = answer.responses[0].partitions
    assert part.error_code == 0
    return len(part.records or b""), int(part.high_watermark)


def test_a_mid_log_fetch_answers_a_fresh_high_watermark(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    """A broker that did not write the records still answers the log's high watermark
    (at most ``refresh_interval_ms`` old) to a fetch far behind it."""
    writer = start_broker(root, broker_id="kb1", commit_handoff=False)
    reader = start_broker(root, broker_id="kb2", commit_handoff=False)
    create_topic(writer, "lagging", partitions=1)

    def write(n: int) -> None:
        records = [{"value": f"v{i}", "partition": 0} for i in range(n)]
        response = httpx.post(
            f"{writer.url}/v1/topics/lagging/records", json={"records": records}, timeout=60
        )
        assert response.status_code == 200, response.text

    write(100)
    assert fetch_high_watermark(reader, "lagging", 0)[1] == 100
    for _ in range(5):
        write(200)
    time.sleep(0.3)  # past the reader's refresh interval (100 ms)
    size, high_watermark = fetch_high_watermark(reader, "lagging", 10)
    assert size > 0, "the fetch reads records mid-log"
    assert high_watermark == 1_100
