"""Avro payloads as Arrow columns: the typed columns of a topic whose values are Avro.

The mapping (docs/architecture.md, "Typed columns"): a record is a struct, an
array a list, a map a map of string keys, an enum its symbol as a string, fixed
and bytes binary; a union of null and one type is that type, nullable; any other
union is a struct with one field per branch, named by the branch's type, only
the branch the value took set. Logical types: decimal is a Delta decimal (as a
string above 38 digits), date a date, timestamp-millis and -micros a timestamp
(UTC, microseconds), uuid a string; time-* and local-timestamp-* keep their
integer (Delta has no time-of-day or local timestamp without a table feature).

A schema the column decoder takes (``avro_batch``) is decoded a column at a time;
any other is decoded by fastavro with logical types stripped from the schema, so it
builds plain ints, strings and bytes. Either way Arrow casts whole columns to the
logical types, instead of making a ``datetime`` or ``Decimal`` per value.
"""

from __future__ import annotations

import copy
import decimal
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakelog.typed_columns import nullable
from server.schema_registry.avro_batch import (
    AvroBatchDecoder,
    Unsupported,
    avro_batch_decoder,
    full_name,
)

#: Python values of a decoded payload to what ``pa.array(..., raw_type)`` takes.
Shaper = Callable[[Any], Any]

_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True)
class AvroColumns:
    """One Avro schema's decoding into Arrow: decode, build, then cast to ``stored``."""

    reader_schema: Any
    raw_type: pa.DataType
    stored_type: pa.DataType
    shape: Shaper | None
    convert: Callable[[pa.Array], pa.Array]
    #: The column decoder, where it takes the schema.
    batch: AvroBatchDecoder | None = None

    def typed_column(
        self, data: memoryview, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
    ) -> pa.Array:
        """The stored-type column of the payloads ``starts[i]:ends[i]`` of ``data``; a payload
        that does not decode is null."""
        if self.batch is not None:
            raw, _flagged = self.batch.decode(data, starts, ends)
            return self.convert(raw)
        return self.array(self.decode(data, starts.tolist(), ends.tolist()))

    def decode(self, data: memoryview, starts: list[int], ends: list[int]) -> list[Any]:
        """The payloads ``starts[i]:ends[i]`` of ``data`` (an Avro datum knows its own end);
        a payload that does not decode is None (validation on produce refuses those)."""
        stream = io.BytesIO(data)
        reader, schema, shape = fastavro.schemaless_reader, self.reader_schema, self.shape
        values: list[Any] = []
        for start in starts:
            stream.seek(start)
            try:
                value = reader(stream, schema, None)
            except Exception:  # any decoding failure: this row untyped
                value = None
            values.append(value if shape is None or value is None else shape(value))
        return values

    def array(self, values: list[Any]) -> pa.Array:
        return self.convert(pa.array(values, self.raw_type))


def avro_columns(schema: Any, references: Sequence[Any] = ()) -> AvroColumns:
    """The columns of the Avro schema ``schema`` (its JSON, parsed); ``references``: the
    JSON of the schemas defining the named types it uses, in dependency order."""
    named: dict[str, _Walked] = {}
    for source in references:
        _walk(source, named, None)
    raw, stored, shape, convert = _walk(schema, named, None)
    known: dict[str, Any] = {}
    for source in references:
        fastavro.parse_schema(_strip_logical(copy.deepcopy(source)), named_schemas=known)
    stripped = fastavro.parse_schema(_strip_logical(copy.deepcopy(schema)), named_schemas=known)
    batch = _batch((*references, schema), raw)
    return AvroColumns(stripped, raw, nullable(stored), shape, convert, batch)


def _batch(sources: tuple[Any, ...], raw: pa.DataType) -> AvroBatchDecoder | None:
    """The column decoder of the last of ``sources`` if it takes it and builds ``raw``."""
    try:
        batch = avro_batch_decoder(*sources)
    except Unsupported:
        return None
    none = np.zeros(0, np.int64)
    return batch if batch.decode(b"", none, none)[0].type == raw else None


_Walked = tuple[pa.DataType, pa.DataType, Shaper | None, Callable[[pa.Array], pa.Array]]


def _same(array: pa.Array) -> pa.Array:
    return array


