"""The REST Proxy's schema'd embedded formats: which registered schema a key or value is
written with, JSON data to Confluent-framed bytes, and framed bytes back to JSON.

Confluent's REST Proxy resolves a schema from what the request names, in this
order: a schema id; a subject version; an inline schema (looked up under its
subject, registered there when absent); else the subject's latest version. The
subject is the request's own, or comes from a subject name strategy
(``TOPIC_NAME`` by default: ``<topic>-key`` / ``<topic>-value``). Every way it
can fail is a ``SchemaRefused`` carrying the v2 status and code and the v3
report code the REST Proxy answers with, so the v2 and v3 routes only choose
which to show. v2 answers with the codes of the REST Proxy's v2 reference
(42201/42202 schema missing, 42203 data that does not convert, 42205 an
invalid schema, 408/40801 a failed registry look-up or registration); v3
reports carry those of its v3 produce (400, and 42207 for a failed look-up).

Everything here is synchronous: the registry's look-ups may read storage, so
the routes call in from a worker thread.
"""

from __future__ import annotations

import io
import json
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from starlette.requests import Request

from lakelog.errors import (
    InvalidSchemaError,
    LakelogError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectNotFoundError,
    VersionNotFoundError,
)
from lakelog.security.acl import Operation, ResourceType
from server.schema_registry.formats import Decoder, Encoder, format_of
from server.schema_registry.framing import frame, unframe
from server.schema_registry.subjects import record_name
from server.schema_registry.types import ParsedSchema, SchemaReference, SchemaType
from server.security.enforce import authorize

Strategy = Literal["TOPIC_NAME", "RECORD_NAME", "TOPIC_RECORD_NAME"]
STRATEGIES: tuple[Strategy, ...] = ("TOPIC_NAME", "RECORD_NAME", "TOPIC_RECORD_NAME")
#: v3 ``type`` names of the schema'd formats, and v2 embedded format names, to schema types.
V3_TYPES: dict[str, SchemaType] = {
    "AVRO": SchemaType.AVRO,
    "JSONSCHEMA": SchemaType.JSON,
    "PROTOBUF": SchemaType.PROTOBUF,
}
V2_FORMATS: dict[str, SchemaType] = {
    "avro": SchemaType.AVRO,
    "jsonschema": SchemaType.JSON,
    "protobuf": SchemaType.PROTOBUF,
}
V3_NAMES = {schema_type: name for name, schema_type in V3_TYPES.items()}

# The REST Proxy's error codes (v2 ``error_code``; v3 report ``error_code``).
KEY_SCHEMA_MISSING = 42201
VALUE_SCHEMA_MISSING = 42202
JSON_CONVERSION = 42203
INVALID_SCHEMA = 42205
SERIALIZATION = 42207
SCHEMA_LOOKUP_FAILED = 40801
BAD_REQUEST = 400


#: What a format's codec raises for data that does not fit its schema: ``ValueError`` as
#: the format protocol says, and what the libraries beneath let through on odd input.
_UNFIT = (ValueError, TypeError, OverflowError, KeyError, AttributeError, RecursionError, EOFError)


