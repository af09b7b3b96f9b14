"""Protobuf payloads as typed columns: each record's message a struct, oneofs as nullable fields."""

from __future__ import annotations

import pyarrow as pa

from server.schema_registry.formats import format_of
from server.schema_registry.framing import frame
from server.schema_registry.protobuf import encoder, native
from server.schema_registry.protobuf_columns import ProtobufColumns
from server.schema_registry.typed_columns import RegistryColumns
from server.schema_registry.types import SchemaType

PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  string customer = 2;
  double amount = 3;
  Status status = 4;
  repeated string tags = 5;
  map<string, int64> counts = 6;
  Address address = 7;
  oneof payment {
    string card = 8;
    uint64 voucher = 9;
  }
  google.protobuf.Timestamp placed = 10;
  optional int32 rank = 11;
}
message Address { string city = 1; }
enum Status { NEW = 0; PAID = 1; }
"""


def test_the_first_message_is_a_struct_and_its_records_decode() -> None:
    fmt = format_of(SchemaType.PROTOBUF)
    schema = fmt.parse(PROTO, {})
    columns = ProtobufColumns(native(schema)).message([0])
    assert columns is not None
    assert columns.stored_type == pa.struct(
        [
            ("id", pa.int64()),
            ("customer", pa.string()),
            ("amount", pa.float64()),
            ("status", pa.string()),
            ("tags", pa.list_(pa.field("element", pa.string()))),
            ("counts", pa.map_(pa.string(), pa.int64())),
            ("address", pa.struct([("city", pa.string())])),
            ("card", pa.string()),
            ("voucher", pa.decimal128(20, 0)),
            ("placed", pa.timestamp("us", tz="UTC")),
            ("rank", pa.int32()),
        ]
    )
    encode = fmt.encoder(schema)
    values = [
        {
            "id": "7",
            "customer": "ann",
            "amount": 2.5,
            "status": "PAID",
            "tags": ["a"],
            "counts": {"x": "3"},
            "address": {"city": "Oslo"},
            "card": "visa",
            "placed": "2024-01-01T00:00:01.5Z",
        },
        {"id": "8", "voucher": str(2**64 - 1), "rank": 0},
    ]
    column = pa.array([frame(4, encode(v)) for v in values] + [None], pa.binary())
    typed = RegistryColumns(lambda _id: schema).typed(column, None)
    assert typed is not None
    first, second, third = typed.to_pylist()
    assert first["id"] == 7 and first["status"] == "PAID" and first["counts"] == [("x", 3)]
    assert first["address"] == {"city": "Oslo"}
    assert (first["card"], first["voucher"], first["rank"]) == ("visa", None, None)
    assert first["placed"].timestamp() == 1_704_067_201.5
    assert (second["card"], int(second["voucher"]), second["rank"]) == (None, 2**64 - 1, 0)
    assert second["address"] is None and second["customer"] == ""  # proto3 defaults
    assert third is None


def test_records_of_other_messages_of_the_file_are_typed_and_share_the_struct() -> None:
    fmt = format_of(SchemaType.PROTOBUF)
    schema = fmt.parse(PROTO, {})
    order = fmt.encoder(schema)({"id": "7", "amount": 2.5})
    address = encoder(schema, "shop.Address")({"city": "Oslo"})
    assert address[:1] != b"\x00"  # indexes [1]: the file's second message
    column = pa.array([frame(4, order), frame(4, address), frame(4, b"\x02\x0a")], pa.binary())
    typed = RegistryColumns(lambda _id: schema).typed(column, None)
    assert typed is not None
    names = [f.name for f in typed.type]
    assert names[:3] == ["id", "customer", "amount"] and names[-1] == "city"
    first, second, third = typed.to_pylist()
    assert (first["id"], first["amount"], first["city"]) == (7, 2.5, None)
    assert (second["id"], second["city"]) == (None, "Oslo")
    assert third is None  # indexes naming no message of the file: untyped
