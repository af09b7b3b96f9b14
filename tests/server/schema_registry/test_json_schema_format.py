"""The JSON Schema format on its own: parsing, references, compatibility rules, decode, encode."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakelog.errors import InvalidSchemaError
from server.schema_registry.formats import format_of
from server.schema_registry.json_schema import FORMAT
from server.schema_registry.types import ParsedSchema, SchemaType

ORDER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string", "maxLength": 10},
    },
    "required": ["id"],
}
CLOSED: dict[str, Any] = {**ORDER, "additionalProperties": False}


def _parse(value: Any, refs: dict[str, ParsedSchema] | None = None) -> ParsedSchema:
    return FORMAT.parse(value if isinstance(value, str) else json.dumps(value), refs or {})


def _kinds(reader: Any, writer: Any) -> list[str]:
    """The change types found when data written with ``writer`` is read with ``reader``."""
    findings = FORMAT.incompatibilities(_parse(reader), _parse(writer))
    return [finding.split('"')[1] for finding in findings]


def _with(base: dict[str, Any], **properties: Any) -> dict[str, Any]:
    return {**base, "properties": {**base["properties"], **properties}}


def test_format_of_finds_the_module() -> None:
    assert format_of(SchemaType.JSON) is FORMAT


def test_canonical_is_compact_with_sorted_keys() -> None:
    spaced = '{ "type": "object",\n  "properties": { "b": {"type": "string"}, "a": {} } }'
    reordered = '{"properties":{"a":{},"b":{"type":"string"}},"type":"object"}'
    assert _parse(spaced).canonical == _parse(reordered).canonical == reordered


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{nope", "not JSON"),
        ("[1]", "object or a boolean"),
        ('{"type": 5}', "at type"),
        ('{"properties": {"a": {"type": "strin"}}}', "properties/a/type"),
        ('{"$schema": "http://json-schema.org/draft-03/schema#"}', "unsupported"),
        ('{"$schema": "http://example.com/mine"}', "unsupported"),
        ('{"$ref": "other.json"}', "unresolvable"),
        ('{"properties": {"a": {"$ref": "#/definitions/missing"}}}', "unresolvable"),
    ],
)
def test_an_invalid_schema_is_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidSchemaError, match=reason) as caught:
        _parse(text)
    assert caught.value.registry_code == 42201


@pytest.mark.parametrize(
    "draft",
    [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ],
)
def test_each_supported_draft_parses_and_validates(draft: str) -> None:
    schema = _parse({**ORDER, "$schema": draft})
    decode = FORMAT.decoder(schema)
    assert decode(memoryview(b'{"id": 1}')) == {"id": 1}
    with pytest.raises(ValueError, match=r"\$\.id"):
        decode(memoryview(b'{"id": "x"}'))


def test_references_resolve_by_their_name() -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    by_url = _parse({**address, "$id": "https://example.com/address.json"})
    relative = _parse(address)
    for name, ref in (("https://example.com/address.json", by_url), ("address.json", relative)):
        customer = _parse({"type": "object", "properties": {"home": {"$ref": name}}}, {name: ref})
        decode = FORMAT.decoder(customer)
        assert decode(memoryview(b'{"home": {"city": "Oslo"}}')) == {"home": {"city": "Oslo"}}
        with pytest.raises(ValueError, match=r"at \$\.home: 'city' is a required property"):
            decode(memoryview(b'{"home": {}}'))
        assert FORMAT.incompatibilities(customer, customer) == []
    outer = _parse(
        {"properties": {"c": {"$ref": "customer.json"}}},
        {
            "customer.json": _parse(
                {"properties": {"home": {"$ref": "address.json"}}}, {"address.json": relative}
            )
        },
    )
    with pytest.raises(ValueError, match="city"):
        FORMAT.decoder(outer)(memoryview(b'{"c": {"home": {"city": 5}}}'))


def test_property_added_to_open_and_closed_content_models() -> None:
    added = {"note": {"type": "string"}}
    assert _kinds(_with(ORDER, **added), ORDER) == ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]
    assert _kinds(_with(ORDER, note={}), ORDER) == []
    assert _kinds(_with(CLOSED, **added), CLOSED) == []
    required = {**_with(CLOSED, **added), "required": ["id", "note"]}
    assert _kinds(required, CLOSED) == ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]


def test_property_removed_from_open_and_closed_content_models() -> None:
    slim_open = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    assert _kinds(slim_open, ORDER) == []
    slim_closed = {**slim_open, "additionalProperties": False}
    assert _kinds(slim_closed, CLOSED) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]
    partial = {**slim_open, "additionalProperties": {"type": "string"}}
    assert _kinds(partial, CLOSED) == []
    numbers = {**slim_open, "additionalProperties": {"type": "number"}}
    assert "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" in _kinds(numbers, CLOSED)


def test_required_and_additional_properties() -> None:
    assert _kinds({**ORDER, "required": ["id", "name"]}, ORDER) == ["REQUIRED_ATTRIBUTE_ADDED"]
    defaulted = _with(ORDER, name={"type": "string", "default": ""})
    assert _kinds({**defaulted, "required": ["id", "name"]}, ORDER) == []
    assert _kinds({**ORDER, "required": []}, ORDER) == []
    assert _kinds(CLOSED, ORDER) == ["ADDITIONAL_PROPERTIES_REMOVED"]
    assert _kinds(ORDER, CLOSED) == []


def test_type_changes_and_narrowing() -> None:
    def field(schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {"f": schema}}

    assert _kinds(field({"type": "number"}), field({"type": "integer"})) == []
    assert _kinds(field({"type": "integer"}), field({"type": "number"})) == ["TYPE_NARROWED"]
    (changed,) = FORMAT.incompatibilities(
        _parse(field({"type": "string"})), _parse(field({"type": "integer"}))
    )
    assert changed.startswith('{errorType:"TYPE_CHANGED"')
    assert "'#/properties/f'" in changed
    assert _kinds({"type": ["string", "null"]}, {"type": "string"}) == []
    assert _kinds({"type": "string"}, {"type": ["string", "null"]}) == ["TYPE_CHANGED"]
    assert _kinds(True, {"type": "string"}) == []
    assert _kinds({"type": "string"}, True) == ["TYPE_CHANGED"]


def test_limits_and_enums() -> None:
    def text(**limits: Any) -> dict[str, Any]:
        return {"type": "string", **limits}

    assert _kinds(text(maxLength=5), text(maxLength=10)) == ["MAX_LENGTH_DECREASED"]
    assert _kinds(text(maxLength=20), text(maxLength=10)) == []
    assert _kinds(text(maxLength=5), text()) == ["MAX_LENGTH_ADDED"]
    assert _kinds(text(minLength=2), text(minLength=1)) == ["MIN_LENGTH_INCREASED"]
    assert _kinds(text(pattern="^a"), text()) == ["PATTERN_ADDED"]
    number = {"type": "number"}
    assert _kinds({**number, "maximum": 5}, {**number, "maximum": 9}) == ["MAXIMUM_DECREASED"]
    assert _kinds({**number, "minimum": 0}, {**number, "minimum": 1}) == []
    assert _kinds({**number, "multipleOf": 4}, {**number, "multipleOf": 2}) == [
        "MULTIPLE_OF_EXPANDED"
    ]
    assert _kinds({**number, "multipleOf": 2}, {**number, "multipleOf": 4}) == []
    assert _kinds({"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}) == ["ENUM_ARRAY_NARROWED"]
    assert _kinds({"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]}) == []
    assert _kinds({"enum": ["a", "x"]}, {"enum": ["a", "b"]}) == ["ENUM_ARRAY_CHANGED"]


def test_items() -> None:
    def array(**rest: Any) -> dict[str, Any]:
        return {"type": "array", **rest}

    assert _kinds(array(items={"type": "string"}), array(items={"type": "integer"})) == [
        "TYPE_CHANGED"
    ]
    assert _kinds(array(items={"type": "number"}), array(items={"type": "integer"})) == []
    assert _kinds(array(maxItems=2), array(maxItems=3)) == ["MAX_ITEMS_DECREASED"]
    assert _kinds(array(uniqueItems=True), array()) == ["UNIQUE_ITEMS_ADDED"]
    pair = array(items=[{"type": "string"}, {"type": "integer"}], additionalItems=False)
    single = array(items=[{"type": "string"}], additionalItems=False)
    assert _kinds(pair, single) == []
    assert _kinds(single, pair) == ["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"]
    every = array(items={"type": "integer"})
    assert _kinds(every, array()) == ["SCHEMA_ADDED"]
    assert _kinds(array(), every) == []
    assert _kinds(array(items=[{"type": "integer"}]), every) == ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]


def test_unions_and_products() -> None:
    text, number = {"type": "string"}, {"type": "integer"}
    assert _kinds({"oneOf": [text, number]}, {"oneOf": [number, text]}) == []
    assert _kinds({"anyOf": [text, number]}, text) == []
    assert _kinds(text, {"anyOf": [text, number]}) == ["TYPE_CHANGED"]
    assert _kinds({"anyOf": [text]}, {"anyOf": [text, number]}) == ["SUM_TYPE_NARROWED"]
    assert _kinds(text, {"allOf": [text, {"maxLength": 3}]}) == []


def test_recursive_schemas_terminate() -> None:
    tree = {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
    }
    deeper = _with(tree, name={"type": "string"})
    assert _kinds(tree, tree) == []
    assert _kinds(deeper, tree) == ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]


def test_decode_names_the_path_and_reason() -> None:
    decode = FORMAT.decoder(_parse(ORDER))
    assert decode(memoryview(b'{"id": 1, "name": "bob"}')) == {"id": 1, "name": "bob"}
    with pytest.raises(ValueError, match=r"at \$: 'id' is a required property"):
        decode(memoryview(b'{"name": "x"}'))
    with pytest.raises(ValueError, match=r"at \$\.name: .* is too long"):
        decode(memoryview(b'{"id": 1, "name": "far too long a name"}'))
    with pytest.raises(ValueError, match="not UTF-8"):
        decode(memoryview(b'{"id": 1, "name": "\xff"}'))
    with pytest.raises(ValueError, match="not JSON"):
        decode(memoryview(b'{"id": 1'))


def test_formats_are_checked() -> None:
    decode = FORMAT.decoder(_parse({"type": "string", "format": "date-time"}))
    assert decode(memoryview(b'"2024-01-02T03:04:05Z"')) == "2024-01-02T03:04:05Z"
    with pytest.raises(ValueError, match="date-time"):
        decode(memoryview(b'"yesterday"'))


def test_encode_validates_then_writes_compact_json() -> None:
    encode = FORMAT.encoder(_parse(ORDER))
    assert encode({"id": 2, "name": "é"}) == '{"id":2,"name":"é"}'.encode()
    with pytest.raises(ValueError, match=r"\$\.id"):
        encode({"id": "2"})


def test_an_enum_next_to_a_type_is_a_product() -> None:
    text = {"type": "string"}
    letters = {"type": "string", "enum": ["a", "b"]}
    assert _kinds(text, letters) == []
    assert _kinds(letters, text) == ["TYPE_CHANGED"]
    assert _kinds({**letters, "enum": ["a", "b", "c"]}, letters) == []
    assert _kinds({**letters, "enum": ["a"]}, letters) == ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]


def test_deep_nesting_is_a_clear_error() -> None:
    decode = FORMAT.decoder(_parse({}))
    with pytest.raises(ValueError, match="nested too deeply"):
        decode(memoryview(b"[" * 100_000 + b"]" * 100_000))
    with pytest.raises(InvalidSchemaError, match="nested too deeply"):
        _parse('{"not": ' * 100_000 + "{}" + "}" * 100_000)
