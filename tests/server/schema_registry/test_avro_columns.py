"""Avro payloads as typed columns: the type mapping, and rows grouped by schema id."""

from __future__ import annotations

import datetime
import decimal
import io
import json
from typing import Any

import fastavro
import pyarrow as pa

from lakelog.topic_config import TopicConfig
from server.schema_registry.avro import FORMAT
from server.schema_registry.avro_columns import avro_columns
from server.schema_registry.framing import frame, framed_ids
from server.schema_registry.typed_columns import RegistryColumns
from server.schema_registry.types import ParsedSchema

SUB = {"type": "record", "name": "Sub", "fields": [{"name": "z", "type": "int"}]}
EVERYTHING = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ok", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "raw", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "either", "type": ["null", "int", "string", SUB]},
        {"name": "sub", "type": "Sub"},
        {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
    ],
}
UTC = datetime.UTC


def encode(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def parsed(
    schema: dict[str, Any], references: dict[str, ParsedSchema] | None = None
) -> ParsedSchema:
    return FORMAT.parse(json.dumps(schema), references or {})


def test_every_avro_kind_maps_to_a_delta_type() -> None:
    stored = avro_columns(EVERYTHING).stored_type
    assert stored == pa.struct(
        [
            ("id", pa.int64()),
            ("ok", pa.bool_()),
            ("ratio", pa.float32()),
            ("note", pa.string()),
            ("placed", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("price", pa.decimal128(10, 2)),
            ("kind", pa.string()),
            ("raw", pa.binary()),
            ("tags", pa.list_(pa.field("element", pa.string()))),
            ("attrs", pa.map_(pa.string(), pa.int64())),
            (
                "either",
                pa.struct([("int", pa.int32()), ("string", pa.string()), ("Sub", SUB_TYPE)]),
            ),
            ("sub", SUB_TYPE),
            ("clock", pa.int32()),
        ]
    )


SUB_TYPE = pa.struct([("z", pa.int32())])


def record(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "ok": i % 2 == 0,
        "ratio": 0.5,
        "note": None if i % 2 else f"n{i}",
        "placed": datetime.datetime(2024, 1, 1, 12, 0, 0, 123000, tzinfo=UTC),
        "day": datetime.date(2024, 2, 29),
        "price": decimal.Decimal("12.34"),
        "kind": "B",
        "raw": b"\x00\x01\x02\x03",
        "tags": ["a", "b"],
        "attrs": {"k": i},
        "either": [5, "s", {"z": 3}][i % 3],
        "sub": {"z": i},
        "clock": datetime.time(1, 2, 3),
    }


def test_rows_decode_by_their_schema_ids_and_unframed_rows_are_null() -> None:
    v2 = {
        **EVERYTHING,
        "fields": [
            *EVERYTHING["fields"],
            {"name": "extra", "type": ["null", "long"], "default": None},
        ],
    }
    schemas = {7: parsed(EVERYTHING), 9: parsed(v2)}
    values = [
        frame(7, encode(EVERYTHING, record(0))),
        None,
        b"not framed",
        frame(9, encode(v2, {**record(1), "extra": 42})),
        frame(8, b"unknown id"),
        frame(7, encode(EVERYTHING, record(2))),
    ]
    column = pa.array(values, pa.binary())
    ids, _, _ = framed_ids(column)
    assert ids.tolist() == [7, -1, -1, 9, 8, 7]

    def lookup(schema_id: int) -> ParsedSchema:
        return schemas[schema_id]  # KeyError for 8: that id is untyped

    typed = RegistryColumns(lookup).typed(column, None)
    assert typed is not None
    assert typed.type.names[-1] == "extra"
    rows = typed.to_pylist()
    assert [r is None for r in rows] == [False, True, True, False, True, False]
    first, second, third = rows[0], rows[3], rows[5]
    assert first["placed"] == datetime.datetime(2024, 1, 1, 12, 0, 0, 123000, tzinfo=UTC)
    assert first["day"] == datetime.date(2024, 2, 29)
    assert first["price"] == decimal.Decimal("12.34")
    assert first["attrs"] == [("k", 0)]
    assert first["either"] == {"int": 5, "string": None, "Sub": None}
    assert second["either"] == {"int": None, "string": "s", "Sub": None}
    assert third["either"] == {"int": None, "string": None, "Sub": {"z": 3}}
    assert first["clock"] == 3_723_000
    assert (first["extra"], second["extra"]) == (None, 42)


def test_only_validated_sides_are_typed() -> None:
    schema = {"type": "record", "name": "K", "fields": [{"name": "k", "type": "string"}]}
    rows = pa.table(
        {
            "key": pa.array([frame(1, encode(schema, {"k": "x"}))], pa.binary()),
            "value": pa.array([frame(1, encode(schema, {"k": "y"}))], pa.binary()),
        }
    )
    decoder = RegistryColumns(lambda _id: parsed(schema))
    values_only = TopicConfig({"confluent.value.schema.validation": "true"})
    assert set(decoder("t", values_only, rows, {})) == {"value_fields"}
    both = TopicConfig(
        {"confluent.value.schema.validation": "true", "confluent.key.schema.validation": "true"}
    )
    out = decoder("t", both, rows, {})
    assert out["key_fields"].to_pylist() == [{"k": "x"}]
    assert decoder("t", TopicConfig({}), rows, {}) == {}


def test_recursive_schemas_are_not_typed() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"], "default": None}],
    }
    column = pa.array([frame(1, encode(node, {"next": None}))], pa.binary())
    assert RegistryColumns(lambda _id: parsed(node)).typed(column, None) is None


def test_a_schema_with_references_is_typed_with_their_named_types() -> None:
    kind = {"type": "enum", "name": "Kind", "namespace": "shop", "symbols": ["A", "B"]}
    item = {
        "type": "record",
        "name": "Item",
        "namespace": "shop",
        "fields": [{"name": "sku", "type": "string"}, {"name": "kind", "type": "Kind"}],
    }
    order = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "shop.Item"}],
    }
    kind_schema = parsed(kind)
    item_schema = parsed(item, {"shop.Kind": kind_schema})
    order_schema = parsed(order, {"shop.Item": item_schema})
    assert order_schema.native.sources[-1] == order  # the references' sources come first
    value = {"id": 3, "item": {"sku": "s-1", "kind": "B"}}
    writer = {
        **order,
        "fields": [
            order["fields"][0],
            {
                "name": "item",
                "type": {**item, "fields": [item["fields"][0], {"name": "kind", "type": kind}]},
            },
        ],
    }
    column = pa.array([frame(9, encode(writer, value))], pa.binary())
    typed = RegistryColumns(lambda _id: order_schema).typed(column, None)
    assert typed is not None and typed.to_pylist() == [value]
