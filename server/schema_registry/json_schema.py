"""JSON Schema: ``jsonschema`` parses and validates, ``referencing`` resolves references.

Compatibility is written here because no maintained Python library judges it:
jsonschema, fastjsonschema and jsonschema-rs validate documents but none compares
two schemas, and Confluent's rules are a diff of the two schemas rather than a
property a validator can test. The diff follows Confluent's documented rules for
what matters most (types and their narrowing, properties under open and closed
content models, required properties, enums, length, range and item limits,
unions and products); each finding names Confluent's change type and the path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

import jsonschema  # type: ignore[import-untyped]
import jsonschema.exceptions  # type: ignore[import-untyped]
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.protocols import Validator  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]
from referencing._core import Resolver  # the type Registry.resolver() returns

from lakelog.errors import InvalidSchemaError
from server.schema_registry.formats import BatchCheck, Decoder, Encoder
from server.schema_registry.types import ParsedSchema, SchemaType

#: The drafts Confluent accepts; a schema without ``$schema`` is draft 7, as there.
_DRAFTS: tuple[type[Validator], ...] = (
    jsonschema.Draft4Validator,
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
    jsonschema.Draft201909Validator,
    jsonschema.Draft202012Validator,
)
_DEFAULT_DRAFT: type[Validator] = jsonschema.Draft7Validator


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class JsonNative:
    """What the format keeps of a parsed schema.

    ``resources`` are the referenced documents by the name ``$ref`` uses, the
    references' own references included, so a referrer can rebuild the registry.
    """

    contents: Any
    validator: Validator
    resolver: Resolver[Any]
    resources: tuple[tuple[str, referencing.Resource[Any]], ...]


def _draft_of(value: Any) -> type[Validator]:
    if not isinstance(value, dict | bool):
        raise InvalidSchemaError(f"a JSON Schema is an object or a boolean, not {value!r}")
    if isinstance(value, bool) or "$schema" not in value:
        return _DEFAULT_DRAFT
    draft: type[Validator] | None = validator_for(value, default=None)
    if draft not in _DRAFTS:
        raise InvalidSchemaError(f"unsupported $schema {value['$schema']!r}: draft 4 or later")
    assert draft is not None
    return draft


def _resource(value: Any) -> referencing.Resource[Any]:
    specification = referencing.jsonschema.specification_with(
        _draft_of(value).META_SCHEMA["$schema"]
    )
    return specification.create_resource(value)


_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_VALUES = (
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
)


def _subschemas(value: Any) -> Iterator[Any]:
    """The schemas directly inside ``value`` (never its data keywords: enum, const, default)."""
    if not isinstance(value, dict):
        return
    for key in _SCHEMA_MAPS:
        found = value.get(key)
        if isinstance(found, dict):
            yield from found.values()
    for key in _SCHEMA_LISTS:
        found = value.get(key)
        if isinstance(found, list):
            yield from found
    for key in _SCHEMA_VALUES:
        if key in value:
            yield value[key]
    items = value.get("items")
    if isinstance(items, list):
        yield from items
    elif items is not None:
        yield items
    dependencies = value.get("dependencies")
    if isinstance(dependencies, dict):
        yield from (found for found in dependencies.values() if isinstance(found, dict))


def resolver_inside(resolver: Resolver[Any], value: Any) -> Resolver[Any]:
    """The resolver inside ``value``, whose ``$id`` (``id`` in draft 4) may change the base."""
    if isinstance(value, dict) and ("$id" in value or "id" in value):
        return resolver.in_subresource(_resource(value))
    return resolver


def _check_references(value: Any, resolver: Resolver[Any]) -> None:
    """Every ``$ref`` resolves, so a schema with a dangling reference is refused at once."""
    pending = [(value, resolver)]
    while pending:
        node, outer = pending.pop()
        inner = resolver_inside(outer, node)
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            try:
                inner.lookup(node["$ref"])
            except referencing.exceptions.Unresolvable as error:
                raise InvalidSchemaError(
                    f"unresolvable $ref {node['$ref']!r} ({error}): "
                    "not in the schema nor its references"
                ) from None
        pending.extend((child, inner) for child in _subschemas(node))


def native(schema: ParsedSchema) -> JsonNative:
    native = schema.native
    if not isinstance(native, JsonNative):
        raise TypeError(f"not a JSON schema: {schema.schema_type}")
    return native


def _path(error: jsonschema.exceptions.ValidationError) -> str:
    path: str = error.json_path
    return path


class JsonSchemaFormat:
    schema_type: ClassVar[SchemaType] = SchemaType.JSON

    def parse(
        self,
        text: str,
        references: Mapping[str, ParsedSchema],
        *,
        normalize: bool = False,
    ) -> ParsedSchema:
        try:
            value = json.loads(text)
        except ValueError as error:
            raise InvalidSchemaError(f"not JSON: {error}") from None
        except RecursionError:
            raise InvalidSchemaError("the schema is nested too deeply") from None
        draft = _draft_of(value)
        try:
            draft.check_schema(value)
        except jsonschema.exceptions.SchemaError as error:
            where = "/".join(str(part) for part in error.absolute_path) or "the root"
            raise InvalidSchemaError(f"invalid JSON Schema at {where}: {error.message}") from None
        except RecursionError:
            raise InvalidSchemaError("the schema is nested too deeply") from None
        resources: dict[str, referencing.Resource[Any]] = {}
        for name, reference in references.items():
            if reference.schema_type is not SchemaType.JSON:
                raise InvalidSchemaError(
                    f"reference {name!r} is a {reference.schema_type} schema, not JSON"
                )
            referenced = native(reference)
            resources.update(referenced.resources)
            resources[name] = _resource(referenced.contents)
        registry: referencing.Registry[Any] = referencing.Registry().with_resources(
            resources.items()
        )
        root = _resource(value)
        base = root.id() or ""
        registry = registry.with_resource(base, root)
        resolver = registry.resolver(base_uri=base)
        _check_references(value, resolver)
        validator = draft(value, registry=registry, format_checker=draft.FORMAT_CHECKER)
        return ParsedSchema(
            schema_type=SchemaType.JSON,
            text=text,
            canonical=_compact(value),
            native=JsonNative(value, validator, resolver, tuple(resources.items())),
        )

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        if reader.schema_type is not writer.schema_type:
            return [f"a {reader.schema_type} schema cannot read {writer.schema_type} data"]
        original, update = native(writer), native(reader)
        diff = _Diff()
        try:
            diff.compare(
                _Node(original.contents, original.resolver),
                _Node(update.contents, update.resolver),
                "#",
            )
        except RecursionError:
            return ["the schemas are nested too deeply to compare"]
        return [_describe(kind, path) for kind, path in diff.incompatible()]

    def decoder(self, schema: ParsedSchema) -> Decoder:
        check = _checker(native(schema).validator)

        def decode(payload: memoryview) -> object:
            try:
                value = json.loads(bytes(payload))
            except UnicodeDecodeError as error:
                raise ValueError(f"not UTF-8 at byte {error.start}") from None
            except ValueError as error:
                raise ValueError(f"not JSON: {error}") from None
            except RecursionError:
                raise ValueError("not JSON this parser reads: nested too deeply") from None
            check(value)
            return value

        return decode

    def encoder(self, schema: ParsedSchema) -> Encoder:
        check = _checker(native(schema).validator)

        def encode(value: object) -> bytes:
            check(value)
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

        return encode

    def batch_check(self, schema: ParsedSchema) -> BatchCheck | None:
        return None


def _checker(validator: Validator) -> Callable[[object], None]:
    def check(value: object) -> None:
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        except RecursionError:
            raise ValueError("nested too deeply to validate") from None
        if error is not None:
            raise ValueError(f"at {_path(error)}: {error.message}")

    return check


# --- compatibility --------------------------------------------------------------

#: Changes from the writer's schema to the reader's that keep old data readable
#: (Confluent's strict set; every other change found is an incompatibility).
_COMPATIBLE = frozenset(
    {
        "ID_CHANGED",
        "DESCRIPTION_CHANGED",
        "TITLE_CHANGED",
        "DEFAULT_CHANGED",
        "SCHEMA_REMOVED",
        "TYPE_EXTENDED",
        "MAX_LENGTH_INCREASED",
        "MAX_LENGTH_REMOVED",
        "MIN_LENGTH_DECREASED",
        "MIN_LENGTH_REMOVED",
        "PATTERN_REMOVED",
        "MAXIMUM_INCREASED",
        "MAXIMUM_REMOVED",
        "MINIMUM_DECREASED",
        "MINIMUM_REMOVED",
        "EXCLUSIVE_MAXIMUM_INCREASED",
        "EXCLUSIVE_MAXIMUM_REMOVED",
        "EXCLUSIVE_MINIMUM_DECREASED",
        "EXCLUSIVE_MINIMUM_REMOVED",
        "MULTIPLE_OF_REDUCED",
        "MULTIPLE_OF_REMOVED",
        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
        "REQUIRED_ATTRIBUTE_REMOVED",
        "MAX_PROPERTIES_INCREASED",
        "MAX_PROPERTIES_REMOVED",
        "MIN_PROPERTIES_DECREASED",
        "MIN_PROPERTIES_REMOVED",
        "ADDITIONAL_PROPERTIES_ADDED",
        "ADDITIONAL_PROPERTIES_EXTENDED",
        "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "MAX_ITEMS_INCREASED",
        "MAX_ITEMS_REMOVED",
        "MIN_ITEMS_DECREASED",
        "MIN_ITEMS_REMOVED",
        "UNIQUE_ITEMS_REMOVED",
        "ADDITIONAL_ITEMS_ADDED",
        "ADDITIONAL_ITEMS_EXTENDED",
        "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
        "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ENUM_ARRAY_EXTENDED",
        "COMBINED_TYPE_EXTENDED",
        "PRODUCT_TYPE_NARROWED",
        "SUM_TYPE_EXTENDED",
        "NOT_TYPE_NARROWED",
    }
)

_KEYWORD_MISSING = frozenset(
    {
        "MAXIMUM_ADDED",
        "MINIMUM_ADDED",
        "EXCLUSIVE_MAXIMUM_ADDED",
        "EXCLUSIVE_MINIMUM_ADDED",
        "MULTIPLE_OF_ADDED",
        "MAX_LENGTH_ADDED",
        "MIN_LENGTH_ADDED",
        "PATTERN_ADDED",
        "REQUIRED_ATTRIBUTE_ADDED",
        "MAX_PROPERTIES_ADDED",
        "MIN_PROPERTIES_ADDED",
        "MAX_ITEMS_ADDED",
        "MIN_ITEMS_ADDED",
        "UNIQUE_ITEMS_ADDED",
        "ADDITIONAL_ITEMS_REMOVED",
        "ADDITIONAL_PROPERTIES_REMOVED",
    }
)
_MORE = frozenset(
    {
        "MIN_LENGTH_INCREASED",
        "MINIMUM_INCREASED",
        "EXCLUSIVE_MINIMUM_INCREASED",
        "MIN_PROPERTIES_INCREASED",
        "MULTIPLE_OF_EXPANDED",
        "MIN_ITEMS_INCREASED",
    }
)
_LESS = frozenset(
    {
        "MAX_LENGTH_DECREASED",
        "MAXIMUM_DECREASED",
        "MAX_ITEMS_DECREASED",
        "EXCLUSIVE_MAXIMUM_DECREASED",
        "MAX_PROPERTIES_DECREASED",
    }
)
_FEWER = frozenset(
    {"ADDITIONAL_ITEMS_NARROWED", "ENUM_ARRAY_NARROWED", "SUM_TYPE_NARROWED"}
    | {"ADDITIONAL_PROPERTIES_NARROWED"}
)
_MORE_ELEMENTS = frozenset({"PRODUCT_TYPE_EXTENDED", "NOT_TYPE_EXTENDED"})


def _describe(kind: str, path: str) -> str:
    """One finding in the shape of Confluent's messages; the reader is the first schema."""
    path = "#/" if path == "#" else path
    if kind in _KEYWORD_MISSING:
        text = (
            f"The keyword at path '{path}' in the reader schema is not present in the writer schema"
        )
    elif kind in _MORE:
        text = (
            f"The value at path '{path}' in the reader schema is more than its value in the "
            "writer schema"
        )
    elif kind in _LESS:
        text = (
            f"The value at path '{path}' in the reader schema is less than its value in the "
            "writer schema"
        )
    elif kind in {"PATTERN_CHANGED", "MULTIPLE_OF_CHANGED"}:
        text = f"The value at path '{path}' is different between the reader and writer schema"
    elif kind in _FEWER:
        text = (
            f"An array or combined type at path '{path}' has fewer elements in the reader "
            "schema than the writer schema"
        )
    elif kind in _MORE_ELEMENTS:
        text = (
            f"An array or combined type at path '{path}' has more elements in the reader "
            "schema than the writer schema"
        )
    elif kind == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        text = (
            "The reader schema has an unopen content model and has a required property at "
            f"path '{path}' which is missing in the writer schema"
        )
    elif kind.endswith("_ADDED_TO_OPEN_CONTENT_MODEL"):
        text = (
            "The reader schema has an open content model and has a property or item at "
            f"path '{path}' which is missing in the writer schema"
        )
    elif kind.endswith("REMOVED_FROM_CLOSED_CONTENT_MODEL"):
        text = (
            "The reader has a closed content model and is missing a property or item present "
            f"at path '{path}' in the writer schema"
        )
    elif kind.endswith("NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
        text = (
            f"A property or item at path '{path}' is not covered by the other schema's "
            "partially open content model"
        )
    else:
        text = (
            f"A type at path '{path}' is different between the reader schema and the writer schema"
        )
    return f'{{errorType:"{kind}", description:"{text}"}}'


@dataclass(frozen=True, slots=True)
class _Node:
    schema: Any
    resolver: Resolver[Any]

    def child(self, value: Any) -> _Node:
        return _Node(value, resolver_inside(self.resolver, value))

    def deref(self) -> _Node:
        node, seen = self, 0
        while isinstance(node.schema, dict) and isinstance(node.schema.get("$ref"), str):
            resolved = node.resolver.lookup(node.schema["$ref"])
            node = _Node(resolved.contents, resolver_inside(resolved.resolver, resolved.contents))
            seen += 1
            if seen > 100:
                raise InvalidSchemaError("a $ref chain that never reaches a schema")
        return node


_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "id",
        "$comment",
        "$defs",
        "definitions",
        "title",
        "description",
        "default",
        "examples",
        "readOnly",
        "writeOnly",
        "deprecated",
        "$anchor",
    }
)
_COMBINERS = ("allOf", "anyOf", "oneOf")
#: Keywords that are a schema of their own next to a type's constraints.
_SEPARATE = (*_COMBINERS, "enum", "const", "not")
_FAMILIES: dict[str, frozenset[str]] = {
    "object": frozenset(
        {
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "maxProperties",
            "minProperties",
            "dependencies",
            "dependentRequired",
            "dependentSchemas",
            "propertyNames",
            "unevaluatedProperties",
        }
    ),
    "array": frozenset(
        {
            "items",
            "prefixItems",
            "additionalItems",
            "maxItems",
            "minItems",
            "uniqueItems",
            "contains",
            "unevaluatedItems",
        }
    ),
    "string": frozenset({"maxLength", "minLength", "pattern", "format"}),
    "number": frozenset(
        {"maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf"}
    ),
}