class SchemaRefused(Exception):
    """A key or value that cannot be written with a schema, as the REST Proxy answers it.

    ``v2_status``/``v2_code`` refuse a whole v2 request; ``v3_code`` is the
    ``error_code`` of the record's v3 delivery report.
    """

    def __init__(self, message: str, *, v2_status: int, v2_code: int, v3_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.v2_status = v2_status
        self.v2_code = v2_code
        self.v3_code = v3_code


def bad_argument(message: str) -> SchemaRefused:
    """A combination of schema fields the REST Proxy does not take."""
    return SchemaRefused(message, v2_status=422, v2_code=422, v3_code=BAD_REQUEST)


def invalid_schema(message: str) -> SchemaRefused:
    return SchemaRefused(
        f"Invalid schema: {message}", v2_status=422, v2_code=INVALID_SCHEMA, v3_code=BAD_REQUEST
    )


def lookup_failed(message: str, exc: SchemaRegistryError, *, v3_code: int) -> SchemaRefused:
    """The registry refused a look-up or registration; its own code is in the message."""
    return SchemaRefused(
        f"{message}: {exc.message} (registry error_code {exc.registry_code})",
        v2_status=408,
        v2_code=SCHEMA_LOOKUP_FAILED,
        v3_code=v3_code,
    )


def data_refused(message: str) -> SchemaRefused:
    return SchemaRefused(
        f"Conversion of JSON to Object failed: {message}",
        v2_status=422,
        v2_code=JSON_CONVERSION,
        v3_code=BAD_REQUEST,
    )


def schema_missing(is_key: bool) -> SchemaRefused:
    part = "key" if is_key else "value"
    code = KEY_SCHEMA_MISSING if is_key else VALUE_SCHEMA_MISSING
    return SchemaRefused(
        f"Request includes {part}s but does not include {part} schema: send "
        f"{part}_schema or {part}_schema_id",
        v2_status=422,
        v2_code=code,
        v3_code=BAD_REQUEST,
    )


class RegisteredLike(Protocol):
    subject: str
    version: int
    schema_id: int
    schema: ParsedSchema


class RegistryLike(Protocol):
    """What the embedded formats ask of the broker's Schema Registry."""

    def register(
        self,
        subject: str,
        schema_type: SchemaType,
        text: str,
        references: Any,
        *,
        normalize: bool = False,
    ) -> int: ...

    def lookup(
        self,
        subject: str,
        schema_type: SchemaType,
        text: str,
        references: Any,
        *,
        normalize: bool = False,
        deleted: bool = False,
    ) -> Any: ...

    def schema_by_id(self, schema_id: int) -> ParsedSchema: ...

    def subject_version(self, subject: str, version: Any, *, deleted: bool = False) -> Any: ...


#: Raises ``SchemaRefused`` unless the caller may read (``write`` False) or write the
#: subject: a schema'd produce reads and registers as its caller, under the caller's
#: SUBJECT ACLs, as the registry's own routes do.
SubjectCheck = Callable[[str, bool], None]


def allow_all(subject: str, write: bool) -> None:
    """The check when authentication is off (and for callers that checked already)."""


def subject_denied(message: str) -> SchemaRefused:
    return SchemaRefused(message, v2_status=403, v2_code=40301, v3_code=403)


def subject_check(request: Request) -> SubjectCheck:
    """The caller's SUBJECT ACLs: READ to look a subject up, WRITE to register in it."""

    def check(subject: str, write: bool) -> None:
        operation = Operation.WRITE if write else Operation.READ
        try:
            authorize(request, ResourceType.SUBJECT, subject, operation)
        except LakelogError as exc:
            raise subject_denied(exc.message) from None

    return check


@dataclass(frozen=True)
class Resolved:
    """The schema a key or value is written with: what its report says, and its codec."""

    schema_id: int
    schema: ParsedSchema
    subject: str | None = None
    version: int | None = None


# -- subjects ------------------------------------------------------------------------


def topic_subject(topic: str, is_key: bool) -> str:
    return f"{topic}-{'key' if is_key else 'value'}"


def strategy_subject(
    strategy: Strategy, topic: str, is_key: bool, schema: ParsedSchema | None
) -> str:
    """The subject a strategy gives; strategies that name records need the schema."""
    if strategy == "TOPIC_NAME":
        return topic_subject(topic, is_key)
    if schema is None:
        raise bad_argument(
            f"Cannot use subject_name_strategy={strategy} without schema_id or schema: "
            "the subject is named after the schema's record"
        )
    name = record_name(schema)
    if name is None:
        raise bad_argument(
            f"the {schema.schema_type} schema has no record name to name a subject after"
        )
    return name if strategy == "RECORD_NAME" else f"{topic}-{name}"


def parse_strategy(text: str | None) -> Strategy | None:
    if text is None:
        return None
    upper = text.upper()
    for strategy in STRATEGIES:
        if strategy == upper:
            return strategy
    raise bad_argument(
        f"subject_name_strategy {text!r} is unknown: use TOPIC_NAME, RECORD_NAME or "
        "TOPIC_RECORD_NAME"
    )


# -- resolving -----------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaRequest:
    """What a request says of one key's or value's schema (every field optional)."""

    schema_type: SchemaType | None = None
    subject: str | None = None
    strategy: Strategy | None = None
    schema_id: int | None = None
    version: int | None = None
    text: str | None = None


class Schemas:
    """The embedded formats over one broker's registry, with each schema's codecs cached.

    Ids are unique within a storage root and never reused, so a schema id names one
    schema for as long as the registry lives: codecs are kept per id.
    """

    def __init__(self, registry: RegistryLike) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._encoders: dict[int, Encoder] = {}
        self._decoders: dict[int, Decoder] = {}

    # -- which schema --------------------------------------------------------------

    def resolve(
        self, topic: str, is_key: bool, asked: SchemaRequest, may: SubjectCheck = allow_all
    ) -> Resolved:
        """The schema a v3 key or value names, as Confluent's REST Proxy finds it."""
        if asked.subject is not None and asked.strategy is not None:
            raise bad_argument("give subject or subject_name_strategy, not both")
        if asked.schema_id is not None:
            if asked.version is not None or asked.text is not None:
                raise bad_argument("schema_id cannot be combined with schema_version or schema")
            return self._by_id(topic, is_key, asked, may)
        if asked.version is not None:
            if asked.text is not None:
                raise bad_argument("schema_version cannot be combined with schema")
            return self._by_version(topic, is_key, asked, asked.version, may)
        if asked.text is not None:
            if asked.schema_type is None:
                raise bad_argument("an inline schema needs its type: AVRO, JSONSCHEMA or PROTOBUF")
            return self.inline(topic, is_key, asked.schema_type, asked.text, asked, may)
        return self._by_version(topic, is_key, asked, "latest", may)

    def by_id(self, schema_id: int, *, v3_code: int = SERIALIZATION) -> ParsedSchema:
        try:
            return self.registry.schema_by_id(schema_id)
        except SchemaRegistryError as exc:
            raise lookup_failed(
                f"Error when fetching schema by id. schemaId = {schema_id}", exc, v3_code=v3_code
            ) from None

    def _by_id(self, topic: str, is_key: bool, asked: SchemaRequest, may: SubjectCheck) -> Resolved:
        assert asked.schema_id is not None
        schema = self.by_id(asked.schema_id)
        self._check_type(asked, schema)
        subject = asked.subject or strategy_subject(
            asked.strategy or "TOPIC_NAME", topic, is_key, schema
        )
        may(subject, False)
        try:
            found = self.registry.lookup(
                subject, schema.schema_type, schema.text, schema.references
            )
        except SchemaRegistryError as exc:
            raise lookup_failed(
                f"Error when fetching schema version. subject = {subject}, schema id = "
                f"{asked.schema_id}",
                exc,
                v3_code=SERIALIZATION,
            ) from None
        return Resolved(asked.schema_id, schema, subject, found.version)

    def _by_version(
        self,
        topic: str,
        is_key: bool,
        asked: SchemaRequest,
        version: int | Literal["latest"],
        may: SubjectCheck,
    ) -> Resolved:
        subject = asked.subject or strategy_subject(
            asked.strategy or "TOPIC_NAME", topic, is_key, None
        )
        may(subject, False)
        try:
            found: RegisteredLike = self.registry.subject_version(subject, version)
        except SchemaRegistryError as exc:
            if version == "latest":
                raise lookup_failed(
                    f"Error when fetching latest schema version. subject = {subject}",
                    exc,
                    v3_code=SERIALIZATION,
                ) from None
            raise lookup_failed(
                f"Schema does not exist for subject: {subject}, version: {version}",
                exc,
                v3_code=BAD_REQUEST,
            ) from None
        self._check_type(asked, found.schema)
        return Resolved(found.schema_id, found.schema, found.subject, found.version)

    def inline(
        self,
        topic: str,
        is_key: bool,
        schema_type: SchemaType,
        text: str,
        asked: SchemaRequest | None = None,
        may: SubjectCheck = allow_all,
    ) -> Resolved:
        """An inline schema: parsed, looked up under its subject, registered there if absent;
        WRITE on the subject does both (as registering through the registry's routes does),
        READ only finds a schema registered already."""
        try:
            parsed = format_of(schema_type).parse(text, {})
        except InvalidSchemaError as exc:
            raise invalid_schema(exc.message) from None
        except SchemaRegistryError as exc:  # e.g. a schema above the registry's size limit
            raise lookup_failed("Error when parsing schema", exc, v3_code=BAD_REQUEST) from None
        subject = (asked.subject if asked else None) or strategy_subject(
            (asked.strategy if asked else None) or "TOPIC_NAME", topic, is_key, parsed
        )
        references: tuple[SchemaReference, ...] = ()
        denied: SchemaRefused | None = None
        try:
            may(subject, True)
        except SchemaRefused as refused:  # READ alone finds a schema already registered
            denied = refused
            may(subject, False)
        try:
            try:
                found = self.registry.lookup(subject, schema_type, text, references)
            except (SubjectNotFoundError, SchemaNotFoundError, VersionNotFoundError):
                if denied is not None:
                    raise denied from None
                self.registry.register(subject, schema_type, text, references)
                found = self.registry.lookup(subject, schema_type, text, references)
        except InvalidSchemaError as exc:
            raise invalid_schema(exc.message) from None
        except SchemaRegistryError as exc:
            raise lookup_failed(
                f"Error when registering schema. format = {V3_NAMES[schema_type]}, "
                f"subject = {subject}",
                exc,
                v3_code=SERIALIZATION,
            ) from None
        return Resolved(found.schema_id, found.schema, found.subject, found.version)

    @staticmethod
    def _check_type(asked: SchemaRequest, schema: ParsedSchema) -> None:
        if asked.schema_type is not None and asked.schema_type is not schema.schema_type:
            raise bad_argument(
                f"type {V3_NAMES[asked.schema_type]} does not match the schema, which is "
                f"{V3_NAMES[schema.schema_type]}"
            )

    # -- codecs --------------------------------------------------------------------

    def encode(self, resolved: Resolved, data: object, where: str) -> bytes:
        """``data`` (JSON-shaped) written with the schema and framed with its id."""
        encoder = self._encoders.get(resolved.schema_id)
        if encoder is None:
            encoder = format_of(resolved.schema.schema_type).encoder(resolved.schema)
            with self._lock:
                self._encoders[resolved.schema_id] = encoder
        try:
            payload = encoder(data)
        except _UNFIT as exc:
            raise data_refused(
                f"{where} does not match schema {resolved.schema_id}: {exc}"
            ) from None
        return frame(resolved.schema_id, payload)

    def decode(self, data: bytes, schema_type: SchemaType, where: str) -> object:
        """A framed key or value back to JSON-shaped data (``ValueError`` if it cannot be)."""
        schema_id, payload = unframe(data)
        decoder = self._decoders.get(schema_id)
        if decoder is None:
            try:
                schema = self.registry.schema_by_id(schema_id)
            except SchemaRegistryError as exc:
                raise ValueError(f"{where}: schema {schema_id}: {exc.message}") from None
            if schema.schema_type is not schema_type:
                raise ValueError(
                    f"{where} is written with schema {schema_id}, a "
                    f"{V3_NAMES[schema.schema_type]} schema, not {V3_NAMES[schema_type]}"
                )
            decoder = shown_as_json(schema, format_of(schema_type).decoder(schema))
            with self._lock:
                self._decoders[schema_id] = decoder
        try:
            return decoder(payload)
        except _UNFIT as exc:
            raise ValueError(f"{where} does not decode with schema {schema_id}: {exc}") from None


_SCHEMAS: weakref.WeakKeyDictionary[Any, Schemas] = weakref.WeakKeyDictionary()
_SCHEMAS_LOCK = threading.Lock()


def schemas_of(registry: RegistryLike) -> Schemas:
    """The embedded formats over ``registry``, one per registry (so codecs are shared by
    every request to its broker, and brokers on other roots never share ids)."""
    with _SCHEMAS_LOCK:
        found = _SCHEMAS.get(registry)
        if found is None:
            found = _SCHEMAS[registry] = Schemas(registry)
        return found


def shown_as_json(schema: ParsedSchema, decoder: Decoder) -> Decoder:
    """``decoder`` answering as the REST Proxy shows a value: Avro in Avro's JSON encoding
    (a union's branch named, ``{"string": "x"}``; bytes one code point per byte; logical
    types as their underlying type), the other formats as their decoders give them."""
    parsed = getattr(schema.native, "parsed", None)
    if schema.schema_type is not SchemaType.AVRO or parsed is None:
        return decoder
    import fastavro  # loaded with the Avro format, on first use

    def decode(payload: memoryview) -> object:
        datum = decoder(payload)
        out = io.StringIO()
        fastavro.json_writer(out, parsed, [datum])
        return json.loads(out.getvalue())

    return decode


def json_safe(value: object) -> object:
    """A decoded value as JSON: bytes as Avro's JSON encoding writes them (each byte one
    code point, U+0000 to U+00FF), which is how the REST Proxy shows them."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("latin-1")
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


# -- v2 ------------------------------------------------------------------------------


@dataclass(frozen=True)
class V2Encoded:
    """A v2 body's keys and values as written, and the ids its answer names."""

    keys: list[bytes | None]
    values: list[bytes | None]
    key_schema_id: int | None
    value_schema_id: int | None


def encode_v2(
    schemas: Schemas,
    topic: str,
    schema_type: SchemaType,
    body: Any,
    may: SubjectCheck = allow_all,
) -> V2Encoded:
    """A v2 body of a schema'd embedded format written as Confluent's serializers write it.

    An inline schema is looked up under (or registered in) ``<topic>-key`` or
    ``<topic>-value``; a schema id is taken as it is. Null data stays null (no
    key, or a tombstone) and needs no schema; any other key or value does
    (42201, 42202). Every key and value is written before anything is produced,
    so one that does not fit its schema (42203) refuses the whole request.
    """
    written: list[list[bytes | None]] = []
    ids: list[int | None] = []
    for part, is_key in (("key", True), ("value", False)):
        text: str | None = getattr(body, f"{part}_schema")
        schema_id: int | None = getattr(body, f"{part}_schema_id")
        resolved: Resolved | None = None
        if text is not None and schema_id is not None:
            raise bad_argument(f"give {part}_schema or {part}_schema_id, not both")
        if schema_id is not None:
            schema = schemas.by_id(schema_id)
            if schema.schema_type is not schema_type:
                raise invalid_schema(
                    f"schema {schema_id} is a {V3_NAMES[schema.schema_type]} schema; this "
                    f"request's embedded format is {V3_NAMES[schema_type]}"
                )
            resolved = Resolved(schema_id, schema)
        elif text is not None:
            resolved = schemas.inline(topic, is_key, schema_type, text, None, may)
        column: list[bytes | None] = []
        for i, record in enumerate(body.records):
            data = getattr(record, part)
            if data is None:
                column.append(None)
            elif resolved is None:
                raise schema_missing(is_key)
            else:
                column.append(schemas.encode(resolved, data, f"records[{i}].{part}"))
        written.append(column)
        ids.append(resolved.schema_id if resolved else None)
    return V2Encoded(written[0], written[1], ids[0], ids[1])
