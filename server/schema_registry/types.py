"""The registry's value types: a schema's type, its references, a parsed schema."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class SchemaType(enum.StrEnum):
    """Confluent's ``schemaType`` names; a schema registered without one is AVRO."""

    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A named dependency on another subject's version (Confluent's ``references``).

    ``name`` is how the referring schema names it: an Avro full name, a JSON
    Schema ``$ref`` URL, or a Protobuf import path.
    """

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class ParsedSchema:
    """A schema that parsed, with what its format needs to check and decode with it.

    ``canonical`` is the text identity is judged on: two registrations with equal
    ``schema_type``, ``canonical`` and ``references`` are one schema with one id.
    ``native`` is the format's own parsed form (fastavro's parsed schema, a
    jsonschema validator, a protobuf file descriptor), never shown to clients.
    """

    schema_type: SchemaType
    text: str
    canonical: str
    references: tuple[SchemaReference, ...] = ()
    native: Any = field(default=None, compare=False, hash=False, repr=False)
