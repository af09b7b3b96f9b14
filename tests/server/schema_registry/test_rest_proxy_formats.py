"""The REST Proxy's schema'd embedded formats against one real broker process.

v2 produce with the avro, jsonschema and protobuf formats (an inline schema,
then its id) and v2 consumer instances of the same formats reading the records
back decoded; a record produced over REST read over Kafka by confluent-kafka's
AvroDeserializer; v3 produce naming its schema by id, version, subject and
subject name strategy; and bad input refused with the REST Proxy's codes and
nothing stored.
"""

from __future__ import annotations

import base64
import json
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

V2 = "application/vnd.kafka.v2+json"
GUARD_S = 60
#: Polls before a test gives up on records (each poll waits up to its own timeout).
POLLS = 60
ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "blob", "type": "bytes"},
        ],
    }
)
ORDER_JSON = json.dumps(
    {
        "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
        "required": ["id"],
        "additionalProperties": False,
    }
)
ORDER_PROTO = (
    'syntax = "proto3";\npackage shop;\nmessage Order {\n  int64 id = 1;\n  string note = 2;\n}\n'
)
#: format -> (value schema, the values produced, as a consumer instance shows them)
FORMATS: dict[str, tuple[str, list[Any], list[Any]]] = {
    "avro": (
        ORDER,
        [
            {"id": 1, "note": {"string": "first"}, "blob": "\u00ff\u0000"},
            {"id": 2, "note": None, "blob": ""},
        ],
        [
            {"id": 1, "note": {"string": "first"}, "blob": "\u00ff\u0000"},
            {"id": 2, "note": None, "blob": ""},
        ],
    ),
    "jsonschema": (
        ORDER_JSON,
        [{"id": 1, "note": "first"}, {"id": 2}],
        [{"id": 1, "note": "first"}, {"id": 2}],
    ),
    "protobuf": (
        ORDER_PROTO,
        [{"id": 1, "note": "first"}, {"id": 2}],
        [{"id": "1", "note": "first"}, {"id": "2", "note": ""}],
    ),
}
KEY_SCHEMAS = {"avro": '"string"', "jsonschema": '{"type": "string"}', "protobuf": None}


def content_type(fmt: str) -> str:
    return f"application/vnd.kafka.{fmt}.v2+json"


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    root = RootSpec(str(Path(tmp_path_factory.mktemp("formats-root"))))
    return start_module_broker(
        root,
        group_min_session_timeout_ms=500,
        group_initial_rebalance_delay_ms=0,
        group_tick_ms=50,
    )


@pytest.fixture
def http(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, timeout=GUARD_S) as client:
        yield client


def create_topic(http: httpx.Client, name: str) -> None:
    response = http.post("/v1/topics", json={"name": name, "partitions": 1})
    assert response.status_code == 201, response.text


def produce_v2(http: httpx.Client, topic: str, fmt: str, body: dict[str, Any]) -> httpx.Response:
    return http.post(
        f"/topics/{topic}", content=json.dumps(body), headers={"Content-Type": content_type(fmt)}
    )


def end_offset(http: httpx.Client, topic: str) -> int:
    response = http.get(f"/topics/{topic}/partitions/0/offsets")
    assert response.status_code == 200, response.text
    end: int = response.json()["end_offset"]
    return end


def stored(http: httpx.Client, topic: str) -> list[dict[str, Any]]:
    """The topic's records as stored (base64 keys and values), through a binary instance."""
    return consume(http, topic, "binary", end_offset(http, topic))


