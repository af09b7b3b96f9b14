"""Protobuf schemas parse from text or descriptors, frame and decode as Confluent's clients do."""

from __future__ import annotations

import base64
import re
import statistics
import time

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
    MockSchemaRegistryClient,
)
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2

from lakelog.errors import InvalidSchemaError
from server.schema_registry import protobuf as pb
from server.schema_registry.formats import format_of
from server.schema_registry.framing import frame, unframe
from server.schema_registry.types import ParsedSchema, SchemaType

FORMAT = format_of(SchemaType.PROTOBUF)

ORDERS = """
syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

// An order as the checkout writes it.
message Order {
  int64 id = 1;
  string customer_name = 2;
  double amount = 3;
  google.protobuf.Timestamp placed = 4;
  repeated Line lines = 5;
  map<string, string> tags = 6;
  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
  Status status = 7;
}

enum Status {
  NEW = 0;
  PAID = 1;
}

message Refund {
  int64 order_id = 1;
}
"""


def parse(text: str, references: dict[str, ParsedSchema] | None = None) -> ParsedSchema:
    return FORMAT.parse(text, references or {})


def proto3(body: str, package: str = "t") -> ParsedSchema:
    return parse(f'syntax = "proto3";\npackage {package};\n{body}')


def proto2(body: str) -> ParsedSchema:
    return parse(f'syntax = "proto2";\npackage t;\n{body}')


# -- parse and identity ------------------------------------------------------------


def test_text_parses_with_well_known_types_and_no_references() -> None:
    schema = parse(ORDERS)
    assert schema.schema_type is SchemaType.PROTOBUF
    assert schema.text == ORDERS
    descriptor = pb.native(schema).descriptor
    assert list(descriptor.message_types_by_name) == ["Order", "Refund"]
    assert pb.native(schema).parse_ms > 0


def test_an_unparsable_schema_is_refused_with_protocs_message() -> None:
    with pytest.raises(InvalidSchemaError) as refused:
        parse('syntax = "proto3";\nmessage A {\n  Missing m = 1;\n}\n')
    assert refused.value.registry_code == 42201
    assert '"Missing" is not defined' in str(refused.value)
    assert "default:3:" in str(refused.value)


@pytest.mark.parametrize(
    "text",
    [
        "message A { int32 x = 1 }",
        'syntax = "proto3"; message A { int32 x = 1; string y = 1; }',
        'syntax = "proto3"; import "nowhere.proto"; message A {}',
        "not a schema at all",
    ],
)
def test_broken_text_is_an_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchemaError, match="protoc: "):
        parse(text)


def test_base64_that_is_not_a_descriptor_is_refused() -> None:
    with pytest.raises(InvalidSchemaError):
        parse(base64.b64encode(b"\x00\x01\x02garbage").decode())


def test_a_descriptor_naming_an_unknown_type_is_refused() -> None:
    proto = pb.native(proto3("message A { int32 x = 1; }")).file
    broken = descriptor_pb2.FileDescriptorProto()
    broken.CopyFrom(proto)
    broken.message_type[0].field[0].type = 11
    broken.message_type[0].field[0].type_name = ".t.Nowhere"
    with pytest.raises(InvalidSchemaError, match="Nowhere"):
        parse(base64.b64encode(broken.SerializeToString()).decode())


def test_text_and_its_descriptor_are_one_schema() -> None:
    text = parse(ORDERS)
    descriptor = parse(pb.serialized(text))
    assert descriptor.canonical == text.canonical
    assert descriptor.text == pb.serialized(text)
    assert pb.serialized(descriptor) == pb.serialized(text)


def test_comments_and_spacing_do_not_change_identity() -> None:
    one = proto3("message A { int32 x = 1; }")
    other = proto3("// the same\nmessage   A {\n\n  int32 x = 1;   // x\n}\n")
    assert one.canonical == other.canonical
    assert one.canonical != proto3("message A { int64 x = 1; }").canonical
    assert one.canonical != proto3("message A { int32 x = 1; }", package="u").canonical


