"""Protobuf payloads as Arrow columns: the typed columns of a topic whose values are Protobuf.

The mapping (docs/architecture.md, "Typed columns"): the message a record's
indexes name is the struct (records of several messages of one file share it,
their fields merged by name), a nested message a struct, null when not set; a
oneof is its fields, each null unless it is the one set; ``repeated`` a list, a
map field a map; enums their value's name. 32-bit
unsigned integers are longs, 64-bit unsigned ones decimal(20, 0) (no Delta
integer holds them), ``google.protobuf.Timestamp`` a timestamp. A field without
presence (a proto3 scalar) holds its default when not set, as protobuf reads it.
"""

from __future__ import annotations

import decimal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from lakelog.typed_columns import assemble, nullable
from server.schema_registry.json_columns import build
from server.schema_registry.protobuf import ProtobufSchema, read_message_indexes

Convert = Callable[[Any], Any]
TIMESTAMP = "google.protobuf.Timestamp"

_SCALARS: dict[int, pa.DataType] = {
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_UINT32: pa.int64(),
    FieldDescriptor.TYPE_FIXED32: pa.int64(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
}
_UNSIGNED_64 = (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64)


@dataclass(frozen=True)
class MessageColumns:
    """One message of a Protobuf file decoded into Arrow."""

    message: type[Message]
    stored_type: pa.DataType
    convert: Convert


class ProtobufColumns:
    """A Protobuf file's records decoded into Arrow, each as the message its indexes name.

    Records of several messages of one file (Confluent's serializers write the index of
    the message they serialize) share the side's struct: their fields are merged by
    name, as a schema's versions are (``lakelog.typed_columns.merge_types``).
    """

    def __init__(self, schema: ProtobufSchema) -> None:
        self.schema = schema
        self._messages: dict[tuple[int, ...], MessageColumns | None] = {}
        self._lock = threading.Lock()

    def message(self, indexes: Sequence[int]) -> MessageColumns | None:
        """The decoding of the message ``indexes`` name; None where none is (no such message,
        a recursive one)."""
        key = tuple(indexes)
        with self._lock:
            if key in self._messages:
                return self._messages[key]
        try:
            type_, convert = _message(self.schema.message_descriptor(key), ())
            found: MessageColumns | None = MessageColumns(
                self.schema.message_class(key), nullable(type_), convert
            )
        except ValueError:
            found = None
        with self._lock:
            self._messages[key] = found
        return found

    def typed_column(
        self, data: memoryview, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
    ) -> pa.Array | None:
        """The rows' typed column; None if no row's message is typed."""
        groups: dict[tuple[int, ...], tuple[list[int], list[Any]]] = {}
        for row, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            payload = data[start:end]
            try:
                indexes, offset = read_message_indexes(payload)
                columns = self.message(indexes)
                if columns is None:
                    continue
                value = columns.convert(columns.message.FromString(payload[offset:]))
            except Exception:  # a payload that does not decode: this row untyped
                continue
            rows, values = groups.setdefault(tuple(indexes), ([], []))
            rows.append(row)
            values.append(value)
        pieces = []
        for key, (rows, values) in groups.items():
            columns = self.message(list(key))
            assert columns is not None
            pieces.append((np.array(rows, np.int64), build(values, columns.stored_type)))
        return assemble(len(starts), pieces, None)


def _message(descriptor: Descriptor, seen: tuple[str, ...]) -> tuple[pa.DataType, Convert]:
    if descriptor.full_name in seen:
        raise ValueError(f"{descriptor.full_name} is recursive: no Arrow type holds it")
    seen = (*seen, descriptor.full_name)
    if descriptor.full_name == TIMESTAMP:
        return pa.timestamp("us", tz="UTC"), _timestamp
    parts = [(f, *_field(f, seen)) for f in descriptor.fields]
    struct = pa.struct([pa.field(f.name, t) for f, t, _ in parts])
    steps = [(f.name, convert, _has_presence(f)) for f, _, convert in parts]

    def convert(message: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, one, presence in steps:
            if presence and not message.HasField(name):
                out[name] = None
            else:
                out[name] = one(getattr(message, name))
        return out

    return struct, convert


def _has_presence(f: FieldDescriptor) -> bool:
    if f.is_repeated:
        return False
    return bool(f.has_presence)


def _field(f: FieldDescriptor, seen: tuple[str, ...]) -> tuple[pa.DataType, Convert]:
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        key_type, key_convert = _single(f.message_type.fields_by_name["key"], seen)
        value_type, value_convert = _single(f.message_type.fields_by_name["value"], seen)

        def convert_map(values: Any) -> dict[Any, Any]:
            return {key_convert(k): value_convert(v) for k, v in values.items()}

        return pa.map_(key_type, value_type), convert_map
    item_type, item_convert = _single(f, seen)
    if f.is_repeated:

        def convert_list(values: Any) -> list[Any]:
            return [item_convert(v) for v in values]

        return pa.list_(pa.field("element", item_type)), convert_list
    return item_type, item_convert


def _single(f: FieldDescriptor, seen: tuple[str, ...]) -> tuple[pa.DataType, Convert]:
    if f.type == FieldDescriptor.TYPE_MESSAGE or f.type == FieldDescriptor.TYPE_GROUP:
        return _message(f.message_type, seen)
    if f.type == FieldDescriptor.TYPE_ENUM:
        names = {v.number: v.name for v in f.enum_type.values}

        def enum_name(number: int) -> str:
            return str(names.get(number, number))

        return pa.string(), enum_name
    if f.type in _UNSIGNED_64:
        return pa.decimal128(20, 0), decimal.Decimal
    return _SCALARS[f.type], _same


def _same(value: Any) -> Any:
    return value


def _timestamp(message: Any) -> int:
    return int(message.seconds) * 1_000_000 + int(message.nanos) // 1_000
