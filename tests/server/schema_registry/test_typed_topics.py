"""A validated Avro topic produced over Kafka is a typed table: delta-rs and Spark read fields.

One broker subprocess for the module: confluent-kafka's ``AvroSerializer`` registers
the schemas with the broker's Schema Registry and frames the values, a
confluent-kafka producer sends them over the Kafka protocol.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from deltalake import DeltaTable

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.schema_registry.test_produce_validation import (
    ORDER_JSON,
    ORDERS,
    VALIDATE,
    create_topic,
    order_message_class,
)
from tests.spark_connector.helpers import root_options

TOPIC = "orders"
ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
ORDER_V2 = {
    **ORDER_V1,
    "fields": [
        *ORDER_V1["fields"],
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}


class Typed:
    """The module's broker, root and registry."""

    def __init__(self, broker: BrokerProcess, root: RootSpec) -> None:
        self.broker = broker
        self.root = root
        self.registry = SchemaRegistryClient({"url": broker.url})

    def serializer(self, schema: dict[str, Any], topic: str) -> Callable[[dict[str, Any]], bytes]:
        """Confluent's serializer, registering ``schema`` under ``{topic}-value`` on first use."""
        avro = AvroSerializer(self.registry, json.dumps(schema))
        context = SerializationContext(topic, MessageField.VALUE)

        def serialize(record: dict[str, Any]) -> bytes:
            data = avro(record, context)
            assert data is not None
            return bytes(data)

        return serialize

    def produce(
        self, values: Sequence[bytes | None], keys: list[bytes] | None = None, topic: str = TOPIC
    ) -> None:
        assert self.broker.kafka is not None
        producer = Producer({"bootstrap.servers": self.broker.kafka, "linger.ms": 5})
        failures: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(str(err))

        for i, value in enumerate(values):
            key = keys[i] if keys else None
            producer.produce(topic, value=value, key=key, partition=0, on_delivery=delivered)
        producer.flush(30)
        assert failures == []

    def table(self, topic: str = TOPIC) -> DeltaTable:
        storage = self.root.open()
        pointer = json.loads(storage.read_bytes(f"_meta/topics/{topic}.json"))
        return DeltaTable(
            storage.delta_uri(pointer["table"]),
            storage_options=storage.delta_storage_options() or None,
        )

    def spark_options(self) -> dict[str, str]:
        """The connector's options reaching the module's root (S3 settings as options)."""
        return {k: v for k, v in root_options(self.root).items() if k != "root"}


def order(i: int, **more: Any) -> dict[str, Any]:
    return {
        "id": i,
        "customer": f"c{i % 3}",
        "amount": 10.0 * i,
        "placed": 1_700_000_000_000 + i,
        "note": None if i % 2 else f"n{i}",
        **more,
    }


def create_orders_topic(broker: BrokerProcess, topic: str) -> None:
    response = httpx.post(
        f"{broker.url}/v1/topics",
        json={
            "name": topic,
            "partitions": 1,
            "configs": {"confluent.value.schema.validation": "true", "cleanup.policy": "compact"},
        },
        timeout=60,
    )
    assert response.status_code == 201, response.text


def produce_orders(typed: Typed, topic: str) -> list[bytes]:
    """Offsets 0-5: v1 orders keyed k0-k2; 6: a v2 order (a coupon) for k0; 7: k2's tombstone.

    Returns the values of offsets 0-5 as sent.
    """
    create_orders_topic(typed.broker, topic)
    v1 = typed.serializer(ORDER_V1, topic)
    sent = [v1(order(i)) for i in range(6)]
    typed.produce(sent, keys=[b"k%d" % (i % 3) for i in range(6)], topic=topic)
    v2 = typed.serializer(ORDER_V2, topic)
    typed.produce([v2(order(100, coupon="SAVE"))], keys=[b"k0"], topic=topic)
    typed.produce([None], keys=[b"k2"], topic=topic)
    return sent


class Orders(NamedTuple):
    typed: Typed
    sent: list[bytes]


@pytest.fixture(scope="module")
def typed(module_root: RootSpec, start_module_broker: Callable[..., BrokerProcess]) -> Typed:
    return Typed(start_module_broker(module_root), module_root)


@pytest.fixture(scope="module")
def orders(typed: Typed) -> Orders:
    """The ``orders`` topic, produced once; the tests that read it do not change it."""
    return Orders(typed, produce_orders(typed, TOPIC))


