"""The Avro format on its own: parsing, identity, compatibility findings, decode and encode."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakelog.errors import InvalidSchemaError
from server.schema_registry.avro import FORMAT
from server.schema_registry.formats import format_of
from server.schema_registry.types import ParsedSchema, SchemaType


def _order(*extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "note", "type": ["null", "string"], "default": None},
            *extra,
        ],
    }


def _parse(value: Any, refs: dict[str, ParsedSchema] | None = None, **kw: Any) -> ParsedSchema:
    return FORMAT.parse(value if isinstance(value, str) else json.dumps(value), refs or {}, **kw)


def test_format_of_finds_the_module() -> None:
    assert format_of(SchemaType.AVRO) is FORMAT


def test_spelling_differences_are_one_schema() -> None:
    plain = _parse(_order())
    respelled = _parse(
        """{ "fields": [ {"type": {"type": "long"}, "name": "id"},
                         {"default": null, "name": "note", "type": ["null", "string"]} ],
             "name": "shop.Order", "type": "record" }"""
    )
    assert plain.canonical == respelled.canonical
    assert plain.canonical == (
        '{"type":"record","name":"Order","namespace":"shop","fields":['
        '{"name":"id","type":"long"},'
        '{"name":"note","type":["null","string"],"default":null}]}'
    )
    assert _parse('{"type": "string"}').canonical == '"string"'


def test_doc_and_properties_are_part_of_identity_and_normalize_sorts_them() -> None:
    first = _order()
    first["fields"][0].update({"b": 1, "a": 2})
    second = _order()
    second["fields"][0].update({"a": 2, "b": 1})
    assert _parse(first).canonical != _parse(second).canonical
    assert _parse(first, normalize=True).canonical == _parse(second, normalize=True).canonical
    with_doc = _order()
    with_doc["doc"] = "orders"
    assert _parse(with_doc).canonical != _parse(_order()).canonical


def test_nested_namespaces_are_written_relative() -> None:
    value = {
        "type": "record",
        "name": "a.Outer",
        "fields": [
            {"name": "same", "type": {"type": "fixed", "name": "a.F", "size": 2}},
            {"name": "other", "type": {"type": "enum", "name": "b.E", "symbols": ["X"]}},
            {"name": "again", "type": "a.F"},
            {
                "name": "none",
                "type": {"type": "record", "name": "N", "namespace": "", "fields": []},
            },
        ],
    }
    fields = json.loads(_parse(value).canonical)["fields"]
    assert fields[0]["type"] == {"type": "fixed", "name": "F", "size": 2}
    assert fields[1]["type"]["namespace"] == "b"
    assert fields[2]["type"] == "F"
    assert fields[3]["type"]["namespace"] == ""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON"),
        ('{"type": "record", "name": "1R", "fields": []}', "not a valid Avro name"),
        ('{"type": "record", "name": "R", "fields": [{"name": "a-b", "type": "int"}]}', "a-b"),
        ('{"type": "record", "name": "R", "fields": [{"name": "x", "type": "Nope"}]}', "Nope"),
        (
            '{"type": "record", "name": "R", "fields": '
            '[{"name": "x", "type": "long", "default": "a"}]}',
            "Default value",
        ),
        (
            '{"type": "record", "name": "R", "fields": '
            '[{"name": "x", "type": "int"}, {"name": "x", "type": "int"}]}',
            "x",
        ),
        ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "ymbol"),
        ('{"type": "fixed", "name": "F", "size": -1}', "size"),
        ('["null", "null"]', "null"),
        ('{"type": "record", "name": "R"}', "fields"),
        ('{"type": "wat"}', "wat"),
    ],
)
def test_a_schema_confluent_refuses_is_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidSchemaError, match=reason) as caught:
        _parse(text)
    assert caught.value.registry_code == 42201


def test_references_resolve_as_named_types() -> None:
    address = _parse(
        {
            "type": "record",
            "name": "Address",
            "namespace": "shop",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    customer_value = {
        "type": "record",
        "name": "shop.Customer",
        "fields": [{"name": "home", "type": "Address"}, {"name": "work", "type": "shop.Address"}],
    }
    customer = _parse(customer_value, {"shop.Address": address})
    assert '"type":"Address"' in customer.canonical
    assert "city" not in customer.canonical
    payload = FORMAT.encoder(customer)({"home": {"city": "Oslo"}, "work": {"city": "Bergen"}})
    decoded = FORMAT.decoder(customer)(memoryview(payload))
    assert isinstance(decoded, dict)
    assert decoded["work"] == {"city": "Bergen"}
    outer = _parse(
        {"type": "record", "name": "Outer", "fields": [{"name": "c", "type": "shop.Customer"}]},
        {"shop.Customer": customer},
    )
    assert FORMAT.incompatibilities(outer, outer) == []
    with pytest.raises(InvalidSchemaError, match="Address"):
        _parse(customer_value)


def test_a_new_field_without_default_is_named_in_the_finding() -> None:
    old = _parse(_order())
    new = _parse(_order({"name": "amount", "type": "double"}))
    (finding,) = FORMAT.incompatibilities(new, old)
    assert finding.startswith("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'")
    assert "'amount' at path '/fields/2'" in finding
    assert FORMAT.incompatibilities(old, new) == []
    defaulted = _parse(_order({"name": "amount", "type": "double", "default": 0.0}))
    assert FORMAT.incompatibilities(defaulted, old) == []


def test_each_finding_keeps_its_own_path() -> None:
    level = {"type": "enum", "name": "L", "symbols": ["A", "B"]}
    old = _parse(_order({"name": "level", "type": level}))
    changed = _order({"name": "level", "type": {"type": "enum", "name": "L", "symbols": ["A"]}})
    changed["fields"][0]["type"] = "string"
    findings = FORMAT.incompatibilities(_parse(changed), old)
    kinds = {finding.split("'")[1]: finding for finding in findings}
    assert set(kinds) == {"TYPE_MISMATCH", "MISSING_ENUM_SYMBOLS"}
    assert "path '/fields/0/type'" in kinds["TYPE_MISMATCH"]
    assert "'{'B'}' at path '/fields/2/type/symbols'" in kinds["MISSING_ENUM_SYMBOLS"]


def test_promotions_follow_avro_rules() -> None:
    def record(kind: str) -> ParsedSchema:
        return _parse({"type": "record", "name": "R", "fields": [{"name": "x", "type": kind}]})

    assert FORMAT.incompatibilities(record("long"), record("int")) == []
    assert FORMAT.incompatibilities(record("int"), record("long")) != []
    assert FORMAT.incompatibilities(record("string"), record("bytes")) == []
    renamed = _parse({"type": "record", "name": "S", "fields": [{"name": "x", "type": "int"}]})
    assert "NAME_MISMATCH" in FORMAT.incompatibilities(renamed, record("int"))[0]


def test_decode_returns_fastavro_values_and_refuses_what_does_not_fit() -> None:
    schema = _parse(_order({"name": "blob", "type": "bytes"}))
    payload = FORMAT.encoder(schema)({"id": 7, "note": {"string": "hi"}, "blob": "\u00ff\u0001"})
    decode = FORMAT.decoder(schema)
    assert decode(memoryview(payload)) == {"id": 7, "note": "hi", "blob": b"\xff\x01"}
    with pytest.raises(ValueError, match="truncated"):
        decode(memoryview(payload[:-1]))
    with pytest.raises(ValueError, match=r"1 of \d+ bytes left"):
        decode(memoryview(payload + b"\x00"))
    with pytest.raises(ValueError, match="truncated"):
        decode(memoryview(b""))


def test_a_payload_of_another_schema_is_caught() -> None:
    small = _parse({"type": "record", "name": "P", "fields": [{"name": "n", "type": "long"}]})
    other = _parse(_order())
    payload = FORMAT.encoder(other)({"id": 300, "note": {"string": "a longer note"}})
    with pytest.raises(ValueError, match="left after one datum"):
        FORMAT.decoder(small)(memoryview(payload))


def test_encode_reads_avro_json_and_names_the_problem() -> None:
    encode = FORMAT.encoder(_parse(_order()))
    assert encode({"id": 1, "note": None}) == encode({"id": 1})
    with pytest.raises(ValueError, match="id"):
        encode({"id": "one", "note": None})
    with pytest.raises(ValueError):
        encode({"id": 1, "note": {"int": 5}})
    with pytest.raises(ValueError):
        encode("not a record")


def test_the_canonical_text_parses_to_itself() -> None:
    value = {
        "type": "record",
        "name": "a.Outer",
        "doc": "d",
        "aliases": ["a.Old"],
        "fields": [
            {"name": "n", "type": {"type": "record", "name": "N", "namespace": "", "fields": []}},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "f", "type": {"type": "fixed", "name": "b.F", "size": 1}},
            {"name": "m", "type": {"type": "map", "values": "b.F"}, "order": "ignore"},
        ],
    }
    once = _parse(value).canonical
    assert _parse(once).canonical == once
    assert _parse(once, normalize=True).canonical == _parse(value, normalize=True).canonical


def test_properties_keep_their_place_and_a_second_use_is_a_name() -> None:
    text = """{"name": "Change", "namespace": "cdc", "type": "record", "connect.name": "cdc.Change",
      "fields": [
        {"default": null, "name": "before", "type": ["null", {"fields": [
            {"name": "at", "type": {"connect.version": 1, "type": "long", "connect.name": "ts"}}],
          "type": "record", "name": "Row"}]},
        {"type": ["null", "Row"], "name": "after", "default": null}]}"""
    assert _parse(text).canonical == (
        '{"type":"record","name":"Change","namespace":"cdc","fields":['
        '{"name":"before","type":["null",{"type":"record","name":"Row","fields":['
        '{"name":"at","type":{"type":"long","connect.version":1,"connect.name":"ts"}}]}],'
        '"default":null},'
        '{"name":"after","type":["null","Row"],"default":null}],'
        '"connect.name":"cdc.Change"}'
    )
    normalized = _parse(text, normalize=True).canonical
    assert '{"type":"long","connect.name":"ts","connect.version":1}' in normalized


def test_deep_nesting_is_a_clear_error() -> None:
    text = '{"type": "array", "items": ' * 5000 + '"int"' + "}" * 5000
    with pytest.raises(InvalidSchemaError, match="nested too deeply"):
        _parse(text)


def test_a_schema_that_is_a_referenced_name() -> None:
    address = _parse(
        {"type": "record", "name": "shop.A", "fields": [{"name": "c", "type": "string"}]}
    )
    bare = _parse('"shop.A"', {"shop.A": address})
    assert bare.canonical == '"shop.A"'
    payload = FORMAT.encoder(bare)({"c": "x"})
    assert FORMAT.decoder(bare)(memoryview(payload)) == {"c": "x"}
    optional = _parse('["null", "shop.A"]', {"shop.A": address})
    assert FORMAT.incompatibilities(optional, bare) == []
    assert FORMAT.incompatibilities(bare, optional) != []


EMPTY = {"type": "record", "name": "Empty", "fields": []}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": "null"},
        {"type": "array", "items": EMPTY},
        {"type": "array", "items": {"type": "fixed", "name": "None0", "size": 0}},
        _order({"name": "marks", "type": {"type": "array", "items": {"type": "null"}}}),
        _order(
            {"name": "e", "type": EMPTY},
            {"name": "again", "type": {"type": "array", "items": "Empty"}},
        ),
    ],
)
def test_an_array_whose_items_take_no_bytes_is_refused(schema: Any) -> None:
    """Six bytes of such an array's count decode to a hundred million items."""
    with pytest.raises(InvalidSchemaError, match="whose items take no bytes"):
        _parse(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": ["null", "string"]},  # a branch index per item
        {"type": "array", "items": {"type": "enum", "name": "One", "symbols": ["A"]}},
        {"type": "map", "values": "null"},  # a key per entry
        {"type": "array", "items": _order()},
    ],
)
def test_arrays_whose_items_take_bytes_are_parsed(schema: Any) -> None:
    assert _parse(schema).schema_type is SchemaType.AVRO


def test_a_stored_schema_with_such_an_array_has_no_decoder() -> None:
    """Whatever a root holds, a schema with such an array gets no decoder."""
    parsed = _parse({"type": "array", "items": "string"})
    native = parsed.native
    native.sources = ({"type": "array", "items": "null"},)
    with pytest.raises(ValueError, match="whose items take no bytes"):
        FORMAT.decoder(parsed)