def test_normalize_ignores_field_and_import_order() -> None:
    first = 'import "google/protobuf/any.proto";\nimport "google/protobuf/timestamp.proto";\n'
    second = 'import "google/protobuf/timestamp.proto";\nimport "google/protobuf/any.proto";\n'
    body = "message A { google.protobuf.Any a = 2; google.protobuf.Timestamp t = 1; }"
    reordered = "message A { google.protobuf.Timestamp t = 1; google.protobuf.Any a = 2; }"
    one = 'syntax = "proto3";\n' + first + body
    two = 'syntax = "proto3";\n' + second + reordered
    assert parse(one).canonical != parse(two).canonical
    assert (
        FORMAT.parse(one, {}, normalize=True).canonical
        == FORMAT.parse(two, {}, normalize=True).canonical
    )


def test_references_resolve_imports_as_text_or_descriptor() -> None:
    dep_text = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
    root = (
        'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
        "message Price { common.Money value = 1; }\n"
    )
    as_text = parse(dep_text)
    as_descriptor = parse(pb.serialized(as_text))
    from_text = parse(root, {"common/money.proto": as_text})
    from_descriptor = parse(root, {"common/money.proto": as_descriptor})
    assert from_text.canonical == from_descriptor.canonical
    for schema in (from_text, from_descriptor):
        (dependency,) = pb.native(schema).dependencies
        assert dependency.name == "common/money.proto"
        payload = FORMAT.encoder(schema)({"value": {"cents": "250"}})
        assert FORMAT.decoder(schema)(memoryview(payload)) == {"value": {"cents": "250"}}


def test_references_are_transitive() -> None:
    base = parse('syntax = "proto3";\npackage a;\nmessage A { string s = 1; }\n')
    middle = parse(
        'syntax = "proto3";\npackage b;\nimport "a.proto";\nmessage B { a.A a = 1; }\n',
        {"a.proto": base},
    )
    top = parse(
        'syntax = "proto3";\npackage c;\nimport "b.proto";\nmessage C { b.B b = 1; }\n',
        {"b.proto": middle},
    )
    assert [item.name for item in pb.native(top).dependencies] == ["a.proto", "b.proto"]
    top_again = parse(
        pb.serialized(top), {"b.proto": parse(pb.serialized(middle), {"a.proto": base})}
    )
    assert top_again.canonical == top.canonical


def test_an_error_against_a_descriptor_reference_carries_protocs_message() -> None:
    money = parse(pb.serialized(proto3("message Money { int64 cents = 1; }", package="m")))
    with pytest.raises(InvalidSchemaError, match=re.escape('"m.Coin" is not defined')):
        parse(
            'syntax = "proto3";\nimport "money.proto";\nmessage P { m.Coin c = 1; }\n',
            {"money.proto": money},
        )


def test_an_unreferenced_import_of_a_descriptor_is_refused() -> None:
    descriptor = pb.native(proto3("message A { int32 x = 1; }")).file
    dependent = descriptor_pb2.FileDescriptorProto()
    dependent.CopyFrom(descriptor)
    dependent.dependency.append("elsewhere.proto")
    with pytest.raises(InvalidSchemaError, match=re.escape("elsewhere.proto")):
        parse(base64.b64encode(dependent.SerializeToString()).decode())


def test_google_type_imports_need_no_reference() -> None:
    schema = proto3('import "google/type/date.proto";\nmessage D { google.type.Date day = 1; }')
    payload = FORMAT.encoder(schema)({"day": {"year": 2024, "month": 2, "day": 29}})
    decoded = FORMAT.decoder(schema)(memoryview(payload))
    assert decoded == {"day": {"year": 2024, "month": 2, "day": 29}}


def test_a_reference_name_may_not_escape_the_compile_directory() -> None:
    dep = proto3("message A {}")
    with pytest.raises(InvalidSchemaError, match="relative import path"):
        parse('syntax = "proto3";\nimport "../a.proto";\nmessage B {}', {"../a.proto": dep})


