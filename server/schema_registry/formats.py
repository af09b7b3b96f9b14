"""One ``SchemaFormat`` per schema type: the only place that knows a format's rules.

The registry, validation on produce and the REST Proxy's embedded formats work on
``ParsedSchema`` through this protocol and never import a format module directly.
Format modules load on first use, so a broker that never sees Protobuf never
imports it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from server.schema_registry.types import ParsedSchema, SchemaType

#: A payload (after the Confluent framing) to the value it holds, as JSON-shaped data.
Decoder = Callable[[memoryview], object]
#: JSON-shaped data to a payload (before the Confluent framing).
Encoder = Callable[[object], bytes]
#: A batch's payloads (the data buffer, each payload's start and end in it) to the rows a
#: format's column decoder did not take: only those need the ``Decoder``'s verdict.
BatchCheck = Callable[
    [memoryview, npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.bool_]
]


class SchemaFormat(Protocol):
    schema_type: ClassVar[SchemaType]

    def parse(
        self,
        text: str,
        references: Mapping[str, ParsedSchema],
        *,
        normalize: bool = False,
    ) -> ParsedSchema:
        """The schema, or ``InvalidSchemaError`` naming what is wrong with it.

        ``references`` maps each reference's ``name`` to the schema it resolves to.
        """
        ...

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with ``reader``; empty if it can."""
        ...

    def decoder(self, schema: ParsedSchema) -> Decoder:
        """Decode a payload, raising ``ValueError`` naming the problem if it does not fit."""
        ...

    def encoder(self, schema: ParsedSchema) -> Encoder:
        """Encode a value, raising ``ValueError`` naming the problem if it does not fit."""
        ...

    def batch_check(self, schema: ParsedSchema) -> BatchCheck | None:
        """A whole batch's check, where the format has one faster than ``decoder`` per payload."""
        ...


_MODULES: dict[SchemaType, str] = {
    SchemaType.AVRO: "server.schema_registry.avro",
    SchemaType.JSON: "server.schema_registry.json_schema",
    SchemaType.PROTOBUF: "server.schema_registry.protobuf",
}


def format_of(schema_type: SchemaType) -> SchemaFormat:
    """The format of ``schema_type``; each module exposes its instance as ``FORMAT``."""
    module = importlib.import_module(_MODULES[schema_type])
    found: SchemaFormat = module.FORMAT
    return found