def _view(schema: Any) -> tuple[str, Any]:
    """The kind of a schema (as Confluent's schema model sees it) and what it holds.

    A schema with several kinds of constraint (a type and an enum, a type and an
    ``anyOf``) is the product of them, as in Confluent's model.
    """
    if schema is True:
        return "empty", None
    if schema is False:
        return "false", None
    constraints = {key: value for key, value in schema.items() if key not in _ANNOTATIONS}
    parts = [{key: constraints.pop(key)} for key in _SEPARATE if key in constraints]
    if constraints:
        parts.insert(0, constraints)
    if not parts:
        return "empty", None
    if len(parts) > 1:
        return "allOf", parts
    (only,) = parts
    if len(only) == 1:
        key, value = next(iter(only.items()))
        if key in _COMBINERS:
            return key, value
        if key == "enum":
            return "enum", value
        if key == "const":
            return "enum", [value]
        if key == "not":
            return "not", value
    kind = only.get("type")
    if isinstance(kind, list):
        if len(kind) != 1:
            return "anyOf", [{**only, "type": each} for each in kind]
        kind = kind[0]
    if isinstance(kind, str):
        return ("number" if kind == "integer" else kind), only
    inferred = [name for name, keys in _FAMILIES.items() if keys & only.keys()]
    if len(inferred) == 1:
        return inferred[0], only
    return "empty", None


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def _limit(
    diff: _Diff,
    path: str,
    keyword: str,
    original: Any,
    update: Any,
    name: str,
) -> None:
    """A limit added, removed, raised or lowered: ``name`` is Confluent's stem (MAX_LENGTH)."""
    old, new = _number(original.get(keyword)), _number(update.get(keyword))
    if old == new:
        return
    where = f"{path}/{keyword}"
    if old is None:
        diff.add(f"{name}_ADDED", where)
    elif new is None:
        diff.add(f"{name}_REMOVED", where)
    elif old < new:
        diff.add(f"{name}_INCREASED", where)
    else:
        diff.add(f"{name}_DECREASED", where)