# -- message indexes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("indexes", "encoded"),
    [([0], b"\x00"), ([1], b"\x02\x02"), ([0, 0], b"\x04\x00\x00"), ([2, 70], b"\x04\x04\x8c\x01")],
)
def test_message_indexes_are_zigzag_varints(indexes: list[int], encoded: bytes) -> None:
    assert pb.write_message_indexes(indexes) == encoded
    assert pb.read_message_indexes(encoded + b"rest") == (indexes, len(encoded))


def test_indexes_follow_declaration_order_not_names() -> None:
    schema = proto3("message Zeta {} message Alpha { message Z {} message A {} }")
    parsed = pb.native(schema)
    assert parsed.indexes_of("t.Alpha") == [1]
    assert parsed.indexes_of("t.Alpha.A") == [1, 1]
    assert parsed.message_descriptor([1, 0]).full_name == "t.Alpha.Z"


def test_indexes_agree_with_confluents_serializer() -> None:
    """The serializer's own varint writer and the deserializer's reader agree with ours."""
    import io

    from confluent_kafka.schema_registry.common.serde import SchemaId

    for indexes in ([0], [3], [0, 2], [1, 0, 5], [200, 1]):
        buffer = io.BytesIO()
        ProtobufSerializer._encode_varints(buffer, indexes)
        assert buffer.getvalue() == pb.write_message_indexes(indexes)
        assert SchemaId._read_index_array(io.BytesIO(pb.write_message_indexes(indexes))) == indexes


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated"),
        (b"\x04\x00", "truncated"),
        (b"\x01", "count -1"),
        (b"\x02\x01", "negative"),
        (b"\xff" * 11, "longer than 10 bytes"),
        (pb.write_message_indexes([0] * (pb.MAX_INDEX_DEPTH + 1)), "count"),
    ],
)
def test_bad_message_indexes_are_refused(data: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        pb.read_message_indexes(data)


# -- decoding and encoding ---------------------------------------------------------


def test_a_payload_decodes_to_a_dict_with_field_names_as_written() -> None:
    schema = parse(ORDERS)
    value = {
        "id": "7",
        "customer_name": "Ada",
        "amount": 12.5,
        "placed": "2024-05-01T10:00:00Z",
        "lines": [{"sku": "b-1", "quantity": 2}],
        "tags": {"channel": "web"},
        "status": "PAID",
    }
    payload = FORMAT.encoder(schema)(value)
    assert payload.startswith(b"\x00")
    assert FORMAT.decoder(schema)(memoryview(payload)) == value
    pb.validator(schema)(memoryview(payload))


def test_default_values_are_present_in_the_dict() -> None:
    schema = parse(ORDERS)
    decoded = FORMAT.decoder(schema)(memoryview(b"\x00"))
    assert decoded == {
        "id": "0",
        "customer_name": "",
        "amount": 0.0,
        "lines": [],
        "tags": {},
        "status": "NEW",
    }


def test_messages_other_than_the_first_are_named_by_indexes() -> None:
    schema = parse(ORDERS)
    refund = pb.encoder(schema, "shop.Refund")({"order_id": "9"})
    line = pb.encoder(schema, "shop.Order.Line")({"sku": "x", "quantity": 1})
    assert refund.startswith(pb.write_message_indexes([1]))
    # The map's entry type comes first among Order's nested types, where the map is.
    assert line.startswith(pb.write_message_indexes([0, 1]))
    decode = FORMAT.decoder(schema)
    assert decode(memoryview(refund)) == {"order_id": "9"}
    assert decode(memoryview(line)) == {"sku": "x", "quantity": 1}


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (pb.write_message_indexes([2]) + b"", "has 2 message types, no index 2"),
        (pb.write_message_indexes([0, 5]), "shop.Order has 2 message types"),
        (b"\x00\x0a\x05ab", "not a shop.Order"),
        (b"\x00\xff", "not a shop.Order"),
        (b"", "truncated"),
    ],
)
def test_bad_payloads_are_refused(payload: bytes, reason: str) -> None:
    schema = parse(ORDERS)
    with pytest.raises(ValueError, match=reason):
        FORMAT.decoder(schema)(memoryview(payload))
    with pytest.raises(ValueError, match=reason):
        pb.validator(schema)(memoryview(payload))


