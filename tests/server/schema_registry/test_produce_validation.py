"""Validation on produce through a broker subprocess, with confluent-kafka's serializers.

Records framed by AvroSerializer, JSONSerializer and ProtobufSerializer (with
``schema.registry.url`` the broker's HTTP address) are stored and consumed back
byte for byte. A batch with one bad record is refused whole with INVALID_RECORD
and its record-level error, and the high watermark does not move; the native
HTTP route refuses it the same way; a dead-letter topic takes the bad records
while the good ones are stored. One broker serves the module (local root); the
S3 test starts its own on a moto bucket.
"""

from __future__ import annotations

import base64
import datetime
import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import fastavro
import httpx
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from lakelog.storage import S3Settings
from lakelog.topic_config import RECORD_NAME_STRATEGY
from server.schema_registry.dead_letters import PARTITION_HEADER, REASON_HEADER, TOPIC_HEADER
from server.schema_registry.framing import frame
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.fixtures.s3 import new_bucket
from tests.server.kafka.raw import RawConnection

PRODUCE = 0
INVALID_RECORD = 87
VALIDATE = {"confluent.value.schema.validation": "true"}
ORDER_AVRO = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}],
    }
)
USER_AVRO = json.dumps(
    {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
)
ORDER_JSON = json.dumps(
    {
        "type": "object",
        "title": "Order",
        "properties": {"id": {"type": "integer"}, "amount": {"type": "number"}},
        "required": ["id"],
    }
)
ORDERS = [{"id": i, "amount": i * 1.5} for i in range(3)]


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    return start_module_broker(RootSpec(str(tmp_path_factory.mktemp("root"))))


@pytest.fixture(scope="module")
def registry(broker: BrokerProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.url})


def create_topic(broker: BrokerProcess, name: str, **configs: str) -> None:
    answer = httpx.post(
        f"{broker.url}/v1/topics",
        json={"name": name, "partitions": 1, "configs": configs},
        timeout=60,
    )
    assert answer.status_code == 201, answer.text


def high_watermark(broker: BrokerProcess, topic: str) -> int:
    answer = httpx.get(f"{broker.url}/v1/topics/{topic}", timeout=60)
    assert answer.status_code == 200, answer.text
    return int(sum(p["high_watermark"] for p in answer.json()["partitions"]))


def produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    """Each value's delivery error (None: stored), through confluent-kafka."""
    assert broker.kafka is not None
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.kafka, "linger.ms": 50})
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _m: reports.append(err))
    assert producer.flush(60) == 0
    return reports


