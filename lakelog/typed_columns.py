"""Typed columns: a topic table's columns after the fixed ones, decoded from keys and values.

A topic whose records are schema'd (docs/architecture.md, "Typed columns") stores,
beside the original ``key`` and ``value`` bytes, one nullable struct column per
schema'd side (``value_fields``, ``key_fields``). The core knows only their Arrow
and Delta types and how a column's type grows as schemas evolve; what a payload
decodes to is the business of a ``ColumnDecoder`` the process installs (a broker's
Schema Registry), as the core imports nothing of ``server/``.

Every typed field is nullable, at every depth: a field a later schema adds is
missing from files written before, and Delta readers read it as null there.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.delta.actions import Metadata
from lakelog.records import SEGMENT_SCHEMA
from lakelog.topic_config import TopicConfig

#: The typed columns a table may carry, in their order in a segment file.
VALUE_FIELDS = "value_fields"
KEY_FIELDS = "key_fields"
TYPED_COLUMNS = (VALUE_FIELDS, KEY_FIELDS)


class ColumnDecoder(Protocol):
    """Decodes the ``key``/``value`` bytes of produce rows into typed columns.

    Called once per partition's rows of a group commit, on the staging thread.
    ``stored`` holds the table's current type of each typed column; an answer's
    arrays have a type that contains it (``merge_types``), so the table's schema
    only ever grows. A column not answered is not written for those rows.
    """

    def __call__(
        self, topic: str, config: TopicConfig, rows: pa.Table, stored: Mapping[str, pa.DataType]
    ) -> dict[str, pa.Array]: ...


# -- Delta schema JSON <-> Arrow types ----------------------------------------------

_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
_NAMES = {t: name for name, t in _PRIMITIVES.items()}


def delta_type(type_: pa.DataType) -> Any:
    """The Delta schema JSON of an Arrow type lakelog stores."""
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        element = type_.value_field
        return {
            "type": "array",
            "elementType": delta_type(element.type),
            "containsNull": element.nullable,
        }
    if pa.types.is_map(type_):
        return {
            "type": "map",
            "keyType": delta_type(type_.key_type),
            "valueType": delta_type(type_.item_type),
            "valueContainsNull": type_.item_field.nullable,
        }
    if pa.types.is_struct(type_):
        return {
            "type": "struct",
            "fields": [
                {"name": f.name, "type": delta_type(f.type), "nullable": f.nullable, "metadata": {}}
                for f in type_
            ],
        }
    if pa.types.is_decimal(type_):
        return f"decimal({type_.precision},{type_.scale})"
    if pa.types.is_timestamp(type_):
        return "timestamp"
    if pa.types.is_large_string(type_):
        return "string"
    if pa.types.is_large_binary(type_):
        return "binary"
    try:
        return _NAMES[type_]
    except KeyError:
        raise ValueError(f"no Delta type for Arrow type {type_}") from None


def arrow_type(delta: Any) -> pa.DataType:
    """The Arrow type lakelog writes for a Delta schema type (typed columns: timestamps in µs)."""
    if isinstance(delta, str):
        if delta.startswith("decimal("):
            precision, scale = delta[len("decimal(") : -1].split(",")
            return pa.decimal128(int(precision), int(scale))
        return _PRIMITIVES[delta]
    kind = delta["type"]
    if kind == "array":
        element = arrow_type(delta["elementType"])
        return pa.list_(pa.field("element", element, delta["containsNull"]))
    if kind == "map":
        return pa.map_(
            arrow_type(delta["keyType"]),
            pa.field("value", arrow_type(delta["valueType"]), delta["valueContainsNull"]),
        )
    if kind == "struct":
        return pa.struct([arrow_field(f) for f in delta["fields"]])
    raise ValueError(f"unknown Delta type {delta!r}")


def arrow_field(delta_field: Mapping[str, Any]) -> pa.Field:
    return pa.field(
        delta_field["name"], arrow_type(delta_field["type"]), bool(delta_field["nullable"])
    )


# -- the typed columns of a table -----------------------------------------------------


def typed_fields(metadata: Metadata | None) -> dict[str, pa.Field]:
    """The typed columns the table's Delta schema has, by name."""
    if metadata is None:
        return {}
    return dict(_typed_fields(metadata.schema_string))


@functools.lru_cache(maxsize=256)
def _typed_fields(schema_string: str) -> tuple[tuple[str, pa.Field], ...]:
    """Parsed once per schema: every staged group commit asks."""
    fields = json.loads(schema_string)["fields"]
    return tuple((f["name"], arrow_field(f)) for f in fields if f["name"] in TYPED_COLUMNS)


def segment_schema(typed: Sequence[pa.Field] = ()) -> pa.Schema:
    """A segment file's columns: the fixed ones, then typed columns in ``TYPED_COLUMNS`` order."""
    order = {name: i for i, name in enumerate(TYPED_COLUMNS)}
    extra = sorted(typed, key=lambda f: order[f.name])
    return pa.schema([*SEGMENT_SCHEMA, *extra]) if extra else SEGMENT_SCHEMA


def evolved_schema(metadata: Metadata, written: Sequence[pa.Field]) -> str | None:
    """The table's Delta schema string once it holds the typed columns of ``written``
    segments, or None if it holds them already (the commit then needs no metaData)."""
    schema = json.loads(metadata.schema_string)
    current = {f["name"]: i for i, f in enumerate(schema["fields"])}
    changed = False
    for f in written:
        index = current.get(f.name)
        if index is None:
            schema["fields"].append(
                {"name": f.name, "type": delta_type(f.type), "nullable": True, "metadata": {}}
            )
            current[f.name] = len(schema["fields"]) - 1
            changed = True
            continue
        old = arrow_field(schema["fields"][index]).type
        merged = merge_types(old, f.type)
        if merged != old:
            schema["fields"][index]["type"] = delta_type(merged)
            changed = True
    if not changed:
        return None
    return json.dumps(schema, separators=(",", ":"))