def test_a_missing_proto2_required_field_does_not_decode() -> None:
    schema = proto2("message R { required int32 a = 1; optional int32 b = 2; }")
    with pytest.raises(ValueError, match=re.escape("not a t.R")):
        FORMAT.decoder(schema)(memoryview(b"\x00\x10\x01"))
    with pytest.raises(ValueError, match=re.escape("not a t.R")):
        FORMAT.encoder(schema)({"b": 1})
    assert FORMAT.decoder(schema)(memoryview(FORMAT.encoder(schema)({"a": 1}))) == {"a": 1}


@pytest.mark.parametrize("value", [{"nope": 1}, {"id": "x"}, ["not", "an", "object"]])
def test_values_that_do_not_fit_are_refused_by_the_encoder(value: object) -> None:
    with pytest.raises(ValueError, match=re.escape("shop.Order")):
        FORMAT.encoder(parse(ORDERS))(value)


def test_an_unknown_message_name_is_refused_by_the_encoder() -> None:
    with pytest.raises(ValueError, match=re.escape("shop.Nothing")):
        pb.encoder(parse(ORDERS), "shop.Nothing")


# -- confluent-kafka's serializer and deserializer ----------------------------------


def test_confluents_serializer_registers_what_parses_and_frames_what_decodes() -> None:
    schema = parse(ORDERS)
    refund = pb.native(schema).message_class([1])
    client = MockSchemaRegistryClient({"url": "mock://proto"})
    context = SerializationContext("orders", MessageField.VALUE)
    data = ProtobufSerializer(refund, client)(refund(order_id=42), context)
    registered = client.get_latest_version("orders-value").schema
    assert registered.schema_type == "PROTOBUF"
    assert registered.schema_str is not None
    parsed = parse(registered.schema_str)
    assert parsed.canonical == schema.canonical
    _, payload = unframe(data)
    assert FORMAT.decoder(parsed)(payload) == {"order_id": "42"}


def test_confluents_deserializer_reads_what_the_encoder_writes() -> None:
    schema = parse(ORDERS)
    client = MockSchemaRegistryClient({"url": "mock://proto"})
    schema_id = client.register_schema("orders-value", Schema(pb.serialized(schema), "PROTOBUF"))
    line = pb.native(schema).message_class(pb.native(schema).indexes_of("shop.Order.Line"))
    data = frame(schema_id, pb.encoder(schema, "shop.Order.Line")({"sku": "k", "quantity": 3}))
    read = ProtobufDeserializer(line, None, client)(
        data, SerializationContext("orders", MessageField.VALUE)
    )
    assert (read.sku, read.quantity) == ("k", 3)


def test_confluents_serializer_registers_imports_as_references_that_resolve() -> None:
    money = parse('syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n')
    price = parse(
        'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
        "message Price { common.Money value = 1; }\n",
        {"common/money.proto": money},
    )
    price_class = pb.native(price).message_class([0])
    client = MockSchemaRegistryClient({"url": "mock://proto"})
    context = SerializationContext("prices", MessageField.VALUE)
    value = price_class()
    value.value.cents = 125
    data = ProtobufSerializer(price_class, client)(value, context)
    root = client.get_latest_version("prices-value").schema
    assert root.schema_str is not None and root.references is not None
    (reference,) = root.references
    name, subject, version = reference.name, reference.subject, reference.version
    assert (name, subject) == ("common/money.proto", "common/money.proto")
    assert name is not None and subject is not None and version is not None
    dependency = client.get_version(subject, version).schema.schema_str
    assert dependency is not None
    resolved = parse(root.schema_str, {name: parse(dependency)})
    assert resolved.canonical == price.canonical
    _, payload = unframe(data)
    assert FORMAT.decoder(resolved)(payload) == {"value": {"cents": "125"}}


# -- compatibility -----------------------------------------------------------------


