"""JSON Schema payloads as typed columns: objects as structs, the rest as JSON text."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from server.schema_registry.formats import format_of
from server.schema_registry.framing import frame
from server.schema_registry.json_columns import json_columns
from server.schema_registry.typed_columns import RegistryColumns
from server.schema_registry.types import ParsedSchema, SchemaType


def parsed(document: Any, references: dict[str, ParsedSchema] | None = None) -> ParsedSchema:
    return format_of(SchemaType.JSON).parse(json.dumps(document), references or {})


ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "amount": {"type": "number"},
        "paid": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"$ref": "#/definitions/Address"},
        "extra": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def test_object_properties_are_a_struct_and_the_rest_json_text() -> None:
    assert json_columns(parsed(ORDER)).stored_type == pa.struct(
        [
            ("id", pa.int64()),
            ("amount", pa.float64()),
            ("paid", pa.bool_()),
            ("note", pa.string()),
            ("tags", pa.list_(pa.field("element", pa.string()))),
            ("address", pa.struct([("city", pa.string())])),
            ("extra", pa.string()),
        ]
    )


def test_json_payloads_decode_into_the_struct() -> None:
    schema = parsed(ORDER)

    def payload(value: Any) -> bytes:
        return frame(3, json.dumps(value).encode())

    column = pa.array(
        [
            payload(
                {
                    "id": 1,
                    "amount": 2,
                    "paid": True,
                    "tags": ["a"],
                    "address": {"city": "Oslo"},
                    "extra": 5,
                    "open": "kept in bytes",
                }
            ),
            None,
            payload({"id": 2, "amount": 1.5, "note": "n", "extra": "x"}),
        ],
        pa.binary(),
    )
    typed = RegistryColumns(lambda _id: schema).typed(column, None)
    assert typed is not None
    rows = typed.to_pylist()
    assert rows[0] == {
        "id": 1,
        "amount": 2.0,
        "paid": True,
        "note": None,
        "tags": ["a"],
        "address": {"city": "Oslo"},
        "extra": "5",
    }
    assert rows[1] is None
    assert rows[2]["extra"] == "x" and rows[2]["amount"] == 1.5


def test_a_ref_to_a_referenced_schema_is_walked_as_its_document() -> None:
    address = parsed(
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"$ref": "#/$defs/zip"}},
            "$defs": {"zip": {"type": "integer"}},
        }
    )
    order = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "ship_to": {"$ref": "address.json"},
            "zip_only": {"$ref": "address.json#/$defs/zip"},
        },
    }
    columns = json_columns(parsed(order, {"address.json": address}))
    assert columns.stored_type == pa.struct(
        [
            ("id", pa.int64()),
            ("ship_to", pa.struct([("city", pa.string()), ("zip", pa.int64())])),
            ("zip_only", pa.int64()),
        ]
    )


def test_a_recursive_ref_is_json_text() -> None:
    node = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}},
    }
    assert json_columns(parsed(node)).stored_type == pa.struct(
        [("name", pa.string()), ("child", pa.string())]
    )