def refitted(rows: pa.Table, stored: Mapping[str, pa.DataType]) -> pa.Table | None:
    """Staged ``rows`` with their typed columns conformed to the table's types, or None if
    they fit as they are.

    Rows are typed against the table's schema when staged; another writer may have
    committed a type for one of their new fields meanwhile, and a file must hold each
    column as the type the commit declares, or readers fail on it.
    """
    changed = False
    columns = []
    for f in rows.schema:
        column = rows.column(f.name)
        old = stored.get(f.name)
        if f.name in TYPED_COLUMNS and old is not None:
            target = merge_types(old, f.type)
            if target != f.type:
                column = pa.chunked_array(
                    [conform(chunk, target) for chunk in column.chunks], target
                )
                changed = True
        columns.append(column)
    if not changed:
        return None
    names = rows.column_names
    return pa.table(dict(zip(names, columns, strict=True)))


# -- growing a type, and fitting arrays to it ----------------------------------------------


def nullable(type_: pa.DataType) -> pa.DataType:
    """``type_`` with every field, element and map value nullable (see the module docstring)."""
    if pa.types.is_struct(type_):
        return pa.struct([pa.field(f.name, nullable(f.type)) for f in type_])
    if pa.types.is_list(type_):
        return pa.list_(pa.field("element", nullable(type_.value_type)))
    if pa.types.is_map(type_):
        return pa.map_(type_.key_type, pa.field("value", nullable(type_.item_type)))
    return type_


def merge_types(old: pa.DataType | None, new: pa.DataType) -> pa.DataType:
    """A type holding both: struct fields by name, ``old``'s first, then ``new``'s added ones.

    A leaf whose type changed keeps ``old``'s: a Delta column's type never changes
    (values of the new type are cast where they fit, else null; ``conform``).
    """
    if old is None:
        return new
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        names = {f.name for f in old}
        fields = [
            pa.field(
                f.name,
                merge_types(f.type, new.field(f.name).type)
                if new.get_field_index(f.name) >= 0
                else f.type,
                f.nullable,
            )
            for f in old
        ]
        fields += [f for f in new if f.name not in names]
        return pa.struct(fields)
    if pa.types.is_list(old) and pa.types.is_list(new):
        element = merge_types(old.value_type, new.value_type)
        return pa.list_(pa.field("element", element, old.value_field.nullable))
    if pa.types.is_map(old) and pa.types.is_map(new):
        item = merge_types(old.item_type, new.item_type)
        return pa.map_(old.key_type, pa.field("value", item, old.item_field.nullable))
    return old


def assemble(
    n: int, pieces: Sequence[tuple[npt.NDArray[np.int64], pa.Array]], stored: pa.DataType | None
) -> pa.Array | None:
    """One column of ``n`` rows from typed ``pieces`` (the rows each covers, their array), as
    a type holding ``stored`` and every piece's; rows no piece covers are null. None: no
    piece."""
    if not pieces:
        return None
    merged = stored
    for _, array in pieces:
        merged = merge_types(merged, array.type)
    assert merged is not None
    if len(pieces) == 1 and len(pieces[0][0]) == n:
        return conform(pieces[0][1], merged)
    fitted = [conform(array, merged) for _, array in pieces]
    covered = np.concatenate([rows for rows, _ in pieces])
    if n > len(covered):
        fitted.append(pa.nulls(n - len(covered), merged))
    placed = np.empty(n, np.int64)
    placed[np.concatenate([covered, np.setdiff1d(np.arange(n), covered)])] = np.arange(n)
    return pa.concat_arrays(fitted).take(pa.array(placed))


def conform(array: pa.Array, type_: pa.DataType) -> pa.Array:
    """``array`` as ``type_`` (a ``merge_types`` result containing its type): fields it lacks
    are null; a leaf of another type is cast, each value that does not fit null."""
    if array.type == type_:
        return array
    if pa.types.is_struct(type_) and pa.types.is_struct(array.type):
        assert isinstance(array, pa.StructArray)
        children = [
            conform(array.field(f.name), f.type)
            if array.type.get_field_index(f.name) >= 0
            else pa.nulls(len(array), f.type)
            for f in type_
        ]
        return pa.StructArray.from_arrays(
            children, fields=list(type_), mask=array.is_null() if array.null_count else None
        )
    if pa.types.is_list(type_) and pa.types.is_list(array.type):
        assert isinstance(array, pa.ListArray)
        values = conform(array.flatten(), type_.value_type)
        offsets = array.offsets
        if array.offset or len(array.values) != len(values):
            offsets = pc.subtract(offsets, offsets[0])
        return pa.ListArray.from_arrays(
            offsets, values, type=type_, mask=array.is_null() if array.null_count else None
        )
    if pa.types.is_map(type_) and pa.types.is_map(array.type):
        assert isinstance(array, pa.MapArray)
        return pa.MapArray.from_arrays(
            array.offsets,
            array.keys.cast(type_.key_type),
            conform(array.items, type_.item_type),
            type=type_,
            mask=array.is_null() if array.null_count else None,
        )
    try:
        return array.cast(type_)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _cast_or_null(array, type_)


def _cast_or_null(array: pa.Array, type_: pa.DataType) -> pa.Array:
    """Value by value: the rare leaf whose type changed across schema versions."""
    out = []
    for value in array:
        try:
            out.append(value.cast(type_).as_py())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
            out.append(None)
    return pa.array(out, type_)