def problems(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    return [p.split(" at ")[0] for p in FORMAT.incompatibilities(reader, writer)]


USES_E = "message M { E e = 1; }"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("message A { int32 x = 1; }", "message A { int32 x = 1; string y = 2; }"),
        ("message A { int32 x = 1; string y = 2; }", "message A { int32 x = 1; }"),
        ("message A { int32 x = 1; }", "message A { int32 renamed = 1; }"),
        ("message A { int32 x = 1; }", "message A { int64 x = 1; }"),
        ("message A { int32 x = 1; }", "message A { bool x = 1; }"),
        ("message A { sint32 x = 1; }", "message A { sint64 x = 1; }"),
        ("message A { string x = 1; }", "message A { bytes x = 1; }"),
        ("message A { string x = 1; }", "message A { repeated string x = 1; }"),
        ("message A { int32 x = 1; }", "message A { optional int32 x = 1; }"),
        # As Confluent judges it: a proto3 field written without a label has none to change.
        ("message A { int32 x = 1; }", "message A { repeated int32 x = 1; }"),
        (
            "enum E { A = 0; } message M { E e = 1; }",
            "enum E { A = 0; B = 1; } message M { E e = 1; }",
        ),
        (
            "enum E { A = 0; B = 1; } message M { E e = 1; }",
            "enum E { A = 0; } message M { E e = 1; }",
        ),
        ("enum E { A = 0; } message M { E e = 1; }", "message M { int32 e = 1; }"),
        ("message A { int32 x = 1; }", "message A { int32 x = 1; } message B {}"),
        ("message A {} message B {}", "message B {} message A {}"),
        ("message A { oneof k { int32 x = 1; } }", "message A { int32 x = 1; }"),
        ("message A { int32 x = 1; }", "message A { oneof k { int32 x = 1; } }"),
        ("message A { oneof k { int32 x = 1; string y = 2; } }", "message A { }"),
        ("message A { map<string, int32> m = 1; }", "message A { map<string, int64> m = 1; }"),
    ],
)
def test_compatible_changes(old: str, new: str) -> None:
    assert FORMAT.incompatibilities(proto3(new), proto3(old)) == []


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        ("message A { int32 x = 1; }", "message A { string x = 1; }", "FIELD_SCALAR_KIND_CHANGED"),
        ("message A { int32 x = 1; }", "message A { sint32 x = 1; }", "FIELD_SCALAR_KIND_CHANGED"),
        (
            "message A { fixed32 x = 1; }",
            "message A { fixed64 x = 1; }",
            "FIELD_SCALAR_KIND_CHANGED",
        ),
        ("message A { float x = 1; }", "message A { double x = 1; }", "FIELD_SCALAR_KIND_CHANGED"),
        (
            "message A { int32 x = 1; } message B {}",
            "message A { B x = 1; } message B {}",
            "FIELD_KIND_CHANGED",
        ),
        (
            "message A { map<string, int32> m = 1; }",
            "message A { repeated int32 m = 1; }",
            "FIELD_KIND_CHANGED",
        ),
        (
            "message A { map<string, int32> m = 1; }",
            "message A { map<string, string> m = 1; }",
            "FIELD_SCALAR_KIND_CHANGED",
        ),
        (
            "message A { B b = 1; } message B {} message C {}",
            "message A { C b = 1; } message B {} message C {}",
            "FIELD_NAMED_TYPE_CHANGED",
        ),
        ("message A {} message B {}", "message A {}", "MESSAGE_REMOVED"),
        ("message A { message N {} }", "message A {}", "MESSAGE_REMOVED"),
        (
            "message A { oneof k { int32 x = 1; string y = 2; } }",
            "message A { oneof k { int32 x = 1; } }",
            "ONEOF_FIELD_REMOVED",
        ),
        (
            "message A { int32 x = 1; string y = 2; }",
            "message A { oneof k { int32 x = 1; string y = 2; } }",
            "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
        ),
        (
            "message A { int32 x = 1; oneof k { string y = 2; } }",
            "message A { oneof k { int32 x = 1; string y = 2; } }",
            "FIELD_MOVED_TO_EXISTING_ONEOF",
        ),
    ],
)
def test_incompatible_changes(old: str, new: str, kind: str) -> None:
    found = problems(proto3(new), proto3(old))
    assert kind in found, FORMAT.incompatibilities(proto3(new), proto3(old))