def _walk(schema: Any, named: dict[str, _Walked], namespace: str | None) -> _Walked:
    """(raw type, stored type, value shaper, raw-to-stored array conversion) of ``schema``."""
    if isinstance(schema, list):
        return _union(schema, named, namespace)
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema], _PRIMITIVES[schema], None, _same
        if schema == "null":
            return pa.null(), pa.null(), None, _same
        found: _Walked | None = named.get(schema) or named.get(f"{namespace}.{schema}")
        if found is None:  # unknown, or a recursive reference: Arrow types are finite
            raise ValueError(f"unknown Avro type {schema!r}")
        return found
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical is not None:
        done = _logical(schema, kind, logical)
        if done is not None:
            return done
    if kind == "record" or kind == "error":
        full = full_name(schema, namespace)
        space = full.rpartition(".")[0] or None
        walked = [(f["name"], _walk(f["type"], named, space)) for f in schema["fields"]]
        raw = pa.struct([pa.field(n, w[0]) for n, w in walked])
        stored = pa.struct([pa.field(n, w[1]) for n, w in walked])
        shapers = [(n, w[2]) for n, w in walked if w[2] is not None]
        converts = [(i, w[3]) for i, (_, w) in enumerate(walked) if w[3] is not _same]
        shape: Shaper | None = None
        if shapers:

            def shape(value: dict[str, Any], shapers: Any = shapers) -> dict[str, Any]:
                for name, one in shapers:
                    if value.get(name) is not None:
                        value[name] = one(value[name])
                return value

        convert = _same
        if converts:

            def convert(array: pa.Array, converts: Any = converts, stored: Any = stored) -> Any:
                children = [array.field(i) for i in range(array.type.num_fields)]
                for i, one in converts:
                    children[i] = one(children[i])
                mask = array.is_null() if array.null_count else None
                return pa.StructArray.from_arrays(children, fields=list(stored), mask=mask)

        result: _Walked = (raw, stored, shape, convert)
        named[full] = result
        return result
    if kind == "enum":
        named[full_name(schema, namespace)] = (pa.string(), pa.string(), None, _same)
        return pa.string(), pa.string(), None, _same
    if kind == "fixed":
        named[full_name(schema, namespace)] = (pa.binary(), pa.binary(), None, _same)
        return pa.binary(), pa.binary(), None, _same
    if kind == "array":
        raw_item, stored_item, item_shape, item_convert = _walk(schema["items"], named, namespace)
        list_shape = None
        if item_shape is not None:

            def list_shape(value: list[Any], one: Shaper = item_shape) -> list[Any]:
                return [None if v is None else one(v) for v in value]

        list_convert = _same
        if item_convert is not _same:

            def list_convert(
                array: pa.Array, one: Any = item_convert, st: Any = stored_item
            ) -> Any:
                mask = array.is_null() if array.null_count else None
                values = one(array.values)
                return pa.ListArray.from_arrays(array.offsets, values, pa.list_(st), mask=mask)

        return pa.list_(raw_item), pa.list_(stored_item), list_shape, list_convert
    if kind == "map":
        raw_item, stored_item, item_shape, item_convert = _walk(schema["values"], named, namespace)

        map_shape = None
        if item_shape is not None:  # Arrow builds a map from a dict as it is

            def map_shape(value: dict[str, Any], one: Shaper = item_shape) -> dict[str, Any]:
                return {k: None if v is None else one(v) for k, v in value.items()}

        map_convert = _same
        if item_convert is not _same:

            def map_convert(array: pa.Array, one: Any = item_convert, st: Any = stored_item) -> Any:
                mask = array.is_null() if array.null_count else None
                return pa.MapArray.from_arrays(
                    array.offsets, array.keys, one(array.items), pa.map_(pa.string(), st), mask=mask
                )

        return (
            pa.map_(pa.string(), raw_item),
            pa.map_(pa.string(), stored_item),
            map_shape,
            map_convert,
        )
    if isinstance(kind, (str, list, dict)):
        return _walk(kind, named, namespace)  # {"type": "string"} and the like
    raise ValueError(f"unsupported Avro schema {schema!r}")