def test_fields_are_columns_the_moment_records_are_acknowledged(orders: Orders) -> None:
    typed, sent = orders
    table = typed.table()
    fields = {f.name: f for f in table.schema().fields}
    assert "value_fields" in fields
    rows = sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["offset"])[:6]
    assert [r["value"] for r in rows] == sent  # the original bytes, byte for byte
    first = rows[0]["value_fields"]
    assert first["id"] == 0
    assert first["customer"] == "c0"
    assert first["note"] == "n0"
    assert first["placed"].timestamp() == 1_700_000_000
    assert [r["value_fields"]["amount"] for r in rows] == [10.0 * i for i in range(6)]

    # Kafka consumers get the bytes as produced.
    assert typed.broker.kafka is not None
    consumer = Consumer(
        {"bootstrap.servers": typed.broker.kafka, "group.id": "g", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    while len(got) < len(sent):
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        got.append(bytes(message.value() or b""))
    consumer.close()
    assert got == sent


def test_a_compatible_new_version_adds_a_nullable_field(orders: Orders) -> None:
    typed = orders.typed
    assert typed.registry.get_versions(f"{TOPIC}-value") == [1, 2]
    table = typed.table()
    value_fields = next(f for f in table.schema().fields if f.name == "value_fields")
    names = [f.name for f in value_fields.type.fields]  # type: ignore[union-attr]
    assert names == ["id", "customer", "amount", "placed", "note", "coupon"]
    rows = {r["offset"]: r["value_fields"] for r in table.to_pyarrow_table().to_pylist()}
    assert rows[0]["coupon"] is None  # written before the field existed
    assert rows[6]["coupon"] == "SAVE"
    assert rows[7] is None  # a tombstone has no fields


def test_json_schema_and_protobuf_values_are_typed(typed: Typed) -> None:
    order = order_message_class()
    cases: list[tuple[str, Callable[..., bytes | None], list[Any]]] = [
        ("json-orders", JSONSerializer(ORDER_JSON, typed.registry), ORDERS),
        (
            "proto-orders",
            ProtobufSerializer(order, typed.registry, {"use.deprecated.format": False}),
            [order(id=o["id"], amount=o["amount"]) for o in ORDERS],
        ),
    ]
    for topic, serializer, values in cases:
        create_topic(typed.broker, topic, **VALIDATE)
        context = SerializationContext(topic, MessageField.VALUE)
        typed.produce([serializer(v, context) for v in values], topic=topic)
        rows = sorted(typed.table(topic).to_pyarrow_table().to_pylist(), key=lambda r: r["offset"])
        assert [r["value_fields"] for r in rows] == ORDERS, topic


def test_json_schema_values_with_a_referenced_schema_are_typed(typed: Typed) -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}}
    typed.registry.register_schema("address", Schema(json.dumps(address), "JSON"))
    order_schema = {
        "type": "object",
        "title": "Shipment",
        "properties": {"id": {"type": "integer"}, "ship_to": {"$ref": "address.json"}},
    }
    reference = SchemaReference("address.json", "address", 1)
    schema = Schema(json.dumps(order_schema), "JSON", [reference])
    serializer = JSONSerializer(schema, typed.registry)
    topic = "json-shipments"
    create_topic(typed.broker, topic, **VALIDATE)
    values = [{"id": 1, "ship_to": {"city": "Oslo"}}, {"id": 2, "ship_to": {"city": "Rome"}}]
    context = SerializationContext(topic, MessageField.VALUE)
    typed.produce([serializer(v, context) for v in values], topic=topic)
    rows = sorted(typed.table(topic).to_pyarrow_table().to_pylist(), key=lambda r: r["offset"])
    assert [r["value_fields"] for r in rows] == values


def test_spark_sql_filters_and_aggregates_a_typed_field(orders: Orders, spark: Any) -> None:
    from spark_connector import read_topic, register_topics

    typed = orders.typed
    options = typed.spark_options()
    views = register_topics(spark, typed.root.url, [TOPIC], prefix="typed_", options=options)
    view = views[TOPIC]
    totals = spark.sql(
        f"SELECT value_fields.customer AS c, sum(value_fields.amount) AS s FROM {view} "
        "WHERE value_fields.amount >= 20 GROUP BY value_fields.customer ORDER BY c"
    ).collect()
    assert [(r["c"], r["s"]) for r in totals] == [("c0", 30.0), ("c1", 1040.0), ("c2", 70.0)]
    native = read_topic(spark, TOPIC, root=typed.root.url, options=options)
    assert native.where("value_fields.coupon = 'SAVE'").count() == 1
    snap = register_topics(
        spark, typed.root.url, [TOPIC], prefix="snap_", snapshot=True, options=options
    )
    count = spark.sql(f"SELECT count(value_fields.id) AS n FROM {snap[TOPIC]}").collect()[0]["n"]
    assert count == 7


def test_upsert_view_is_latest_per_key_with_tombstones_applied(orders: Orders, spark: Any) -> None:
    from spark_connector import register_topics

    typed = orders.typed
    views = register_topics(
        spark,
        typed.root.url,
        [TOPIC],
        prefix="upsert_",
        mode="upsert",
        options=typed.spark_options(),
    )
    rows = spark.sql(
        f"SELECT CAST(key AS STRING) AS k, offset, value_fields.id AS id FROM {views[TOPIC]} "
        "ORDER BY k"
    ).collect()
    assert [(r["k"], r["offset"], r["id"]) for r in rows] == [("k0", 6, 100), ("k1", 4, 4)]


def test_compaction_keeps_the_typed_column(typed: Typed, spark: Any) -> None:
    from compaction.compact import compact_topic
    from lakelog import Catalog

    topic = "orders-compacted"
    produce_orders(typed, topic)
    catalog = Catalog(typed.root.open())
    try:
        report = compact_topic(catalog, topic, spark, force=True)
    finally:
        catalog.close()
    assert report.status == "ok", report.message
    rows = sorted(typed.table(topic).to_pyarrow_table().to_pylist(), key=lambda r: r["offset"])
    # The latest record of each key before the active segment, then the active one.
    ids = [(r["offset"], r["value_fields"] and r["value_fields"]["id"]) for r in rows]
    assert ids == [(4, 4), (5, 5), (6, 100), (7, None)]  # the tombstone is the active segment
    assert rows[2]["value_fields"]["coupon"] == "SAVE"
    assert rows[0]["value_fields"]["coupon"] is None
