"""Compatibility levels: which earlier versions a new schema is checked against, and how.

BACKWARD means consumers using the new schema read data written with the old one
(the new schema is the reader); FORWARD means consumers still using the old
schema read data written with the new one (the old schema is the reader); FULL is
both. The plain levels check the latest live version only, the ``_TRANSITIVE``
ones every live version. A schema of another type than an earlier version is
never compatible with it. The format decides what "can read" means.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from lakelog.errors import InvalidCompatibilityLevelError
from server.schema_registry.formats import SchemaFormat
from server.schema_registry.types import ParsedSchema


class CompatibilityLevel(enum.StrEnum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


DEFAULT_LEVEL = CompatibilityLevel.BACKWARD


def parse_level(value: object) -> CompatibilityLevel:
    """A level from a request body; Confluent's 42203 for anything else."""
    text = str(value).strip().upper() if isinstance(value, str) else ""
    try:
        return CompatibilityLevel(text)
    except ValueError:
        choices = ", ".join(level.value for level in CompatibilityLevel)
        raise InvalidCompatibilityLevelError(
            f"Invalid compatibility level {value!r}. Valid values are {choices}"
        ) from None


@dataclass(frozen=True, slots=True)
class Earlier:
    """An earlier live version of the subject, as the check reports it."""

    version: int
    schema: ParsedSchema


def _pair(fmt: SchemaFormat, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    if reader.schema_type != writer.schema_type:
        return [
            f"Incompatible because of different schema type: {writer.schema_type} "
            f"data cannot be read as {reader.schema_type}"
        ]
    return fmt.incompatibilities(reader, writer)


def incompatibilities(
    fmt: SchemaFormat,
    level: CompatibilityLevel,
    new: ParsedSchema,
    earlier: Sequence[Earlier],
) -> list[str]:
    """Why ``new`` may not follow ``earlier`` (live versions, oldest first); empty if it may."""
    if level is CompatibilityLevel.NONE or not earlier:
        return []
    checked = earlier if level.transitive else earlier[-1:]
    problems: list[str] = []
    for old in reversed(checked):
        found: list[str] = []
        if level.backward:
            found += [f"old data, new schema: {p}" for p in _pair(fmt, new, old.schema)]
        if level.forward:
            found += [f"new data, old schema: {p}" for p in _pair(fmt, old.schema, new)]
        problems += [f"version {old.version}: {p}" for p in found]
    return problems