def _logical(schema: dict[str, Any], kind: str, logical: str) -> _Walked | None:
    """A logical type's columns; None where the schema is read as its underlying type."""
    if logical == "date" and kind == "int":
        return pa.int32(), pa.date32(), None, lambda a: a.cast(pa.date32())
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        unit = "ms" if logical == "timestamp-millis" else "us"
        stored = pa.timestamp("us", tz="UTC")
        return (
            pa.int64(),
            stored,
            None,
            lambda a: a.cast(pa.timestamp(unit, tz="UTC")).cast(stored),
        )
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision = int(schema.get("precision", 0))
        scale = int(schema.get("scale", 0))
        if not 0 < precision <= MAX_DECIMAL_PRECISION:
            return pa.binary(), pa.string(), None, _decimal_strings(scale)
        stored = pa.decimal128(precision, scale)
        return pa.binary(), stored, None, _decimals(stored)
    return None


def _unscaled(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


def _decimals(stored: pa.Decimal128Type) -> Callable[[pa.Array], pa.Array]:
    """Avro's big-endian two's-complement unscaled integers as Arrow decimals."""
    scale = stored.scale

    def convert(array: pa.Array) -> pa.Array:
        values = [
            None if b is None else decimal.Decimal(_unscaled(b)).scaleb(-scale)
            for b in array.to_pylist()
        ]
        return pa.array(values, stored)

    return convert


def _decimal_strings(scale: int) -> Callable[[pa.Array], pa.Array]:
    def convert(array: pa.Array) -> pa.Array:
        values = [
            None if b is None else str(decimal.Decimal(_unscaled(b)).scaleb(-scale))
            for b in array.to_pylist()
        ]
        return pa.array(values, pa.string())

    return convert


def _branch_name(branch: Any) -> str:
    if isinstance(branch, str):
        return branch.rpartition(".")[2]
    if isinstance(branch, dict):
        if "name" in branch:
            return str(branch["name"]).rpartition(".")[2]
        return str(branch.get("logicalType") or branch["type"])
    return "union"


#: Python types of decoded values, per Avro branch kind, for routing a value to its branch.
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,),
    "int": (int,),
    "long": (int,),
    "float": (float,),
    "double": (float,),
    "bytes": (bytes,),
    "string": (str,),
    "enum": (str,),
    "fixed": (bytes,),
    "record": (dict,),
    "error": (dict,),
    "map": (dict,),
    "array": (list,),
}


def _kind(branch: Any, named: dict[str, _Walked]) -> str:
    if isinstance(branch, str):
        if branch in _PRIMITIVES or branch == "null":
            return branch
        found = named.get(branch)
        if found is not None and pa.types.is_struct(found[0]):
            return "record"
        if found is not None and pa.types.is_binary(found[0]):
            return "fixed"
        return "enum"
    return str(branch["type"]) if isinstance(branch, dict) else "union"


def _union(branches: list[Any], named: dict[str, _Walked], namespace: str | None) -> _Walked:
    others = [b for b in branches if b != "null"]
    if len(others) == 1:
        return _walk(others[0], named, namespace)
    walked = [(_branch_name(b), _kind(b, named), _walk(b, named, namespace)) for b in others]
    raw = pa.struct([pa.field(n, w[0]) for n, _, w in walked])
    stored = pa.struct([pa.field(n, w[1]) for n, _, w in walked])
    routes = [(n, _PYTHON_TYPES.get(k, (object,)), w[2]) for n, k, w in walked]

    def shape(value: Any, routes: Any = routes) -> dict[str, Any]:
        # bool is an int in Python: only a boolean branch takes True and False.
        for name, types, one in routes:
            if isinstance(value, bool) and bool not in types:
                continue
            if isinstance(value, types):
                return {name: value if one is None else one(value)}
        return {}

    converts = [(i, w[3]) for i, (_, _, w) in enumerate(walked) if w[3] is not _same]

    def convert(array: pa.Array, converts: Any = converts, stored: Any = stored) -> Any:
        if not converts:
            return array
        children = [array.field(i) for i in range(array.type.num_fields)]
        for i, one in converts:
            children[i] = one(children[i])
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(stored), mask=mask)

    return raw, stored, shape, convert


def _strip_logical(schema: Any) -> Any:
    """``schema`` without logical types: fastavro then decodes their underlying values."""
    if isinstance(schema, list):
        return [_strip_logical(s) for s in schema]
    if isinstance(schema, dict):
        schema.pop("logicalType", None)
        for key in ("type", "items", "values"):
            if key in schema and not isinstance(schema[key], str):
                schema[key] = _strip_logical(schema[key])
        for f in schema.get("fields", ()) if isinstance(schema.get("fields"), list) else ():
            f["type"] = _strip_logical(f["type"])
    return schema