def consume(http: httpx.Client, topic: str, fmt: str, count: int) -> list[dict[str, Any]]:
    """``count`` records of partition 0 from its start, through a new instance of ``fmt``."""
    group = f"g-{topic}-{fmt}-{time.monotonic_ns()}"
    headers = {"Content-Type": V2}
    created = http.post(
        f"/consumers/{group}",
        content=json.dumps({"format": fmt, "auto.offset.reset": "earliest"}),
        headers=headers,
    )
    assert created.status_code == 200, created.text
    base = f"/consumers/{group}/instances/{created.json()['instance_id']}"
    partitions = {"partitions": [{"topic": topic, "partition": 0}]}
    assigned = http.post(f"{base}/assignments", content=json.dumps(partitions), headers=headers)
    assert assigned.status_code == 204, assigned.text
    out: list[dict[str, Any]] = []
    accept = content_type(fmt)
    for _ in range(POLLS):
        if len(out) >= count:
            break
        got = http.get(f"{base}/records", params={"timeout": 500}, headers={"Accept": accept})
        assert got.status_code == 200, got.text
        assert got.headers["content-type"].startswith(accept)
        out += got.json()
    assert len(out) >= count, f"only {out} after {POLLS} polls"
    assert http.delete(base, headers=headers).status_code == 204
    return out


