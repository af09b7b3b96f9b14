"""JSON Schema payloads as Arrow columns: the typed columns of a topic whose values are JSON.

The mapping (docs/architecture.md, "Typed columns"): an object with
``properties`` is a struct of them (properties it does not name, which an open
object allows, are not typed: the bytes keep them); ``integer`` is a long,
``number`` a double, ``boolean`` and ``string`` as they are, an array with one
``items`` schema a list; a type list of one type and ``null`` is that type.
Anything else (no ``type``, several types, ``oneOf``/``anyOf``/``allOf``, a
recursive ``$ref``) is a string holding the value's JSON text, so no value is
lost to a type that cannot hold it. A ``$ref`` is followed wherever the schema's
resolver finds it: in the document or in a schema it references.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import referencing.exceptions
from referencing._core import Resolver  # the type Registry.resolver() returns

from lakelog.typed_columns import nullable
from server.schema_registry.json_schema import native, resolver_inside
from server.schema_registry.types import ParsedSchema

Shaper = Callable[[Any], Any]
_SCALARS = {
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class JsonColumns:
    """One JSON Schema's decoding into Arrow: ``json.loads``, shape, build as ``stored_type``."""

    stored_type: pa.DataType
    shape: Shaper | None

    def decode(self, data: memoryview, starts: list[int], ends: list[int]) -> list[Any]:
        values: list[Any] = []
        shape = self.shape
        for start, end in zip(starts, ends, strict=True):
            try:
                value = json.loads(bytes(data[start:end]))
            except ValueError:
                value = None
            if shape is not None and value is not None:
                value = shape(value)
            values.append(value)
        return values

    def array(self, values: list[Any]) -> pa.Array:
        return build(values, self.stored_type)

    def typed_column(
        self, data: memoryview, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
    ) -> pa.Array:
        return self.array(self.decode(data, starts.tolist(), ends.tolist()))


def build(values: list[Any], type_: pa.DataType) -> pa.Array:
    """``pa.array(values, type_)``; a value that does not fit (JSON's ``1.5`` for an integer)
    makes only its own row null."""
    try:
        return pa.array(values, type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        out = []
        for value in values:
            try:
                out.append(pa.array([value], type_)[0].as_py())
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
                out.append(None)
        return pa.array(out, type_)


def json_columns(schema: ParsedSchema) -> JsonColumns:
    """The columns of a JSON Schema; one whose root is not an object with properties
    has none (ValueError)."""
    document = native(schema)
    stored, shape = _walk(document.contents, document.resolver, (id(document.contents),))
    if not pa.types.is_struct(stored):
        raise ValueError("a JSON Schema whose root is not an object with properties")
    return JsonColumns(nullable(stored), shape)


def _follow(
    ref: Any, resolver: Resolver[Any], seen: tuple[int, ...]
) -> tuple[Any, Resolver[Any], tuple[int, ...]] | None:
    """The schema a ``$ref`` names, with the resolver inside it; None for one that does not
    resolve or that is already being walked (a recursive type no Arrow type holds)."""
    if not isinstance(ref, str):
        return None
    try:
        found = resolver.lookup(ref)
    except referencing.exceptions.Unresolvable:
        return None
    if id(found.contents) in seen:
        return None
    return found.contents, found.resolver, (*seen, id(found.contents))


def _opaque() -> tuple[pa.DataType, Shaper | None]:
    return pa.string(), _text


def _walk(
    node: Any, resolver: Resolver[Any], seen: tuple[int, ...]
) -> tuple[pa.DataType, Shaper | None]:
    if not isinstance(node, dict):
        return _opaque()
    resolver = resolver_inside(resolver, node)
    if "$ref" in node:
        followed = _follow(node["$ref"], resolver, seen)
        if followed is None:
            return _opaque()
        return _walk(*followed)
    if any(k in node for k in ("oneOf", "anyOf", "allOf", "not", "if")):
        return _opaque()
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            return _opaque()
        kind = others[0]
    if kind in _SCALARS:
        return _SCALARS[kind], None if kind != "string" else _string
    if kind == "array":
        items = node.get("items")
        if not isinstance(items, dict):
            return _opaque()
        item_type, item_shape = _walk(items, resolver, seen)
        if item_shape is None:
            return pa.list_(pa.field("element", item_type)), _list_only

        def shape_list(value: Any, one: Shaper = item_shape) -> Any:
            if not isinstance(value, list):
                return None
            return [None if v is None else one(v) for v in value]

        return pa.list_(pa.field("element", item_type)), shape_list
    properties = node.get("properties")
    if (kind == "object" or kind is None) and isinstance(properties, dict) and properties:
        walked = [(name, _walk(sub, resolver, seen)) for name, sub in properties.items()]
        struct = pa.struct([pa.field(name, t) for name, (t, _) in walked])
        shapers = [(name, s) for name, (_, s) in walked if s is not None]

        def shape_object(value: Any, shapers: Any = shapers) -> Any:
            if not isinstance(value, dict):
                return None
            for name, one in shapers:
                if value.get(name) is not None:
                    value[name] = one(value[name])
            return value

        return struct, shape_object
    return _opaque()


def _string(value: Any) -> Any:
    return value if isinstance(value, str) else None


def _list_only(value: Any) -> Any:
    return value if isinstance(value, list) else None
