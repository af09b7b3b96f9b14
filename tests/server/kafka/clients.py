"""The same few Kafka client operations through each unmodified client library.

One contract, three implementations (confluent-kafka/librdkafka, kafka-python
3, aiokafka), so every Kafka protocol test runs the same steps through each
client exactly as its users call it. Defaults are the libraries' own unless
a test passes settings.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

CLIENTS = ("confluent", "kafka-python", "aiokafka")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class Message:
    """What a test produces, and what a consumer gets back (with its position)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    partition: int | None = None
    offset: int | None = None
    timestamp_ms: int | None = None

    @property
    def body(self) -> tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]:
        return self.key, self.value, self.headers


@dataclass
class Delivered:
    partition: int
    offset: int


class KafkaClient(Protocol):
    name: str

    def produce(
        self,
        bootstrap: str,
        topic: str,
        messages: Sequence[Message],
        compression: str = "none",
        **settings: Any,
    ) -> list[Delivered]: ...

    def consume(
        self,
        bootstrap: str,
        topic: str,
        partitions: Sequence[int],
        count: int,
        timeout_s: float,
        **settings: Any,
    ) -> list[Message]: ...

    def offsets_for_time(
        self, bootstrap: str, topic: str, partition: int, timestamp_ms: int
    ) -> int | None: ...


# -- confluent-kafka ------------------------------------------------------------------


@dataclass
class Confluent:
    name: str = "confluent"

    def produce(
        self,
        bootstrap: str,
        topic: str,
        messages: Sequence[Message],
        compression: str = "none",
        **settings: Any,
    ) -> list[Delivered]:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": compression,
                "linger.ms": 5,
                # The Java client's partitioner (librdkafka's default hashes keys with CRC32).
                "partitioner": "murmur2_random",
                **settings,
            }
        )
        delivered: list[Delivered | Exception] = [Exception("not delivered")] * len(messages)

        def report(index: int) -> Any:
            def on_delivery(err: Any, msg: Any) -> None:
                if err is not None:
                    delivered[index] = RuntimeError(str(err))
                else:
                    delivered[index] = Delivered(msg.partition(), msg.offset())

            return on_delivery

        for i, m in enumerate(messages):
            kwargs: dict[str, Any] = {"key": m.key, "value": m.value, "on_delivery": report(i)}
            if m.headers:
                kwargs["headers"] = list(m.headers)
            if m.partition is not None:
                kwargs["partition"] = m.partition
            if m.timestamp_ms is not None:
                kwargs["timestamp"] = m.timestamp_ms
            producer.produce(topic, **kwargs)
            producer.poll(0)
        left = producer.flush(60)
        assert left == 0, f"{left} messages not delivered"
        return _delivered(delivered)

    def consume(
        self,
        bootstrap: str,
        topic: str,
        partitions: Sequence[int],
        count: int,
        timeout_s: float,
        **settings: Any,
    ) -> list[Message]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "unused-assign-only",
                "enable.auto.commit": False,
                **settings,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            got: list[Message] = []
            deadline = time.monotonic() + timeout_s
            while len(got) < count and time.monotonic() < deadline:
                for msg in consumer.consume(1000, 0.5):
                    if msg.error():
                        raise RuntimeError(str(msg.error()))
                    got.append(
                        Message(
                            msg.key(),
                            msg.value(),
                            _confluent_headers(msg.headers()),
                            msg.partition(),
                            msg.offset(),
                            msg.timestamp()[1],
                        )
                    )
            return got
        finally:
            consumer.close()

    def offsets_for_time(
        self, bootstrap: str, topic: str, partition: int, timestamp_ms: int
    ) -> int | None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-offsets"})
        try:
            (found,) = consumer.offsets_for_times(
                [TopicPartition(topic, partition, timestamp_ms)], timeout=30
            )
            return None if found.offset < 0 else int(found.offset)
        finally:
            consumer.close()


# -- kafka-python 3 -----------------------------------------------------------------------