def _key(value: Any) -> str:
    return _compact(value)


class _Diff:
    """The changes from a writer's schema (original) to a reader's (update)."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str]] = []
        self.active: set[tuple[int, int]] = set()

    def add(self, kind: str, path: str) -> None:
        self.found.append((kind, path))

    def incompatible(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys(item for item in self.found if item[0] not in _COMPATIBLE))

    def sub(self, original: _Node, update: _Node, path: str) -> _Diff:
        """A trial comparison whose findings are kept only if the caller adopts them."""
        trial = _Diff()
        trial.active = self.active
        trial.compare(original, update, path)
        return trial

    def compatible(self) -> bool:
        return not self.incompatible()

    def adopt(self, trial: _Diff) -> None:
        self.found.extend(trial.found)

    def compare(self, original: _Node, update: _Node, path: str) -> None:
        original, update = original.deref(), update.deref()
        pair = (id(original.schema), id(update.schema))
        if pair in self.active:
            return
        self.active.add(pair)
        try:
            self._compare(original, update, path)
        finally:
            self.active.discard(pair)

    def _compare(self, original: _Node, update: _Node, path: str) -> None:
        old_kind, old = _view(original.schema)
        new_kind, new = _view(update.schema)
        old_combined = old_kind in _COMBINERS
        new_combined = new_kind in _COMBINERS
        if new_combined and not old_combined and (len(new) == 1 or new_kind != "allOf"):
            for branch in new:
                trial = self.sub(original, update.child(branch), path)
                if trial.compatible():
                    self.adopt(trial)
                    if len(new) > 1:
                        self.add("SUM_TYPE_EXTENDED", path)
                    return
        elif old_combined and not new_combined and (len(old) == 1 or old_kind == "allOf"):
            for branch in old:
                trial = self.sub(original.child(branch), update, path)
                if trial.compatible():
                    self.adopt(trial)
                    if len(old) > 1:
                        self.add("PRODUCT_TYPE_NARROWED", path)
                    return
        if old_combined and new_combined:
            self._combined(original, old_kind, old, update, new_kind, new, path)
            return
        if old_kind != new_kind:
            if old_kind == "false" or new_kind == "empty":
                return
            self.add("TYPE_CHANGED", path)
            return
        if old_kind == "enum":
            self._enum(old, new, path)
        elif old_kind == "string":
            _limit(self, path, "maxLength", old, new, "MAX_LENGTH")
            _limit(self, path, "minLength", old, new, "MIN_LENGTH")
            if old.get("pattern") != new.get("pattern"):
                if "pattern" not in old:
                    self.add("PATTERN_ADDED", f"{path}/pattern")
                elif "pattern" not in new:
                    self.add("PATTERN_REMOVED", f"{path}/pattern")
                else:
                    self.add("PATTERN_CHANGED", f"{path}/pattern")
        elif old_kind == "number":
            self._number(old, new, path)
        elif old_kind == "object":
            self._object(original, old, update, new, path)
        elif old_kind == "array":
            self._array(original, old, update, new, path)
        elif old_kind == "not":
            trial = self.sub(update.child(new), original.child(old), f"{path}/not")
            if not trial.found:
                return
            self.add("NOT_TYPE_NARROWED" if trial.compatible() else "NOT_TYPE_EXTENDED", path)

    def _enum(self, old: list[Any], new: list[Any], path: str) -> None:
        before, after = {_key(value) for value in old}, {_key(value) for value in new}
        if before == after:
            return
        where = f"{path}/enum"
        if after >= before:
            self.add("ENUM_ARRAY_EXTENDED", where)
        elif before >= after:
            self.add("ENUM_ARRAY_NARROWED", where)
        else:
            self.add("ENUM_ARRAY_CHANGED", where)

    def _number(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        _limit(self, path, "maximum", old, new, "MAXIMUM")
        _limit(self, path, "minimum", old, new, "MINIMUM")
        _limit(self, path, "exclusiveMaximum", old, new, "EXCLUSIVE_MAXIMUM")
        _limit(self, path, "exclusiveMinimum", old, new, "EXCLUSIVE_MINIMUM")
        before, after = _number(old.get("multipleOf")), _number(new.get("multipleOf"))
        if before != after:
            where = f"{path}/multipleOf"
            if before is None:
                self.add("MULTIPLE_OF_ADDED", where)
            elif after is None:
                self.add("MULTIPLE_OF_REMOVED", where)
            elif before and after % before == 0:
                self.add("MULTIPLE_OF_EXPANDED", where)
            elif after and before % after == 0:
                self.add("MULTIPLE_OF_REDUCED", where)
            else:
                self.add("MULTIPLE_OF_CHANGED", where)
        old_integer, new_integer = old.get("type") == "integer", new.get("type") == "integer"
        if old_integer != new_integer:
            self.add("TYPE_EXTENDED" if old_integer else "TYPE_NARROWED", path)

    def _object(
        self,
        original: _Node,
        old: dict[str, Any],
        update: _Node,
        new: dict[str, Any],
        path: str,
    ) -> None:
        old_props: dict[str, Any] = old.get("properties") or {}
        new_props: dict[str, Any] = new.get("properties") or {}
        old_required = set(old.get("required") or ())
        new_required = set(new.get("required") or ())
        for name in old_props.keys() & new_props.keys():
            if name in old_required and name not in new_required:
                self.add("REQUIRED_ATTRIBUTE_REMOVED", f"{path}/required/{name}")
            elif name in new_required and name not in old_required:
                defaulted = _has_default(update.child(new_props[name]))
                kind = (
                    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                    if defaulted
                    else "REQUIRED_ATTRIBUTE_ADDED"
                )
                self.add(kind, f"{path}/required/{name}")
        for name in list(dict.fromkeys([*old_props, *new_props])):
            where = f"{path}/properties/{name}"
            if name not in new_props:
                self._property_removed(original, old_props[name], update, new, name, where)
            elif name not in old_props:
                self._property_added(original, old, update, new, name, where)
            else:
                self.compare(original.child(old_props[name]), update.child(new_props[name]), where)
        self._additional(original, old, update, new, f"{path}/additionalProperties")
        _limit(self, path, "maxProperties", old, new, "MAX_PROPERTIES")
        _limit(self, path, "minProperties", old, new, "MIN_PROPERTIES")

    def _property_removed(
        self,
        original: _Node,
        schema: Any,
        update: _Node,
        new: dict[str, Any],
        name: str,
        where: str,
    ) -> None:
        if _open(new):
            self.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", where)
            return
        covering = _covering(new, name)
        if covering is not None:
            trial = self.sub(original.child(schema), update.child(covering), where)
            self.adopt(trial)
            kind = "IS" if trial.compatible() else "NOT"
            self.add(f"PROPERTY_REMOVED_{kind}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
        elif schema is False:
            self.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
        else:
            self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)

    def _property_added(
        self,
        original: _Node,
        old: dict[str, Any],
        update: _Node,
        new: dict[str, Any],
        name: str,
        where: str,
    ) -> None:
        schema = update.child(new["properties"][name])
        required = name in set(new.get("required") or ())
        if _open(old):
            if _view(schema.deref().schema)[0] == "empty":
                self.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where)
            elif required:
                defaulted = _has_default(schema)
                self.add(
                    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                    if defaulted
                    else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                    where,
                )
            else:
                self.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)
            return
        covering = _covering(old, name)
        if covering is not None:
            trial = self.sub(original.child(covering), schema, where)
            self.adopt(trial)
            kind = "IS" if trial.compatible() else "NOT"
            self.add(f"PROPERTY_ADDED_{kind}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
        if required:
            self.add(
                "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                if _has_default(schema)
                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
                where,
            )
        else:
            self.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)

    def _additional(
        self,
        original: _Node,
        old: dict[str, Any],
        update: _Node,
        new: dict[str, Any],
        where: str,
    ) -> None:
        before, after = old.get("additionalProperties", True), new.get("additionalProperties", True)
        permits_before, permits_after = before is not False, after is not False
        if permits_before != permits_after:
            self.add(
                "ADDITIONAL_PROPERTIES_ADDED" if permits_after else "ADDITIONAL_PROPERTIES_REMOVED",
                where,
            )
        elif isinstance(before, dict) or isinstance(after, dict):
            if before is True:
                self.add("ADDITIONAL_PROPERTIES_NARROWED", where)
            elif after is True:
                self.add("ADDITIONAL_PROPERTIES_EXTENDED", where)
            else:
                self.compare(original.child(before), update.child(after), where)

    def _array(
        self,
        original: _Node,
        old: dict[str, Any],
        update: _Node,
        new: dict[str, Any],
        path: str,
    ) -> None:
        old_tuple, old_rest, old_all = _tuple_items(old)
        new_tuple, new_rest, new_all = _tuple_items(new)
        if old_all is None and new_all is not None:
            self.add("SCHEMA_ADDED", f"{path}/items")
        elif old_all is not None and new_all is None:
            self.add("SCHEMA_REMOVED", f"{path}/items")
        elif old_all is not None:
            self.compare(original.child(old_all), update.child(new_all), f"{path}/items")
        for index in range(min(len(old_tuple), len(new_tuple))):
            self.compare(
                original.child(old_tuple[index]),
                update.child(new_tuple[index]),
                f"{path}/items/{index}",
            )
        for index in range(len(new_tuple), len(old_tuple)):
            where = f"{path}/items/{index}"
            if new_rest is True:
                self.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", where)
            elif new_rest is False:
                self.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
            else:
                trial = self.sub(original.child(old_tuple[index]), update.child(new_rest), where)
                self.adopt(trial)
                kind = "IS" if trial.compatible() else "NOT"
                self.add(f"ITEM_REMOVED_{kind}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
        for index in range(len(old_tuple), len(new_tuple)):
            where = f"{path}/items/{index}"
            if old_rest is True:
                if _view(update.child(new_tuple[index]).deref().schema)[0] == "empty":
                    self.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where)
                else:
                    self.add("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", where)
            elif old_rest is False:
                self.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", where)
            else:
                trial = self.sub(original.child(old_rest), update.child(new_tuple[index]), where)
                self.adopt(trial)
                kind = "IS" if trial.compatible() else "NOT"
                self.add(f"ITEM_ADDED_{kind}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
        where = f"{path}/additionalItems"
        if (old_rest is not False) != (new_rest is not False):
            self.add(
                "ADDITIONAL_ITEMS_ADDED" if new_rest is not False else "ADDITIONAL_ITEMS_REMOVED",
                where,
            )
        elif old_rest is True and new_rest is not True:
            self.add("ADDITIONAL_ITEMS_NARROWED", where)
        elif new_rest is True and old_rest is not True:
            self.add("ADDITIONAL_ITEMS_EXTENDED", where)
        elif isinstance(old_rest, dict) and isinstance(new_rest, dict):
            self.compare(original.child(old_rest), update.child(new_rest), where)
        _limit(self, path, "maxItems", old, new, "MAX_ITEMS")
        _limit(self, path, "minItems", old, new, "MIN_ITEMS")
        old_unique, new_unique = bool(old.get("uniqueItems")), bool(new.get("uniqueItems"))
        if old_unique != new_unique:
            self.add(
                "UNIQUE_ITEMS_REMOVED" if old_unique else "UNIQUE_ITEMS_ADDED",
                f"{path}/uniqueItems",
            )

    def _combined(
        self,
        original: _Node,
        old_kind: str,
        old: list[Any],
        update: _Node,
        new_kind: str,
        new: list[Any],
        path: str,
    ) -> None:
        if old_kind != new_kind:
            extended = (
                new_kind == "anyOf"
                or (len(old) == 1 and len(new) == 1)
                or (len(old) == 1 and new_kind == "oneOf")
                or (len(new) == 1 and old_kind == "allOf")
            )
            if not extended:
                self.add("COMBINED_TYPE_CHANGED", path)
                return
            self.add("COMBINED_TYPE_EXTENDED", path)
        if len(old) < len(new):
            self.add("PRODUCT_TYPE_EXTENDED" if new_kind == "allOf" else "SUM_TYPE_EXTENDED", path)
        elif len(old) > len(new):
            self.add("SUM_TYPE_NARROWED" if old_kind != "allOf" else "PRODUCT_TYPE_NARROWED", path)
        edges: dict[int, dict[int, _Diff]] = {}
        for i, before in enumerate(old):
            for j, after in enumerate(new):
                trial = self.sub(
                    original.child(before), update.child(after), f"{path}/{old_kind}/{i}"
                )
                if trial.compatible():
                    edges.setdefault(i, {})[j] = trial
        matched = _match({i: list(targets) for i, targets in edges.items()})
        for j, i in matched.items():
            self.adopt(edges[i][j])
        if len(matched) < min(len(old), len(new)):
            self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", path)


def _has_default(node: _Node) -> bool:
    schema = node.deref().schema
    return isinstance(schema, dict) and "default" in schema


def _open(schema: dict[str, Any]) -> bool:
    """An open content model: any property not named may hold anything."""
    additional = schema.get("additionalProperties", True)
    if additional is not True and additional != {}:
        return False
    if schema.get("patternProperties"):
        return False
    return schema.get("unevaluatedProperties", True) in (True, {})


def _covering(schema: dict[str, Any], name: str) -> Any | None:
    """The schema a partially open content model gives an unnamed property ``name``."""
    for pattern, value in (schema.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return value
        except re.error:
            continue
    additional = schema.get("additionalProperties", True)
    if isinstance(additional, dict) and additional:
        return additional
    return None


def _tuple_items(schema: dict[str, Any]) -> tuple[list[Any], Any, Any]:
    """Positional item schemas, the schema of items after them (True, False or a schema),
    and the one schema of every item (``items`` as a schema, or None)."""
    if isinstance(schema.get("prefixItems"), list):
        positional, rest, every = schema["prefixItems"], schema.get("items", True), None
    elif isinstance(schema.get("items"), list):
        positional, rest, every = schema["items"], schema.get("additionalItems", True), None
    else:
        positional, rest, every = [], schema.get("additionalItems", True), schema.get("items")
    return positional, True if rest == {} else rest, every


def _match(edges: dict[int, list[int]]) -> dict[int, int]:
    """A maximum matching of original branches to update branches (right -> left)."""
    owner: dict[int, int] = {}

    def claim(left: int, seen: set[int]) -> bool:
        for right in edges.get(left, ()):
            if right in seen:
                continue
            seen.add(right)
            if right not in owner or claim(owner[right], seen):
                owner[right] = left
                return True
        return False

    for left in edges:
        claim(left, set())
    return owner


FORMAT = JsonSchemaFormat()
