"""Two broker subprocesses on one root (a local directory, then the S3-protocol server):
concurrent registrations through both give one id per schema and never reuse one, and
Avro records produced over the Kafka protocol with confluent-kafka's ``AvroSerializer``
through one broker decode with ``AvroDeserializer`` through the other."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from server.schema_registry.framing import unframe
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

THREADS = 6
SHARED = 4
OWN = 3


def avro_record(name: str, field: str) -> str:
    return json.dumps(
        {"type": "record", "name": name, "fields": [{"name": field, "type": "string"}]}
    )


@pytest.fixture(scope="module")
def brokers(
    module_root: RootSpec, start_module_broker: Callable[..., BrokerProcess]
) -> tuple[BrokerProcess, BrokerProcess]:
    return start_module_broker(module_root), start_module_broker(module_root)


def test_concurrent_registrations_one_id_per_schema(
    brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    run = uuid.uuid4().hex[:6]
    mixed = f"mixed-{run}"
    with httpx.Client(base_url=brokers[0].url) as http:
        assert http.put(f"/config/{mixed}", json={"compatibility": "NONE"}).status_code == 200
    barrier = threading.Barrier(THREADS)
    ids: dict[tuple[str, int], int] = {}
    failures: list[BaseException] = []

    def work(n: int) -> None:
        # A client of its own (no shared cache), alternating between the brokers.
        client = SchemaRegistryClient({"url": brokers[n % 2].url})
        try:
            barrier.wait(timeout=30)
            for i in range(SHARED):
                schema = Schema(avro_record(f"Shared{i}", "f"), "AVRO")
                ids[(f"shared{i}", n)] = client.register_schema(f"shared{i}-{run}", schema)
            for i in range(OWN):
                schema = Schema(avro_record(f"Own{n}x{i}", "g"), "AVRO")
                ids[(f"own{n}x{i}", n)] = client.register_schema(mixed, schema)
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    shared = [{ids[(f"shared{i}", n)] for n in range(THREADS)} for i in range(SHARED)]
    assert all(len(found) == 1 for found in shared), shared
    own = [ids[(f"own{n}x{i}", n)] for n in range(THREADS) for i in range(OWN)]
    every = [next(iter(found)) for found in shared] + own
    assert len(set(every)) == len(every) == SHARED + THREADS * OWN
    for broker in brokers:
        with httpx.Client(base_url=broker.url) as http:
            # One version per shared schema; the mixed subject numbered without gaps.
            for i in range(SHARED):
                assert http.get(f"/subjects/shared{i}-{run}/versions").json() == [1]
            versions = http.get(f"/subjects/{mixed}/versions").json()
            assert versions == list(range(1, THREADS * OWN + 1))
            for schema_id in every:
                assert http.get(f"/schemas/ids/{schema_id}").status_code == 200


def test_avro_round_trip_over_kafka(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    writer, reader = brokers
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    with httpx.Client(base_url=writer.url) as http:
        assert http.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
    schema = json.dumps(
        {
            "type": "record",
            "name": "Order",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "item", "type": "string"},
                {"name": "amount", "type": "double"},
                {"name": "note", "type": ["null", "string"], "default": None},
            ],
        }
    )
    serializer = AvroSerializer(SchemaRegistryClient({"url": writer.url}), schema)
    orders = [
        {"id": i, "item": f"item{i}", "amount": i * 1.5, "note": None if i % 2 else "gift"}
        for i in range(20)
    ]
    assert writer.kafka is not None and reader.kafka is not None
    producer = Producer({"bootstrap.servers": writer.kafka, "linger.ms": 5})
    ctx = SerializationContext(topic, MessageField.VALUE)
    for order in orders:
        producer.produce(topic, key=str(order["id"]).encode(), value=serializer(order, ctx))
    assert producer.flush(30) == 0
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": reader.url}))
    consumer = Consumer(
        {
            "bootstrap.servers": reader.kafka,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    got: list[object] = []
    raw: list[bytes] = []
    try:
        for _ in range(120):
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                if len(got) == len(orders):
                    break
                continue
            value = message.value()
            assert isinstance(value, bytes)
            raw.append(value)
            got.append(deserializer(value, ctx))
            if len(got) == len(orders):
                break
    finally:
        consumer.close()
    assert got == orders
    schema_ids = {unframe(value)[0] for value in raw}
    with httpx.Client(base_url=reader.url) as http:
        latest = http.get(f"/subjects/{topic}-value/versions/latest").json()
    assert schema_ids == {latest["id"]}
