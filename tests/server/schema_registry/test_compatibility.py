"""Compatibility levels over a format's reader/writer check (pure)."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidCompatibilityLevelError
from server.schema_registry.compatibility import (
    CompatibilityLevel,
    Earlier,
    incompatibilities,
    parse_level,
)
from server.schema_registry.types import ParsedSchema, SchemaType
from tests.server.schema_registry.toy_format import FORMAT, toy

L = CompatibilityLevel


def schema(**fields: bool) -> ParsedSchema:
    return FORMAT.parse(toy(**fields), {})


V1 = schema(a=False)
#: Adds b without a default: old data has no b (not backward); old readers ignore b (forward).
ADD_REQUIRED = schema(a=False, b=False)
#: Adds b with a default: both ways.
ADD_OPTIONAL = schema(a=False, b=True)
#: Drops a (required in V1): new readers fine (backward); old readers miss a (not forward).
DROP_A = schema(c=True)


@pytest.mark.parametrize(
    ("level", "new", "ok"),
    [
        (L.NONE, ADD_REQUIRED, True),
        (L.NONE, DROP_A, True),
        (L.BACKWARD, ADD_REQUIRED, False),
        (L.BACKWARD, ADD_OPTIONAL, True),
        (L.BACKWARD, DROP_A, True),
        (L.FORWARD, ADD_REQUIRED, True),
        (L.FORWARD, DROP_A, False),
        (L.FULL, ADD_OPTIONAL, True),
        (L.FULL, ADD_REQUIRED, False),
        (L.FULL, DROP_A, False),
    ],
)
def test_levels_check_the_latest_version_in_their_directions(
    level: CompatibilityLevel, new: ParsedSchema, ok: bool
) -> None:
    problems = incompatibilities(FORMAT, level, new, [Earlier(1, V1)])
    assert (problems == []) is ok, problems
    if not ok:
        assert problems[0].startswith("version 1: ")


def test_transitive_levels_check_every_earlier_version() -> None:
    # v1 requires a; v2 drops it; a new schema requiring a again reads v1's data, not v2's.
    earlier = [Earlier(1, schema(a=False)), Earlier(2, schema(b=True))]
    new = schema(a=False, b=True)
    assert incompatibilities(FORMAT, L.BACKWARD, new, earlier[:1]) == []
    assert incompatibilities(FORMAT, L.BACKWARD, new, earlier) != []  # latest is v2
    # v1 and v2 both require a; dropping it breaks old readers of both, newest named first.
    both = [Earlier(1, schema(a=False)), Earlier(2, schema(a=False, d=True))]
    drop = schema(d=True)
    assert [p.split(":")[0] for p in incompatibilities(FORMAT, L.FORWARD, drop, both)] == [
        "version 2"
    ]
    transitive = incompatibilities(FORMAT, L.FORWARD_TRANSITIVE, drop, both)
    assert [p.split(":")[0] for p in transitive] == ["version 2", "version 1"]
    # Transitive passes only if every version reads: v1 lacks the required c.
    new2 = schema(c=False)
    history = [Earlier(1, schema(a=True)), Earlier(2, schema(c=False))]
    assert incompatibilities(FORMAT, L.BACKWARD, new2, history) == []
    assert incompatibilities(FORMAT, L.BACKWARD_TRANSITIVE, new2, history) != []


def test_no_earlier_version_is_always_compatible() -> None:
    assert incompatibilities(FORMAT, L.FULL_TRANSITIVE, V1, []) == []


def test_another_schema_type_is_never_compatible() -> None:
    json_schema = ParsedSchema(SchemaType.JSON, "{}", "{}", native={})
    problems = incompatibilities(FORMAT, L.BACKWARD, json_schema, [Earlier(1, V1)])
    assert "different schema type" in problems[0]


def test_parse_level() -> None:
    assert parse_level("full_transitive") is L.FULL_TRANSITIVE
    with pytest.raises(InvalidCompatibilityLevelError) as caught:
        parse_level("SIDEWAYS")
    assert caught.value.registry_code == 42203
    with pytest.raises(InvalidCompatibilityLevelError):
        parse_level(None)