def v2_error(response: httpx.Response, status: int, code: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_code"] == code, body
    return str(body["message"])


def framed_id(b64: str) -> int:
    data = base64.b64decode(b64)
    assert data[0] == 0, data
    schema_id: int = struct.unpack(">I", data[1:5])[0]
    return schema_id


# -- v2 -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_v2_produce_inline_then_by_id_and_consume_decoded(http: httpx.Client, fmt: str) -> None:
    topic = f"orders-{fmt}"
    create_topic(http, topic)
    schema, values, shown = FORMATS[fmt]
    key_schema = KEY_SCHEMAS[fmt]
    body: dict[str, Any] = {"value_schema": schema, "records": [{"value": values[0]}]}
    if key_schema is not None:
        body["key_schema"] = key_schema
        body["records"][0]["key"] = "k1"
    first = produce_v2(http, topic, fmt, body)
    assert first.status_code == 200, first.text
    answer = first.json()
    value_id = answer["value_schema_id"]
    assert isinstance(value_id, int)
    assert (answer["key_schema_id"] is None) == (key_schema is None)
    assert answer["offsets"] == [{"partition": 0, "offset": 0, "error_code": None, "error": None}]

    # by id, and a null key needs no key schema
    second = produce_v2(
        http, topic, fmt, {"value_schema_id": value_id, "records": [{"value": values[1]}]}
    )
    assert second.status_code == 200, second.text
    assert second.json()["value_schema_id"] == value_id
    assert second.json()["key_schema_id"] is None

    # the subject is <topic>-value, and the same inline schema keeps its id
    again = produce_v2(http, topic, fmt, {"value_schema": schema, "records": [{"value": None}]})
    assert again.json()["value_schema_id"] == value_id
    found = http.get(f"/topics/{topic}/partitions/0/offsets").json()
    assert found["end_offset"] == 3

    raw = stored(http, topic)
    assert [framed_id(r["value"]) for r in raw[:2]] == [value_id, value_id]
    assert raw[2]["value"] is None  # a tombstone stays a tombstone

    records = consume(http, topic, fmt, 3)
    assert [r["value"] for r in records] == [*shown, None]
    assert [r["key"] for r in records] == ["k1" if key_schema else None, None, None]
    assert [r["offset"] for r in records] == [0, 1, 2]


def test_v2_refusals_store_nothing(http: httpx.Client) -> None:
    topic = "refusals-v2"
    create_topic(http, topic)
    v2_error(produce_v2(http, topic, "avro", {"value_schema": ORDER, "records": []}), 422, 422)
    missing = {"records": [{"value": {"id": 1, "note": None, "blob": ""}}]}
    assert "value schema" in v2_error(produce_v2(http, topic, "avro", missing), 422, 42202)
    keyed = {"value_schema": ORDER, "records": [{"key": "k", "value": {"id": 1}}]}
    assert "key schema" in v2_error(produce_v2(http, topic, "avro", keyed), 422, 42201)
    # data that does not match the schema: the whole request is refused
    not_matching = {
        "value_schema": ORDER,
        "records": [
            {"value": {"id": 1, "note": None, "blob": ""}},
            {"value": {"id": "one", "note": None, "blob": ""}},
        ],
    }
    message = v2_error(produce_v2(http, topic, "avro", not_matching), 422, 42203)
    assert "records[1].value" in message
    unknown = {"value_schema_id": 987654, "records": [{"value": {"id": 1}}]}
    assert "987654" in v2_error(produce_v2(http, topic, "avro", unknown), 408, 40801)
    invalid = {"value_schema": '{"type": "record", "name": "R"}', "records": [{"value": {}}]}
    v2_error(produce_v2(http, topic, "avro", invalid), 422, 42205)
    # a schema of another format than the content type's
    create_topic(http, "refusals-proto")
    proto_body = {"value_schema": ORDER_PROTO, "records": [{"value": {"id": 3}}]}
    proto = produce_v2(http, "refusals-proto", "protobuf", proto_body)
    assert proto.status_code == 200, proto.text
    other = {"value_schema_id": proto.json()["value_schema_id"], "records": [{"value": {"id": 1}}]}
    v2_error(produce_v2(http, topic, "avro", other), 422, 42205)
    assert end_offset(http, topic) == 0


def test_rest_avro_record_read_by_confluent_deserializer(
    http: httpx.Client, broker: BrokerProcess
) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = "orders-kafka"
    create_topic(http, topic)
    value = {"id": 7, "note": {"string": "over kafka"}, "blob": "\u0001\u0002"}
    produced = produce_v2(
        http, topic, "avro", {"value_schema": ORDER, "records": [{"value": value}]}
    )
    assert produced.status_code == 200, produced.text

    deserializer = AvroDeserializer(SchemaRegistryClient({"url": broker.url}))
    consumer = Consumer(
        {"bootstrap.servers": broker.kafka, "group.id": "avro-reader", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = None
        for _ in range(POLLS):
            message = consumer.poll(1.0)
            if message is not None:
                break
        assert message is not None, f"no record over Kafka after {POLLS} polls"
        assert message.error() is None, message.error()
        context = SerializationContext(topic, MessageField.VALUE)
        decoded = deserializer(message.value(), context)
    finally:
        consumer.close()
    assert decoded == {"id": 7, "note": "over kafka", "blob": b"\x01\x02"}


# -- v3 -------------------------------------------------------------------------------


def produce_v3(http: httpx.Client, topic: str, *records: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    response = http.post(
        f"/v3/clusters/{cluster}/topics/{topic}/records",
        content="\n".join(json.dumps(r) for r in records),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def test_v3_produce_names_its_schema_every_way(http: httpx.Client) -> None:
    topic = "orders-v3"
    create_topic(http, topic)
    order = {"id": 1, "note": None, "blob": ""}
    (inline,) = produce_v3(http, topic, {"value": {"type": "AVRO", "schema": ORDER, "data": order}})
    assert inline["error_code"] == 200, inline
    value = inline["value"]
    assert value["type"] == "AVRO" and value["subject"] == f"{topic}-value"
    assert value["schema_version"] == 1
    schema_id = value["schema_id"]

    by_id, by_version, by_subject, latest, key_by_strategy = produce_v3(
        http,
        topic,
        {"value": {"schema_id": schema_id, "data": {**order, "id": 2}}},
        {"value": {"schema_version": 1, "data": {**order, "id": 3}}},
        {"value": {"subject": f"{topic}-value", "data": {**order, "id": 4}}},
        {"value": {"type": "AVRO", "data": {**order, "id": 5}}},
        {
            "key": {"subject_name_strategy": "RECORD_NAME", "schema_id": schema_id, "data": order},
            "value": {"subject_name_strategy": "TOPIC_NAME", "data": {**order, "id": 6}},
        },
    )
    for report in (by_id, by_version, by_subject, latest):
        assert report["error_code"] == 200, report
        assert {
            k: report["value"][k] for k in ("type", "subject", "schema_id", "schema_version")
        } == {
            "type": "AVRO",
            "subject": f"{topic}-value",
            "schema_id": schema_id,
            "schema_version": 1,
        }
    # RECORD_NAME names the subject after the record, where this schema is not registered
    assert key_by_strategy["error_code"] == 42207, key_by_strategy
    assert "shop.Order" in key_by_strategy["message"]

    # TOPIC_RECORD_NAME with an inline schema registers it under <topic>-<record name>
    (record_named,) = produce_v3(
        http,
        topic,
        {
            "key": {
                "type": "AVRO",
                "subject_name_strategy": "TOPIC_RECORD_NAME",
                "schema": ORDER,
                "data": order,
            },
            "value": {"schema_id": schema_id, "data": {**order, "id": 7}},
        },
    )
    assert record_named["error_code"] == 200, record_named
    assert record_named["key"]["subject"] == f"{topic}-shop.Order"
    assert record_named["key"]["schema_id"] == schema_id
    (by_record_name,) = produce_v3(
        http,
        topic,
        {"value": {"subject": f"{topic}-shop.Order", "data": {**order, "id": 8}}},
    )
    assert by_record_name["value"]["subject"] == f"{topic}-shop.Order"

    records = consume(http, topic, "avro", 7)
    assert [r["value"]["id"] for r in records] == [1, 2, 3, 4, 5, 7, 8]


def test_v3_refusals_are_reported_per_record_and_store_nothing(http: httpx.Client) -> None:
    topic = "refusals-v3"
    create_topic(http, topic)
    order = {"id": 1, "note": None, "blob": ""}
    reports = produce_v3(
        http,
        topic,
        {"value": {"type": "AVRO", "schema": ORDER, "data": {"id": "one"}}},
        {"value": {"schema_id": 987654, "data": order}},
        {"value": {"type": "AVRO", "schema": '{"type": "nope"}', "data": order}},
        {"value": {"schema_version": 9, "data": order}},
        {"value": {"type": "BINARY", "schema_id": 1, "data": "QQ=="}},
        {"value": {"schema_id": 1, "schema_version": 1, "data": order}},
        {"value": {"subject_name_strategy": "RECORD_NAME", "data": order}},
    )
    codes = [r["error_code"] for r in reports]
    assert codes == [400, 42207, 400, 400, 400, 400, 400], reports
    assert "does not match schema" in reports[0]["message"]
    assert "987654" in reports[1]["message"]
    assert end_offset(http, topic) == 0


def test_schemad_produce_needs_the_callers_subject_acls(
    tmp_path: Path, start_broker: Callable[..., BrokerProcess]
) -> None:
    from tests.server.security.helpers import acl, add_acls, call, key, start_secured
    from tests.server.security.helpers import create_topic as create_secured_topic

    secured = start_secured(start_broker, RootSpec(str(tmp_path / "root")), tmp_path)
    writer, reader = key("User:alice"), key("User:bob")
    add_acls(
        secured,
        acl("User:alice", "WRITE", "acl-orders"),
        acl("User:bob", "WRITE", "acl-orders"),
        acl("User:alice", "WRITE", "acl-orders-value", "SUBJECT"),
        acl("User:bob", "READ", "acl-orders-value", "SUBJECT"),
    )
    create_secured_topic(secured, "acl-orders")
    body = {"value_schema": ORDER, "records": [{"value": {"id": 1, "note": None, "blob": ""}}]}
    headers = {"Content-Type": content_type("avro")}

    def produce(who: dict[str, str]) -> httpx.Response:
        return call(
            secured, "POST", "/topics/acl-orders", {**who, **headers}, content=json.dumps(body)
        )

    v2_error(produce(reader), 403, 40301)  # READ cannot register the schema
    assert produce(writer).status_code == 200
    assert produce(reader).status_code == 200  # READ finds it registered
    cluster = call(secured, "GET", "/v3/clusters", writer).json()["data"][0]["cluster_id"]
    v3 = call(
        secured,
        "POST",
        f"/v3/clusters/{cluster}/topics/acl-orders/records",
        {**reader, "Content-Type": "application/json"},
        content=json.dumps({"value": {"subject": "other-value", "data": {"id": 2}}}),
    )
    (report,) = [json.loads(line) for line in v3.text.splitlines()]
    assert report["error_code"] == 403, report
