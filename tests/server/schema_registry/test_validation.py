"""Validation on produce, pure: framing, registration under the subject, decoding, caching,
and the dead-letter records. Real Avro schemas; the registry is a dict."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest

from lakelog.errors import SchemaNotFoundError, SchemaValidationError
from lakelog.partitioner import make_keyless_partitioner
from lakelog.produce import prepare_batch
from lakelog.produce_batch import ProduceBatch
from lakelog.topic_config import (
    RECORD_NAME_STRATEGY,
    TOPIC_RECORD_NAME_STRATEGY,
    TopicConfig,
)
from server.schema_registry.dead_letters import (
    PARTITION_HEADER,
    REASON_HEADER,
    TOPIC_HEADER,
    dead_letter_batch,
    merge_results,
    stored_offsets,
)
from server.schema_registry.formats import format_of
from server.schema_registry.framing import frame
from server.schema_registry.protobuf import encoder
from server.schema_registry.subjects import record_name, subject_for
from server.schema_registry.types import ParsedSchema, SchemaType
from server.schema_registry.validation import SchemaValidator

ORDER: dict[str, object] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}],
}
USER: dict[str, object] = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "name", "type": "string"}],
}
VALIDATE_VALUES = TopicConfig({"confluent.value.schema.validation": "true"})


class FakeRegistry:
    """ids to schemas and (subject, version) pairs; counts what it is asked."""

    def __init__(self) -> None:
        self.schemas: dict[int, ParsedSchema] = {}
        self.subjects: dict[int, list[tuple[str, int]]] = {}
        self.asked: list[int] = []

    def add(self, schema_id: int, schema: dict[str, object], *subjects: str) -> None:
        avro = format_of(SchemaType.AVRO)
        self.schemas[schema_id] = avro.parse(json.dumps(schema), {})
        self.subjects[schema_id] = [(s, 1) for s in subjects]

    def add_protobuf(self, schema_id: int, text: str, *subjects: str) -> ParsedSchema:
        self.schemas[schema_id] = format_of(SchemaType.PROTOBUF).parse(text, {})
        self.subjects[schema_id] = [(s, 1) for s in subjects]
        return self.schemas[schema_id]

    def schema_by_id(self, schema_id: int) -> ParsedSchema:
        self.asked.append(schema_id)
        if schema_id not in self.schemas:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return self.schemas[schema_id]

    def versions_with_id(self, schema_id: int) -> list[tuple[str, int]]:
        if schema_id not in self.schemas:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return self.subjects[schema_id]


def avro(schema: dict[str, object], value: dict[str, object]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def order(schema_id: int = 1, i: int = 7) -> bytes:
    return frame(schema_id, avro(ORDER, {"id": i, "amount": 2.5}))


@pytest.fixture
def registry() -> FakeRegistry:
    found = FakeRegistry()
    found.add(1, ORDER, "orders-value")
    found.add(2, USER, "users-value")
    return found


def check(validator: SchemaValidator, values: list[bytes | None], **config: str) -> list[str]:
    chosen = TopicConfig({"confluent.value.schema.validation": "true", **config})
    keys = pa.chunked_array([pa.nulls(len(values), pa.binary())])
    problems = validator.check("orders", chosen, keys, pa.chunked_array([values], pa.binary()))
    return [f"{p.batch_index}: {p.reason}" for p in problems]


def test_good_records_and_tombstones_pass(registry: FakeRegistry) -> None:
    assert check(SchemaValidator(registry), [order(), None, order(i=8)]) == []


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"plain bytes", "unknown magic byte 112"),
        (b"", "empty"),
        (b"\x00\x00\x00", "too short"),
        (frame(99, b"\x02"), "schema id 99 is not registered"),
        (order()[:-3], "truncated"),
        (frame(2, avro(USER, {"name": "ann"})), "not registered under subject 'orders-value'"),
        (order() + b"\x00", "bytes left after one datum"),
    ],
)
def test_bad_values_are_refused_with_their_reason(
    registry: FakeRegistry, value: bytes, reason: str
) -> None:
    (problem,) = check(SchemaValidator(registry), [order(), value])
    assert problem.startswith("1: value: ")
    assert reason in problem


def test_keys_are_checked_only_when_configured(registry: FakeRegistry) -> None:
    registry.add(3, USER, "orders-key")
    validator = SchemaValidator(registry)
    config = TopicConfig({"confluent.key.schema.validation": "true"})
    keys = pa.chunked_array([[frame(3, avro(USER, {"name": "k"})), b"bad", None]], pa.binary())
    values = pa.chunked_array([[b"not checked"] * 3], pa.binary())
    problems = validator.check("orders", config, keys, values)
    assert [(p.batch_index, p.reason.split(":")[0]) for p in problems] == [(1, "key")]


def test_record_name_strategies_name_the_subject(registry: FakeRegistry) -> None:
    registry.add(4, ORDER, "shop.Order", "orders-shop.Order")
    validator = SchemaValidator(registry)
    strategy = "confluent.value.subject.name.strategy"
    assert check(validator, [order(4)], **{strategy: RECORD_NAME_STRATEGY}) == []
    assert check(validator, [order(4)], **{strategy: TOPIC_RECORD_NAME_STRATEGY}) == []
    (refused,) = check(validator, [order(1)], **{strategy: RECORD_NAME_STRATEGY})
    assert "not registered under subject 'shop.Order'" in refused
    assert subject_for(RECORD_NAME_STRATEGY, "t", False, None) is None
    assert record_name(registry.schemas[2]) == "User"


SHOP_PROTO = """
syntax = "proto3";
package shop;
message Order { int64 id = 1; }
message Address { string city = 1; }
"""


def test_record_name_strategies_name_each_protobuf_records_own_message(
    registry: FakeRegistry,
) -> None:
    schema = registry.add_protobuf(5, SHOP_PROTO, "shop.Order", "shop.Address")
    strategy = {"confluent.value.subject.name.strategy": RECORD_NAME_STRATEGY}
    order_value = frame(5, encoder(schema)({"id": "1"}))
    address = frame(5, encoder(schema, "shop.Address")({"city": "Oslo"}))
    validator = SchemaValidator(registry)
    assert check(validator, [order_value, address, address], **strategy) == []
    registry.subjects[5] = [("shop.Order", 1)]
    (refused,) = check(SchemaValidator(registry), [order_value, address], **strategy)
    assert refused.startswith("1: ") and "not registered under subject 'shop.Address'" in refused


def test_ids_are_looked_up_once_and_refreshed_after_the_ttl(registry: FakeRegistry) -> None:
    now = [0.0]
    validator = SchemaValidator(registry, clock=lambda: now[0])
    keys = pa.chunked_array([pa.nulls(2, pa.binary())])
    values = pa.chunked_array([[order(), frame(99, b"")]], pa.binary())
    validator.check("orders", VALIDATE_VALUES, keys, values)
    asked = len(registry.asked)
    for _ in range(3):
        validator.check("orders", VALIDATE_VALUES, keys, values)
    assert len(registry.asked) == asked, "a fresh id is answered from memory"
    registry.subjects[1] = []  # its only version deleted
    now[0] += 2.0
    (problem, _) = validator.check("orders", VALIDATE_VALUES, keys, values)
    assert "no subject (deleted)" in problem.reason


def test_the_check_in_memory_needs_every_id_fresh_and_answers_as_check(
    registry: FakeRegistry,
) -> None:
    now = [0.0]
    validator = SchemaValidator(registry, clock=lambda: now[0])
    keys = pa.chunked_array([pa.nulls(3, pa.binary())])
    values = pa.chunked_array([[order(), order()[:-3], order() + b"\x00"]], pa.binary())
    assert validator.check_in_memory("orders", VALIDATE_VALUES, keys, values) is None
    asked = len(registry.asked)
    found = validator.check("orders", VALIDATE_VALUES, keys, values)
    assert [p.batch_index for p in found] == [1, 2]
    assert validator.check_in_memory("orders", VALIDATE_VALUES, keys, values) == found
    assert len(registry.asked) == asked + 1, "only check read the registry"
    now[0] += 2.0  # the subjects are stale: a worker reads them again
    assert validator.check_in_memory("orders", VALIDATE_VALUES, keys, values) is None
    other = pa.chunked_array([[frame(2, avro(USER, {"name": "ann"}))]], pa.binary())
    one_key = pa.chunked_array([pa.nulls(1, pa.binary())])
    validator.check("orders", VALIDATE_VALUES, one_key, other)
    # id 2 is in memory, but not under orders-value: the refusal reads the registry again.
    assert validator.check_in_memory("orders", VALIDATE_VALUES, one_key, other) is None


def test_a_subject_registered_since_the_last_read_is_seen_at_once(
    registry: FakeRegistry,
) -> None:
    validator = SchemaValidator(registry, clock=lambda: 0.0)
    assert check(validator, [order()]) == []
    registry.subjects[1].append(("lenient-value", 1))
    values = pa.chunked_array([[order()]], pa.binary())
    keys = pa.chunked_array([pa.nulls(1, pa.binary())])
    assert validator.check("lenient", VALIDATE_VALUES, keys, values) == []


def test_prepare_refuses_the_whole_batch_naming_each_record(registry: FakeRegistry) -> None:
    validator = SchemaValidator(registry)
    rows = ProduceBatch.from_columns(value=[order(), b"junk", order(), frame(99, b"")])
    with pytest.raises(SchemaValidationError) as refused:
        prepare_batch(
            rows,
            topic="orders",
            num_partitions=1,
            config=VALIDATE_VALUES,
            keyless=make_keyless_partitioner("sticky"),
            now_ms=0,
            record_check=validator.check,
        )
    error = refused.value
    assert error.code == 87 and error.http_status == 400
    assert error.message.startswith("record 1: value: unknown magic byte")
    assert "(1 more refused)" in error.message
    assert [e["batch_index"] for e in error.details["record_errors"]] == [1, 3]
    assert [i for i, _ in error.refused] == [1, 3]


def test_prepare_without_a_check_refuses_a_validating_topic() -> None:
    with pytest.raises(SchemaValidationError, match="only a broker"):
        prepare_batch(
            ProduceBatch.from_columns(value=[order()]),
            topic="orders",
            num_partitions=1,
            config=VALIDATE_VALUES,
            keyless=make_keyless_partitioner("sticky"),
            now_ms=0,
        )


def test_dead_letters_keep_the_bytes_and_name_the_reason() -> None:
    rows = ProduceBatch.from_columns(
        partition=[0, 2, None],
        key=[b"k0", b"k1", b"k2"],
        value=[b"v0", b"\xff", None],
        headers=[[], [{"key": "trace", "value": b"t"}], None],
        timestamp=[1, 2, 3],
    )
    dead = dead_letter_batch(rows, {1: "value: unknown magic byte 255", 2: "key: empty"}, "orders")
    table = dead.table
    assert table.column("key").to_pylist() == [b"k1", b"k2"]
    assert table.column("value").to_pylist() == [b"\xff", None]
    assert table.column("partition").null_count == 2
    first, second = table.column("headers").to_pylist()
    assert first == [
        {"key": "trace", "value": b"t"},
        {"key": REASON_HEADER, "value": b"value: unknown magic byte 255"},
        {"key": TOPIC_HEADER, "value": b"orders"},
        {"key": PARTITION_HEADER, "value": b"2"},
    ]
    assert [h["key"] for h in second] == [REASON_HEADER, TOPIC_HEADER]


def test_merged_results_answer_dead_letters_with_minus_one() -> None:
    from lakelog.append import AppendResult

    kept = AppendResult([0, 0], [10, 11], [5, 5], [], 3)
    merged = merge_results(3, [0, 2], kept)
    assert merged.offsets == [10, -1, 11]
    assert merged.partitions == [0, -1, 0]
    _, offsets, _ = merged.arrays()
    assert stored_offsets(offsets).tolist() == [10, 11]
    assert merge_results(2, [], None).offsets == [-1, -1]


def test_sliced_and_chunked_columns_are_read_at_their_offsets(registry: FakeRegistry) -> None:
    validator = SchemaValidator(registry)
    whole = pa.array([b"lead", order(), None, b"\x00\x00", order(), b""], pa.binary())
    values = pa.chunked_array([whole.slice(1, 3), whole.slice(4, 2)])
    keys = pa.chunked_array([pa.nulls(5, pa.binary())])
    problems = validator.check("orders", VALIDATE_VALUES, keys, values)
    assert [(p.batch_index, p.reason.split(":")[1].strip()[:5]) for p in problems] == [
        (2, "2 byt"),
        (4, "empty"),
    ]
