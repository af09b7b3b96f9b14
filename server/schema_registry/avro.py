"""Avro: fastavro parses, decodes and encodes; Apache avro checks compatibility.

A schema is accepted only if both fastavro and Apache avro accept it and its
names are valid Avro names, because Confluent's parser (Java Avro with strict
names and default validation) is stricter than either library alone: fastavro
lets bad names and duplicate fields through, Apache avro lets bad defaults through.

``canonical`` is the schema written the way Java Avro's ``Schema.toString`` writes
it (Confluent's ``canonicalString``): compact JSON, keys in Avro's order,
namespaces only where they differ from the enclosing one, referenced types by
name. Two texts differing only in spacing, key order or how a name is qualified
are then one schema with one id, as on Confluent.

Apache avro's ``ReaderWriterCompatibilityChecker`` merges the messages and
locations of all its findings into two unordered sets, so which message belongs
to which path is lost once there are two; each finding is recorded as the
checker makes it (the library's own ``incompatible`` function, wrapped) and only
those the final result kept are reported.
"""

from __future__ import annotations

import io
import json
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import avro.compatibility as avro_compatibility
import avro.name
import avro.schema
import fastavro
import fastavro.validation

from lakelog.errors import InvalidSchemaError
from server.schema_registry.avro_batch import Unsupported, avro_batch_decoder, full_name
from server.schema_registry.formats import BatchCheck, Decoder, Encoder
from server.schema_registry.types import ParsedSchema, SchemaType

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: Keys Java Avro reads as part of a schema, never kept as custom properties.
_SCHEMA_RESERVED = frozenset(
    {"doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases"}
)
_FIELD_RESERVED = frozenset({"default", "doc", "name", "order", "type", "aliases"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class AvroNative:
    """What the format keeps of a parsed schema.

    ``sources`` are the JSON definitions the schema needs, its references' (in
    dependency order) then its own, so either library can rebuild it.
    """

    __slots__ = ("_apache", "parsed", "sources")

    def __init__(self, parsed: Any, sources: tuple[Any, ...]) -> None:
        self.parsed = parsed
        self.sources = sources
        self._apache: avro.schema.Schema | None = None

    def apache(self) -> avro.schema.Schema:
        """The schema as Apache avro's object, built on first use (compatibility only)."""
        if self._apache is None:
            names = avro.name.Names()
            built: avro.schema.Schema | None = None
            for source in self.sources:
                built = _apache_schema(source, names)
            assert built is not None
            self._apache = built
        return self._apache


def _apache_schema(value: Any, names: avro.name.Names) -> avro.schema.Schema:
    """Apache avro's schema of ``value``; it reads a bare type name only inside a schema,
    so a schema that is just a referenced type's name is looked up here."""
    if isinstance(value, str) and value not in PRIMITIVES:
        found = names.get_name(value, None)
        if found is None:
            raise InvalidSchemaError(f"unknown type {value!r}: not defined before use")
        return found
    return avro.schema.make_avsc_object(value, names)


def _fastavro_schema(value: Any, named: dict[str, Any]) -> Any:
    """fastavro's parsed schema of ``value``; a bare referenced name is parsed as the type
    it names, since fastavro reads and writes only with a definition at the top."""
    parsed = fastavro.parse_schema(value, named_schemas=named)
    if isinstance(parsed, str) and parsed in named:
        others = {name: schema for name, schema in named.items() if name != parsed}
        return fastavro.parse_schema(named[parsed], named_schemas=others)
    return parsed


# --- canonical text -------------------------------------------------------------


def _split(name: str, namespace: str | None) -> tuple[str | None, str]:
    """Java Avro's ``Name``: a dotted name carries its own namespace."""
    if "." in name:
        space, _, short = name.rpartition(".")
        return space or None, short
    return namespace or None, name


def _full(space: str | None, short: str) -> str:
    return f"{space}.{short}" if space else short


def _relative(full: str, space: str | None) -> str:
    """A name as written where ``space`` is the enclosing namespace."""
    own, short = _split(full, None)
    return short if own is None or own == space else full


def _check_name(name: str, what: str) -> None:
    parts = name.split(".")
    if not all(_NAME.fullmatch(part) for part in parts):
        raise InvalidSchemaError(
            f"{what} {name!r} is not a valid Avro name ([A-Za-z_][A-Za-z0-9_]*, dot-separated)"
        )


class _Canonical:
    """Rewrites a schema's JSON into Java Avro's ``toString`` shape.

    ``normalize`` also sorts custom properties and aliases, as Confluent's
    ``normalize`` does, so schemas differing only in their order are one schema.
    """

    def __init__(self, known: set[str], *, normalize: bool) -> None:
        self.known = known
        self.normalize = normalize

    def props(self, node: Mapping[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
        found = {key: value for key, value in node.items() if key not in reserved}
        if not self.normalize:
            return found
        first = [key for key in ("logicalType", "precision", "scale") if key in found]
        if found.get("logicalType") == "decimal" and found.get("scale") == 0:
            first.remove("scale")
            del found["scale"]
        rest = sorted(key for key in found if key not in first)
        return {key: found[key] for key in [*first, *rest]}

    def aliases(self, values: Any, space: str | None) -> list[str]:
        if not isinstance(values, list):
            raise InvalidSchemaError(f"aliases must be a list of names, not {values!r}")
        unique = list(dict.fromkeys(values))
        written = [_relative(_full(*_split(alias, space)), space) for alias in unique]
        return sorted(written) if self.normalize else written

    def reference(self, name: str, space: str | None) -> str:
        own, short = _split(name, space)
        full = _full(own, short)
        if full not in self.known and "." not in name and short in self.known:
            full = short
        if full not in self.known:
            raise InvalidSchemaError(f"unknown type {name!r}: not defined before use")
        return _relative(full, space)

    def schema(self, node: Any, space: str | None) -> Any:
        if isinstance(node, str):
            return node if node in PRIMITIVES else self.reference(node, space)
        if isinstance(node, list):
            return [self.schema(branch, space) for branch in node]
        if not isinstance(node, dict) or "type" not in node:
            raise InvalidSchemaError(f"not an Avro schema: {json.dumps(node)[:200]}")
        kind = node["type"]
        if not isinstance(kind, str):
            return self.schema(kind, space)
        if kind in PRIMITIVES:
            props = self.props(node, _SCHEMA_RESERVED)
            return {"type": kind, **props} if props else kind
        if kind in ("array", "map"):
            inner = "items" if kind == "array" else "values"
            if inner not in node:
                raise InvalidSchemaError(f"{kind} schema without {inner!r}")
            return {
                "type": kind,
                inner: self.schema(node[inner], space),
                **self.props(node, _SCHEMA_RESERVED),
            }
        if kind in ("record", "error", "enum", "fixed"):
            return self.named(node, kind, space)
        if len(node) == 1:
            return self.reference(kind, space)
        raise InvalidSchemaError(f"unknown type {kind!r}")

    def named(self, node: dict[str, Any], kind: str, space: str | None) -> dict[str, Any]:
        name = node.get("name")
        if not isinstance(name, str):
            raise InvalidSchemaError(f"{kind} schema without a name")
        namespace = node.get("namespace", space)
        own, short = _split(name, namespace if isinstance(namespace, str) else space)
        full = _full(own, short)
        _check_name(full, f"{kind} name")
        if full in self.known:
            raise InvalidSchemaError(f"type {full!r} is defined twice")
        self.known.add(full)
        out: dict[str, Any] = {"type": kind, "name": short}
        if own is not None:
            if own != space:
                out["namespace"] = own
        elif space is not None:
            out["namespace"] = ""
        if isinstance(node.get("doc"), str) and not (self.normalize and node["doc"] == ""):
            out["doc"] = node["doc"]
        if kind == "enum":
            symbols = node.get("symbols")
            if not isinstance(symbols, list):
                raise InvalidSchemaError(f"enum {full!r} without a list of symbols")
            for symbol in symbols:
                _check_name(str(symbol), f"enum {full!r} symbol")
            out["symbols"] = symbols
            if "default" in node:
                out["default"] = node["default"]
            reserved = _SCHEMA_RESERVED | {"default"}
        elif kind == "fixed":
            out["size"] = node.get("size")
            reserved = _SCHEMA_RESERVED
        else:
            fields = node.get("fields")
            if not isinstance(fields, list):
                raise InvalidSchemaError(f"record {full!r} without a list of fields")
            out["fields"] = [self.field(field, own, full) for field in fields]
            reserved = _SCHEMA_RESERVED
        out.update(self.props(node, reserved))
        if node.get("aliases"):
            out["aliases"] = self.aliases(node["aliases"], own)
        return out

    def field(self, node: Any, space: str | None, record: str) -> dict[str, Any]:
        if not isinstance(node, dict) or not isinstance(node.get("name"), str):
            raise InvalidSchemaError(f"a field of record {record!r} has no name")
        name = node["name"]
        _check_name(name, f"field of record {record!r}")
        if "." in name:
            raise InvalidSchemaError(f"field name {name!r} of record {record!r} has a dot")
        if "type" not in node:
            raise InvalidSchemaError(f"field {name!r} of record {record!r} has no type")
        out: dict[str, Any] = {"name": name, "type": self.schema(node["type"], space)}
        if isinstance(node.get("doc"), str) and not (self.normalize and node["doc"] == ""):
            out["doc"] = node["doc"]
        if "default" in node:
            out["default"] = node["default"]
        order = node.get("order", "ascending")
        if order not in ("ascending", "descending", "ignore"):
            raise InvalidSchemaError(f"field {name!r} of {record!r}: unknown order {order!r}")
        if order != "ascending":
            out["order"] = order
        if node.get("aliases"):
            aliases = list(dict.fromkeys(node["aliases"]))
            out["aliases"] = sorted(aliases) if self.normalize else aliases
        out.update(self.props(node, _FIELD_RESERVED))
        return out


def canonical_text(value: Any, known: set[str], *, normalize: bool = False) -> str:
    """``value`` (a schema's JSON) as Java Avro writes it; ``known`` holds referenced names."""
    rewritten = _Canonical(set(known), normalize=normalize).schema(value, None)
    return json.dumps(rewritten, separators=(",", ":"), ensure_ascii=False)


def _defined_names(sources: tuple[Any, ...]) -> set[str]:
    """Full names the references' definitions introduce, each may use the earlier ones."""
    known: set[str] = set()
    for source in sources:
        _Canonical(known, normalize=False).schema(source, None)
    return known


def unbounded_array(sources: tuple[Any, ...]) -> str | None:
    """An array whose items take no bytes (null, an empty fixed, a record of only such
    fields) in the schemas ``sources`` (references first), described; None if there is none.

    Such an array's item count is a varint and nothing else, so six bytes decode to a
    hundred million items: no payload of it is bounded by its size, and decoding one
    could hold a broker for as long as its count says.
    """
    zero_size: dict[str, bool] = {}
    found: list[str] = []

    def takes_no_bytes(schema: Any, space: str | None) -> bool:
        if isinstance(schema, list):
            for branch in schema:
                takes_no_bytes(branch, space)
            return False  # a union writes its branch's index
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return schema == "null"
            dotted = schema if "." in schema or not space else f"{space}.{schema}"
            return zero_size.get(dotted, zero_size.get(schema, False))
        if not isinstance(schema, dict):
            return False
        kind = schema.get("type")
        if kind in ("record", "error") and isinstance(schema.get("fields"), list):
            full = full_name(schema, space)
            zero_size[full] = False  # a recursive use inside it takes bytes to end
            inner = full.rpartition(".")[0] or None
            sizes = [takes_no_bytes(f.get("type"), inner) for f in schema["fields"]]
            zero_size[full] = all(sizes)
            return zero_size[full]
        if kind in ("fixed", "enum") and "name" in schema:
            zero_size[full_name(schema, space)] = kind == "fixed" and schema.get("size") == 0
            return zero_size[full_name(schema, space)]
        if kind == "array":
            if takes_no_bytes(schema.get("items"), space):
                found.append(f"an array of {json.dumps(schema.get('items'))}")
            return False
        if kind == "map":
            takes_no_bytes(schema.get("values"), space)
            return False
        return takes_no_bytes(kind, space)  # {"type": "string"} and the like

    for source in sources:
        takes_no_bytes(source, None)
    if not found:
        return None
    return f"{found[0]}, whose items take no bytes, has no size bound on decoding"


# --- compatibility --------------------------------------------------------------

_recording = threading.local()
_library_incompatible = avro_compatibility.incompatible


def _recorded_incompatible(
    incompat_type: avro_compatibility.SchemaIncompatibilityType, message: str, location: list[str]
) -> avro_compatibility.SchemaCompatibilityResult:
    result = _library_incompatible(incompat_type, message, location)
    findings: list[tuple[str, str, str]] | None = getattr(_recording, "findings", None)
    if findings is not None:
        (path,) = result.locations
        findings.append((incompat_type.name.upper(), message, path))
    return result


avro_compatibility.incompatible = _recorded_incompatible


@contextmanager
def _record() -> Iterator[list[tuple[str, str, str]]]:
    findings: list[tuple[str, str, str]] = []
    _recording.findings = findings
    try:
        yield findings
    finally:
        _recording.findings = None


_DESCRIPTIONS: dict[str, str] = {
    "FIXED_SIZE_MISMATCH": (
        "The size of FIXED type field at path '{path}' in the reader schema does not match "
        "with the writer schema"
    ),
    "TYPE_MISMATCH": (
        "The type (path '{path}') of a field in the reader schema does not match with the "
        "writer schema"
    ),
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": (
        "The reader schema is missing enum symbols '{info}' at path '{path}' in the writer schema"
    ),
    "MISSING_UNION_BRANCH": (
        "The reader schema is missing a type inside a union field at path '{path}' in the "
        "writer schema"
    ),
    "READER_FIELD_MISSING_DEFAULT_VALUE": (
        "The field '{info}' at path '{path}' in the reader schema has no default value and is "
        "missing in the writer schema"
    ),
}


def _describe(kind: str, info: str, path: str) -> str:
    """One finding in the shape of Confluent's compatibility messages."""
    description = _DESCRIPTIONS.get(kind, "").format(path=path, info=info)
    return f"{{errorType:'{kind}', description:'{description}', additionalInfo:'{info}'}}"


# --- the format -----------------------------------------------------------------


def native(schema: ParsedSchema) -> AvroNative:
    """What the format keeps of a parsed Avro schema (its fastavro form and JSON sources)."""
    found = schema.native
    if not isinstance(found, AvroNative):
        raise TypeError(f"not an Avro schema: {schema.schema_type}")
    return found


class AvroFormat:
    schema_type: ClassVar[SchemaType] = SchemaType.AVRO

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
        sources: dict[str, Any] = {}
        for name, reference in references.items():
            if reference.schema_type is not SchemaType.AVRO:
                raise InvalidSchemaError(
                    f"reference {name!r} is a {reference.schema_type} schema, not AVRO"
                )
            for source in native(reference).sources:
                sources.setdefault(json.dumps(source, sort_keys=True), source)
        ordered = tuple(sources.values())
        try:
            known = _defined_names(ordered)
            canonical = canonical_text(value, known, normalize=normalize)
        except RecursionError:
            raise InvalidSchemaError("the schema is nested too deeply") from None
        named: dict[str, Any] = {}
        try:
            for source in ordered:
                fastavro.parse_schema(source, named_schemas=named)
            parsed = _fastavro_schema(value, named)
            names = avro.name.Names()
            for source in ordered:
                _apache_schema(source, names)
            _apache_schema(value, names)
        except InvalidSchemaError:
            raise
        except Exception as error:  # both libraries raise several unrelated types
            raise InvalidSchemaError(f"invalid Avro schema: {error}") from None
        unbounded = unbounded_array((*ordered, value))
        if unbounded is not None:
            raise InvalidSchemaError(f"invalid Avro schema: {unbounded}")
        return ParsedSchema(
            schema_type=SchemaType.AVRO,
            text=text,
            canonical=canonical,
            native=AvroNative(parsed, (*ordered, value)),
        )

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        if reader.schema_type is not writer.schema_type:
            return [f"a {reader.schema_type} schema cannot read {writer.schema_type} data"]
        reader_schema, writer_schema = native(reader).apache(), native(writer).apache()
        checker = avro_compatibility.ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
        with _record() as findings:
            result = checker.get_compatibility(reader_schema, writer_schema)
        if result.compatibility is not avro_compatibility.SchemaCompatibilityType.incompatible:
            return []
        kept = {kind.name.upper() for kind in result.incompatibilities}
        reported = [
            _describe(kind, message, path)
            for kind, message, path in dict.fromkeys(findings)
            if kind in kept and message in result.messages and path in result.locations
        ]
        return reported or [f"incompatible: {sorted(result.messages)}"]

    def decoder(self, schema: ParsedSchema) -> Decoder:
        kept = native(schema)
        unbounded = unbounded_array(kept.sources)  # as parse, for schemas already in a root
        if unbounded is not None:
            raise ValueError(unbounded)
        parsed = kept.parsed
        reader = fastavro.schemaless_reader

        def decode(payload: memoryview) -> object:
            size = len(payload)
            stream = io.BytesIO(payload)
            try:
                value = reader(stream, parsed, None)
            except EOFError:
                raise ValueError(f"truncated: the datum runs past the {size} bytes") from None
            except Exception as error:  # a corrupt length or index raises many types
                raise ValueError(f"does not decode with the schema: {error}") from None
            left = size - stream.tell()
            if left:
                raise ValueError(
                    f"{left} of {size} bytes left after one datum: written with another schema"
                )
            return value

        return decode

    def encoder(self, schema: ParsedSchema) -> Encoder:
        parsed = native(schema).parsed
        writer = fastavro.schemaless_writer

        def encode(value: object) -> bytes:
            datum = _from_json(parsed, value)
            stream = io.BytesIO()
            try:
                writer(stream, parsed, datum, strict=True)
            except Exception as error:
                raise ValueError(f"does not fit the schema: {error}") from None
            return stream.getvalue()

        return encode

    def batch_check(self, schema: ParsedSchema) -> BatchCheck | None:
        """The column decoder's flags (``avro_batch``), where it takes the schema."""
        try:
            return avro_batch_decoder(*native(schema).sources).flags
        except Unsupported:
            return None


def _from_json(parsed: Any, value: object) -> object:
    """Avro's JSON encoding (unions as ``{"type": value}``, bytes as strings) to a datum."""
    text = json.dumps(value)
    try:
        (datum,) = fastavro.json_reader(io.StringIO(text), parsed)
        fastavro.validation.validate(datum, parsed, raise_errors=True)
    except fastavro.validation.ValidationError as error:
        reasons = "; ".join(str(item) for item in error.errors)
        raise ValueError(f"does not fit the schema: {reasons}") from None
    except Exception as error:  # the JSON decoder raises whatever its walk hits
        raise ValueError(
            f"not the schema's JSON encoding ({type(error).__name__}: {error})"
        ) from None
    return datum


FORMAT = AvroFormat()
