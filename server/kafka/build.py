"""Build a kio response entity of any version from one set of values. Pure.

kio has one class per message version. A handler states every field of the
newest version it serves, by kio's field names; ``build`` keeps those the
requested version has, converting plain values (milliseconds, error codes,
dicts of nested entities) to kio's types.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

E = TypeVar("E")

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True)
class _Field:
    name: str
    kind: str  # "entity", "entities", "timedelta", "datetime", "error_code", "plain"
    nested: type[Any] | None


_PLANS: dict[type[Any], tuple[_Field, ...]] = {}


def _plan(entity: type[Any]) -> tuple[_Field, ...]:
    """How each field of ``entity`` is converted, worked out once per kio class."""
    if (known := _PLANS.get(entity)) is not None:
        return known
    hints = typing.get_type_hints(entity)
    plan = []
    for f in dataclasses.fields(entity):
        kafka_type = f.metadata.get("kafka_type", "")
        hint = hints[f.name]
        nested, many = _nested_entity(hint)
        if nested is not None:
            kind = "entities" if many else "entity"
        elif kafka_type.startswith("timedelta"):
            kind = "timedelta"
        elif kafka_type.startswith("datetime"):
            kind = "datetime"
        elif kafka_type == "error_code":
            kind = "error_code"
        else:
            kind = "plain"
        plan.append(_Field(f.name, kind, nested))
    _PLANS[entity] = tuple(plan)
    return _PLANS[entity]


def _nested_entity(hint: Any) -> tuple[type[Any] | None, bool]:
    """The dataclass inside ``X``, ``tuple[X, ...]`` or either ``| None``, and whether a tuple."""
    origin = typing.get_origin(hint)
    if origin in (tuple, typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            found, many = _nested_entity(arg)
            if found is not None:
                return found, many or origin is tuple
        return None, False
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint, False
    return None, False


def build(entity: type[E], /, **values: Any) -> E:
    """``entity(**values)`` for the fields ``entity`` has, converted to kio's types."""
    kwargs: dict[str, Any] = {}
    for f in _plan(entity):
        if f.name not in values:
            continue
        value = values[f.name]
        if f.kind == "entities" and f.nested is not None and value is not None:
            value = tuple(_nested(f.nested, item) for item in value)
        elif f.kind == "entity" and f.nested is not None and value is not None:
            value = _nested(f.nested, value)
        elif f.kind == "timedelta" and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        elif f.kind == "datetime" and isinstance(value, int):
            value = _EPOCH + datetime.timedelta(milliseconds=value)
        elif f.kind == "error_code" and not isinstance(value, ErrorCode):
            value = ErrorCode(value)
        kwargs[f.name] = value
    return entity(**kwargs)


def _nested(entity: type[Any], value: Any) -> Any:
    return build(entity, **value) if isinstance(value, dict) else value