def consume(broker: BrokerProcess, topic: str, count: int) -> list[Any]:
    assert broker.kafka is not None
    consumer = Consumer(
        {
            "bootstrap.servers": broker.kafka,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        messages: list[Any] = []
        for _ in range(20):
            messages += [m for m in consumer.consume(count - len(messages), 3) if not m.error()]
            if len(messages) >= count:
                break
        return messages
    finally:
        consumer.close()


def order_message_class(name: str = "shop.Order") -> Any:
    """A message class of the file ``shop/order.proto`` (messages Order, then Address),
    built at run time: no generated module to import."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3"
    )
    message = proto.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64)
    message.field.add(name="amount", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE)
    address = proto.message_type.add(name="Address")
    address.field.add(name="city", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def serialized(serializer: Callable[..., bytes], topic: str, values: list[Any]) -> list[bytes]:
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(value, context) for value in values]


def test_serializers_produce_to_validating_topics_and_read_back_unchanged(
    broker: BrokerProcess, registry: SchemaRegistryClient
) -> None:
    order = order_message_class()
    cases: list[tuple[str, Callable[..., bytes], Callable[..., Any], list[Any]]] = [
        (
            "avro-orders",
            AvroSerializer(registry, ORDER_AVRO),
            AvroDeserializer(registry),
            ORDERS,
        ),
        (
            "json-orders",
            JSONSerializer(ORDER_JSON, registry),
            JSONDeserializer(ORDER_JSON),
            ORDERS,
        ),
        (
            "proto-orders",
            ProtobufSerializer(order, registry),
            ProtobufDeserializer(order),
            [order(id=o["id"], amount=o["amount"]) for o in ORDERS],
        ),
    ]
    for topic, serializer, deserializer, values in cases:
        create_topic(broker, topic, **VALIDATE)
        sent = serialized(serializer, topic, values)
        assert produce(broker, topic, sent) == [None] * len(sent), topic
        got = consume(broker, topic, len(sent))
        assert [m.value() for m in got] == sent, topic
        context = SerializationContext(topic, MessageField.VALUE)
        assert [deserializer(m.value(), context) for m in got] == values, topic


def test_record_name_strategy_checks_a_protobuf_record_under_its_own_message(
    broker: BrokerProcess, registry: SchemaRegistryClient
) -> None:
    address = order_message_class("shop.Address")
    config = {"subject.name.strategy": record_subject_name_strategy}
    serializer = ProtobufSerializer(address, registry, config)
    create_topic(
        broker,
        "addresses",
        **VALIDATE,
        **{"confluent.value.subject.name.strategy": RECORD_NAME_STRATEGY},
    )
    sent = serialized(serializer, "addresses", [address(city="Oslo"), address(city="Rome")])
    assert produce(broker, "addresses", sent) == [None, None]
    subjects = registry.get_subjects()
    assert "shop.Address" in subjects and "shop.Order" not in subjects
    got = consume(broker, "addresses", 2)
    context = SerializationContext("addresses", MessageField.VALUE)
    assert [ProtobufDeserializer(address)(m.value(), context).city for m in got] == ["Oslo", "Rome"]


def record_batch(values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000, None, value, [])
    return bytes(builder.build())


def raw_produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> Any:
    """The partition answer of one Produce v9 carrying ``values`` in one batch."""
    assert broker.kafka is not None
    records = Records(record_batch(values))
    conn = RawConnection(broker.kafka, timeout_s=60)
    try:
        answer = conn.request(
            PRODUCE,
            9,
            ProduceRequest(
                acks=i16(-1),
                timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
                topic_data=(
                    TopicProduceData(
                        name=TopicName(topic),
                        partition_data=(PartitionProduceData(index=i32(0), records=records),),
                    ),
                ),
            ),
        )
    finally:
        conn.close()
    (part,) = answer.responses[0].partition_responses
    return part


def avro_payload(schema: str, value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(schema)), value)
    return out.getvalue()


@pytest.fixture(scope="module")
def strict(broker: BrokerProcess, registry: SchemaRegistryClient) -> Iterator[tuple[str, int, int]]:
    """A validating topic, its value schema's id, and an id registered under another subject."""
    from confluent_kafka.schema_registry import Schema

    create_topic(broker, "strict", **VALIDATE)
    own = registry.register_schema("strict-value", Schema(ORDER_AVRO, "AVRO"))
    other = registry.register_schema("elsewhere-value", Schema(USER_AVRO, "AVRO"))
    yield "strict", own, other


def test_bad_records_are_refused_whole_with_their_record_error(
    broker: BrokerProcess, strict: tuple[str, int, int]
) -> None:
    topic, own, other = strict
    good = frame(own, avro_payload(ORDER_AVRO, {"id": 1, "amount": 2.0}))
    bad_inputs = {
        "unknown schema id": (frame(own + 1000, good[5:]), "is not registered"),
        "missing magic byte": (good[5:], "unknown magic byte"),
        "wrong magic byte": (b"\x01" + good[1:], "unknown magic byte 1"),
        "truncated payload": (good[:-4], "truncated"),
        "another subject's schema": (
            frame(other, avro_payload(USER_AVRO, {"name": "ann"})),
            "not registered under subject 'strict-value'",
        ),
        "plain bytes": (b"hello, world", "unknown magic byte"),
    }
    for case, (bad, reason) in bad_inputs.items():
        part = raw_produce(broker, topic, [good, bad, good])
        assert part.error_code == INVALID_RECORD, case
        assert [e.batch_index for e in part.record_errors] == [1], case
        assert reason in part.record_errors[0].batch_index_error_message, case
        assert part.error_message and reason in part.error_message, case
        assert high_watermark(broker, topic) == 0, f"{case}: part of a refused batch was stored"

    (refused,) = produce(broker, topic, [b"plain bytes"])
    assert refused is not None and refused.code() == KafkaError.INVALID_RECORD, refused
    assert high_watermark(broker, topic) == 0
    assert raw_produce(broker, topic, [good, good]).error_code == 0
    assert high_watermark(broker, topic) == 2


def test_native_http_produce_of_a_bad_record_is_refused_and_stores_nothing(
    broker: BrokerProcess, strict: tuple[str, int, int]
) -> None:
    topic, own, _ = strict
    before = high_watermark(broker, topic)
    good = frame(own, avro_payload(ORDER_AVRO, {"id": 1, "amount": 2.0}))
    answer = httpx.post(
        f"{broker.url}/v1/topics/{topic}/records",
        json={
            "value_format": "base64",
            "records": [
                {"value": base64.b64encode(good).decode()},
                {"value": base64.b64encode(b"not framed").decode()},
            ],
        },
        timeout=60,
    )
    body = answer.json()
    assert answer.status_code == 400, answer.text
    assert body["error_code"] == INVALID_RECORD and body["error"] == "INVALID_RECORD", body
    assert body["details"]["record_errors"][0]["batch_index"] == 1, body
    assert high_watermark(broker, topic) == before


def test_dead_letter_topic_takes_the_bad_records_and_the_producer_succeeds(
    broker: BrokerProcess, strict: tuple[str, int, int], registry: SchemaRegistryClient
) -> None:
    _, own, _ = strict
    registry_subject_copy(registry, "lenient-value")
    create_topic(broker, "lenient-dlq")
    create_topic(
        broker,
        "lenient",
        **VALIDATE,
        **{"lakelog.schema.validation.dead.letter.topic": "lenient-dlq"},
    )
    good = frame(own, avro_payload(ORDER_AVRO, {"id": 5, "amount": 1.0}))
    part = raw_produce(broker, "lenient", [good, b"junk", good, frame(own + 1000, b"")])
    assert part.error_code == 0 and part.base_offset == 0, part
    assert high_watermark(broker, "lenient") == 2
    assert [m.value() for m in consume(broker, "lenient", 2)] == [good, good]
    dead = consume(broker, "lenient-dlq", 2)
    assert [m.value() for m in dead] == [b"junk", frame(own + 1000, b"")]
    headers = dict(dead[0].headers())
    assert headers[TOPIC_HEADER] == b"lenient" and headers[PARTITION_HEADER] == b"0"
    assert b"unknown magic byte" in headers[REASON_HEADER]
    assert produce(broker, "lenient", [b"junk"]) == [None]
    assert high_watermark(broker, "lenient-dlq") == 3


def registry_subject_copy(registry: SchemaRegistryClient, subject: str) -> int:
    from confluent_kafka.schema_registry import Schema

    return registry.register_schema(subject, Schema(ORDER_AVRO, "AVRO"))


def test_validation_configs_over_kafka_admin(broker: BrokerProcess) -> None:
    assert broker.kafka is not None
    admin = AdminClient({"bootstrap.servers": broker.kafka})
    created = admin.create_topics(
        [NewTopic("admin-made", 1, 1, config={"confluent.key.schema.validation": "true"})]
    )
    created["admin-made"].result(60)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "admin-made")
    (described,) = admin.describe_configs([resource]).values()
    entries = described.result(60)
    assert entries["confluent.key.schema.validation"].value == "true"
    assert entries["confluent.value.schema.validation"].value == "false"
    strategy = entries["confluent.value.subject.name.strategy"].value
    assert strategy == "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    changes = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in [
            ("confluent.value.schema.validation", "true"),
            ("confluent.key.schema.validation", "false"),
        ]
    ]
    altered = ConfigResource(ConfigResource.Type.TOPIC, "admin-made", incremental_configs=changes)
    admin.incremental_alter_configs([altered])[altered].result(60)
    answer = httpx.get(f"{broker.url}/v1/topics/admin-made", timeout=60).json()
    configs = {c["name"]: c["value"] for c in answer["configs"]}
    assert configs["confluent.value.schema.validation"] == "true"
    assert configs["confluent.key.schema.validation"] == "false"


@pytest.mark.s3
def test_s3_root_stores_a_good_record_and_refuses_a_bad_one(
    s3_settings: S3Settings, start_broker: Callable[..., BrokerProcess]
) -> None:
    root = RootSpec(f"s3://{new_bucket(s3_settings)}/lakelog", s3_settings)
    s3_broker = start_broker(root)
    create_topic(s3_broker, "s3-orders", **VALIDATE)
    serializer = AvroSerializer(SchemaRegistryClient({"url": s3_broker.url}), ORDER_AVRO)
    (good,) = serialized(serializer, "s3-orders", ORDERS[:1])
    assert produce(s3_broker, "s3-orders", [good]) == [None]
    part = raw_produce(s3_broker, "s3-orders", [good[:-2]])
    assert part.error_code == INVALID_RECORD and part.record_errors[0].batch_index == 0
    assert high_watermark(s3_broker, "s3-orders") == 1
    assert [m.value() for m in consume(s3_broker, "s3-orders", 1)] == [good]