def test_a_local_message_type_that_changes_is_reported_once_where_it_changed() -> None:
    old = proto3("message A { B b = 1; } message B { int32 x = 1; }")
    new = proto3("message A { B b = 1; } message B { string x = 1; }")
    assert FORMAT.incompatibilities(new, old) == [
        "FIELD_SCALAR_KIND_CHANGED at t.B field 1: "
        "a varint number does not read as a string or bytes"
    ]


def test_recursive_messages_are_compared_once() -> None:
    old = proto3("message T { T child = 1; int32 x = 2; }")
    new = proto3("message T { T child = 1; string x = 2; }")
    assert problems(new, old) == ["FIELD_SCALAR_KIND_CHANGED"]


def test_a_package_change_is_incompatible() -> None:
    old = proto3("message A { int32 x = 1; }", package="a")
    new = proto3("message A { int32 x = 1; }", package="b")
    assert problems(new, old)[0] == "PACKAGE_CHANGED"


def test_proto2_required_fields_may_be_neither_added_nor_removed() -> None:
    optional = proto2("message A { optional int32 x = 1; }")
    required = proto2("message A { optional int32 x = 1; required int32 y = 2; }")
    assert problems(required, optional) == ["REQUIRED_FIELD_ADDED"]
    assert problems(optional, required) == ["REQUIRED_FIELD_REMOVED"]
    relabelled = proto2("message A { required int32 x = 1; }")
    assert problems(relabelled, optional) == ["FIELD_NUMERIC_LABEL_CHANGED"]
    repeated = proto2("message A { repeated int32 x = 1; }")
    assert problems(repeated, optional) == ["FIELD_NUMERIC_LABEL_CHANGED"]
    strings = proto2("message A { optional string x = 1; }")
    assert problems(proto2("message A { repeated string x = 1; }"), strings) == []


def test_a_referenced_message_that_changes_makes_the_field_incompatible() -> None:
    old_money = proto3("message Money { int64 cents = 1; }", package="m")
    new_money = proto3("message Money { string cents = 1; }", package="m")
    root = 'syntax = "proto3";\nimport "money.proto";\nmessage P { m.Money price = 1; }\n'
    old = parse(root, {"money.proto": old_money})
    new = parse(root, {"money.proto": new_money})
    assert problems(new, old) == ["FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"]
    assert FORMAT.incompatibilities(old, old) == []


def test_reasons_name_the_place_and_the_change() -> None:
    old = proto3("message A { int32 x = 1; }")
    new = proto3("message A { string x = 1; }")
    assert FORMAT.incompatibilities(new, old) == [
        "FIELD_SCALAR_KIND_CHANGED at t.A field 1: "
        "a varint number does not read as a string or bytes"
    ]


# -- cost --------------------------------------------------------------------------


def test_parsing_cost_is_milliseconds() -> None:
    """The registry parses on registration and on loading its log, so parsing stays cheap."""
    parse(ORDERS)
    texts = [pb.native(parse(ORDERS)).parse_ms for _ in range(5)]
    descriptor = pb.serialized(parse(ORDERS))
    descriptors = [pb.native(parse(descriptor)).parse_ms for _ in range(5)]
    schema = parse(ORDERS)
    decode = FORMAT.decoder(schema)
    payload = memoryview(FORMAT.encoder(schema)({"id": "1", "lines": [{"sku": "a"}]}))
    check = pb.validator(schema)
    started = time.perf_counter()
    for _ in range(1000):
        decode(payload)
    decode_us = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    for _ in range(1000):
        check(payload)
    check_us = (time.perf_counter() - started) * 1000
    print(
        f"parse text {statistics.median(texts):.2f} ms, descriptor "
        f"{statistics.median(descriptors):.2f} ms, decode {decode_us:.1f} us/record, "
        f"check {check_us:.1f} us/record"
    )
    assert statistics.median(texts) < 500
    assert statistics.median(descriptors) < 50