@dataclass
class KafkaPython:
    name: str = "kafka-python"

    def produce(
        self,
        bootstrap: str,
        topic: str,
        messages: Sequence[Message],
        compression: str = "none",
        **settings: Any,
    ) -> list[Delivered]:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if compression == "none" else compression,
            linger_ms=5,
            **settings,
        )
        try:
            futures = [
                producer.send(
                    topic,
                    key=m.key,
                    value=m.value,
                    headers=list(m.headers),
                    partition=m.partition,
                    timestamp_ms=m.timestamp_ms,
                )
                for m in messages
            ]
            producer.flush(60)
            return [Delivered(md.partition, md.offset) for md in (f.get(60) for f in futures)]
        finally:
            producer.close(10)

    def consume(
        self,
        bootstrap: str,
        topic: str,
        partitions: Sequence[int],
        count: int,
        timeout_s: float,
        **settings: Any,
    ) -> list[Message]:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **settings)
        try:
            consumer.assign([TopicPartition(topic, p) for p in partitions])
            consumer.seek_to_beginning()
            got: list[Message] = []
            deadline = time.monotonic() + timeout_s
            while len(got) < count and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    got += [
                        Message(
                            r.key,
                            r.value,
                            tuple(r.headers),
                            r.partition,
                            r.offset,
                            r.timestamp,
                        )
                        for r in records
                    ]
            return got
        finally:
            consumer.close()

    def offsets_for_time(
        self, bootstrap: str, topic: str, partition: int, timestamp_ms: int
    ) -> int | None:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            tp = TopicPartition(topic, partition)
            found = consumer.offsets_for_times({tp: timestamp_ms})[tp]
            return None if found is None else int(found.offset)
        finally:
            consumer.close()


# -- aiokafka ---------------------------------------------------------------------------


@dataclass
class AioKafka:
    name: str = "aiokafka"
    loop_settings: dict[str, Any] = field(default_factory=dict)

    def produce(
        self,
        bootstrap: str,
        topic: str,
        messages: Sequence[Message],
        compression: str = "none",
        **settings: Any,
    ) -> list[Delivered]:
        from aiokafka import AIOKafkaProducer

        async def run() -> list[Delivered]:
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                compression_type=None if compression == "none" else compression,
                linger_ms=5,
                **settings,
            )
            await producer.start()
            try:
                futures = [
                    await producer.send(
                        topic,
                        key=m.key,
                        value=m.value,
                        headers=list(m.headers),
                        partition=m.partition,
                        timestamp_ms=m.timestamp_ms,
                    )
                    for m in messages
                ]
                return [Delivered(md.partition, md.offset) for md in await asyncio.gather(*futures)]
            finally:
                await producer.stop()

        return asyncio.run(run())

    def consume(
        self,
        bootstrap: str,
        topic: str,
        partitions: Sequence[int],
        count: int,
        timeout_s: float,
        **settings: Any,
    ) -> list[Message]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run() -> list[Message]:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap, enable_auto_commit=False, **settings
            )
            await consumer.start()
            try:
                consumer.assign([TopicPartition(topic, p) for p in partitions])
                await consumer.seek_to_beginning()
                got: list[Message] = []
                deadline = time.monotonic() + timeout_s
                while len(got) < count and time.monotonic() < deadline:
                    batches = await consumer.getmany(timeout_ms=500)
                    for records in batches.values():
                        got += [
                            Message(
                                r.key,
                                r.value,
                                tuple(r.headers),
                                r.partition,
                                r.offset,
                                r.timestamp,
                            )
                            for r in records
                        ]
                return got
            finally:
                await consumer.stop()

        return asyncio.run(run())

    def offsets_for_time(
        self, bootstrap: str, topic: str, partition: int, timestamp_ms: int
    ) -> int | None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run() -> int | None:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
            await consumer.start()
            try:
                tp = TopicPartition(topic, partition)
                found = (await consumer.offsets_for_times({tp: timestamp_ms}))[tp]
                return None if found is None else int(found.offset)
            finally:
                await consumer.stop()

        return asyncio.run(run())


def kafka_client(name: str) -> KafkaClient:
    clients: dict[str, KafkaClient] = {
        "confluent": Confluent(),
        "kafka-python": KafkaPython(),
        "aiokafka": AioKafka(),
    }
    return clients[name]


def _confluent_headers(headers: Any) -> tuple[tuple[str, bytes | None], ...]:
    """confluent-kafka's list of (key, value) pairs, or None when there are none."""
    return tuple((str(k), None if v is None else bytes(v)) for k, v in headers or ())


def _delivered(items: list[Delivered | Exception]) -> list[Delivered]:
    failed = [item for item in items if isinstance(item, Exception)]
    assert not failed, f"{len(failed)} messages failed, first: {failed[0]}"
    return [item for item in items if isinstance(item, Delivered)]
