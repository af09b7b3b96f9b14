"""A tiny schema format for pure registry tests: ``{"fields": {"name": has_default}}``.

A reader can read a writer's data when every reader field without a default is
written; that is enough to tell the compatibility levels apart without Avro.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from lakelog.errors import InvalidSchemaError
from server.schema_registry.formats import BatchCheck, Decoder, Encoder, SchemaFormat
from server.schema_registry.types import ParsedSchema, SchemaType


class ToyFormat:
    schema_type: ClassVar[SchemaType] = SchemaType.AVRO

    def parse(
        self, text: str, references: Mapping[str, ParsedSchema], *, normalize: bool = False
    ) -> ParsedSchema:
        try:
            body = json.loads(text)
            fields = dict(body["fields"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidSchemaError(f"Invalid schema: {exc}") from None
        missing = [name for name in body.get("uses", []) if name not in references]
        if missing:
            raise InvalidSchemaError(f"Invalid schema: unresolved {missing}")
        canonical = json.dumps({"fields": fields, "uses": body.get("uses", [])}, sort_keys=True)
        return ParsedSchema(self.schema_type, text, canonical, native=fields)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        return [
            f"field {name} has no default and is not written"
            for name, has_default in reader.native.items()
            if not has_default and name not in writer.native
        ]

    def decoder(self, schema: ParsedSchema) -> Decoder:
        return lambda payload: json.loads(bytes(payload))

    def encoder(self, schema: ParsedSchema) -> Encoder:
        return lambda value: json.dumps(value).encode()

    def batch_check(self, schema: ParsedSchema) -> BatchCheck | None:
        return None


def toy(**fields: bool) -> str:
    return json.dumps({"fields": fields})


FORMAT: SchemaFormat = ToyFormat()
