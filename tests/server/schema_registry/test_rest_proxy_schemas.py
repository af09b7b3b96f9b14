"""Which schema a REST Proxy key or value is written with, and the codes of each refusal.

In process, over a registry on a local root: the subject name strategies, every
way v3 names a schema, the v2 rules (an inline schema or an id; null data needs
no schema), the REST Proxy's codes for each refusal, and framed data decoded
back as the REST Proxy shows it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lakelog.storage import open_storage
from server.rest_proxy.schemas import (
    SchemaRefused,
    SchemaRequest,
    Schemas,
    encode_v2,
    parse_strategy,
    strategy_subject,
    subject_denied,
)
from server.rest_proxy.v3_records import Decoded, RecordRefused, SchemaContext, decode_each
from server.schema_registry.formats import format_of
from server.schema_registry.framing import unframe
from server.schema_registry.registry import SchemaRegistry
from server.schema_registry.subjects import record_name
from server.schema_registry.types import SchemaType

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "blob", "type": "bytes"},
        ],
    }
)
PROTO = 'syntax = "proto3";\npackage shop;\nmessage Item { int64 id = 1; }\nmessage Other {}\n'


@pytest.fixture
def schemas(tmp_path: Path) -> Schemas:
    return Schemas(SchemaRegistry(open_storage(str(tmp_path / "root"))))


def refusal(exc: pytest.ExceptionInfo[SchemaRefused]) -> tuple[int, int, int]:
    return exc.value.v2_status, exc.value.v2_code, exc.value.v3_code


def test_record_names_and_strategies() -> None:
    avro = format_of(SchemaType.AVRO).parse(ORDER, {})
    proto = format_of(SchemaType.PROTOBUF).parse(PROTO, {})
    titled = format_of(SchemaType.JSON).parse('{"title": "Thing", "type": "object"}', {})
    untitled = format_of(SchemaType.JSON).parse('{"type": "object"}', {})
    assert [record_name(s) for s in (avro, proto, titled, untitled)] == [
        "shop.Order",
        "shop.Item",
        "Thing",
        "record",
    ]
    assert strategy_subject("TOPIC_NAME", "t", True, None) == "t-key"
    assert strategy_subject("RECORD_NAME", "t", False, avro) == "shop.Order"
    assert strategy_subject("TOPIC_RECORD_NAME", "t", False, avro) == "t-shop.Order"
    with pytest.raises(SchemaRefused, match="without schema_id or schema") as exc:
        strategy_subject("RECORD_NAME", "t", False, None)
    assert exc.value.v3_code == 400
    assert parse_strategy("topic_name") == "TOPIC_NAME"
    with pytest.raises(SchemaRefused, match="unknown"):
        parse_strategy("BY_MOOD")


def test_v3_names_a_schema_every_way(schemas: Schemas) -> None:
    inline = schemas.resolve("t", False, SchemaRequest(schema_type=SchemaType.AVRO, text=ORDER))
    assert (inline.subject, inline.version) == ("t-value", 1)
    ways = [
        SchemaRequest(schema_id=inline.schema_id),
        SchemaRequest(version=1),
        SchemaRequest(subject="t-value"),
        SchemaRequest(schema_type=SchemaType.AVRO),
        SchemaRequest(strategy="TOPIC_NAME", version=1),
    ]
    for asked in ways:
        found = schemas.resolve("t", False, asked)
        assert (found.schema_id, found.subject, found.version) == (inline.schema_id, "t-value", 1)
    # the same schema under another subject keeps its id
    keyed = schemas.resolve(
        "t",
        True,
        SchemaRequest(schema_type=SchemaType.AVRO, strategy="RECORD_NAME", text=ORDER),
    )
    assert (keyed.schema_id, keyed.subject) == (inline.schema_id, "shop.Order")

    refused = {
        "unknown id": (SchemaRequest(schema_id=9999), (408, 40801, 42207)),
        "unknown version": (SchemaRequest(version=7), (408, 40801, 400)),
        "unknown subject": (SchemaRequest(subject="nope"), (408, 40801, 42207)),
        "id and version": (SchemaRequest(schema_id=inline.schema_id, version=1), (422, 422, 400)),
        "subject and strategy": (
            SchemaRequest(subject="t-value", strategy="TOPIC_NAME"),
            (422, 422, 400),
        ),
        "schema without type": (SchemaRequest(text=ORDER), (422, 422, 400)),
        "other type": (
            SchemaRequest(schema_type=SchemaType.PROTOBUF, schema_id=inline.schema_id),
            (422, 422, 400),
        ),
        "invalid schema": (
            SchemaRequest(schema_type=SchemaType.AVRO, text='{"type": "nope"}'),
            (422, 42205, 400),
        ),
    }
    for why, (asked, codes) in refused.items():
        with pytest.raises(SchemaRefused) as exc:
            schemas.resolve("t", False, asked)
        assert refusal(exc) == codes, why


def v2_body(**fields: Any) -> SimpleNamespace:
    records = [SimpleNamespace(key=k, value=v) for k, v in fields.pop("records")]
    given = {f"{p}_schema{s}": None for p in ("key", "value") for s in ("", "_id")}
    return SimpleNamespace(records=records, **{**given, **fields})


def test_v2_inline_then_id_and_its_refusals(schemas: Schemas) -> None:
    value = {"id": 1, "note": {"string": "x"}, "blob": "\u00ff"}
    body = v2_body(key_schema='"string"', value_schema=ORDER, records=[("k", value), (None, None)])
    encoded = encode_v2(schemas, "t", SchemaType.AVRO, body)
    assert encoded.keys[1] is None and encoded.values[1] is None  # null needs no schema
    assert encoded.key_schema_id != encoded.value_schema_id
    value_id, _ = unframe(encoded.values[0] or b"")
    assert value_id == encoded.value_schema_id
    shown = schemas.decode(encoded.values[0] or b"", SchemaType.AVRO, "the value")
    assert shown == value  # Avro's JSON encoding, as sent

    by_id = v2_body(value_schema_id=encoded.value_schema_id, records=[(None, value)])
    assert encode_v2(schemas, "t", SchemaType.AVRO, by_id).values == encoded.values[:1]

    cases = {
        "key schema missing": (v2_body(value_schema=ORDER, records=[("k", value)]), 42201),
        "value schema missing": (v2_body(records=[(None, value)]), 42202),
        "data not matching": (v2_body(value_schema=ORDER, records=[(None, {"id": "x"})]), 42203),
        "unknown id": (v2_body(value_schema_id=4242, records=[(None, value)]), 40801),
        "invalid schema": (v2_body(value_schema="{", records=[(None, value)]), 42205),
        "other format": (
            v2_body(value_schema_id=encoded.value_schema_id, records=[(None, {"id": 1})]),
            42205,
        ),
    }
    for why, (bad, code) in cases.items():
        fmt = SchemaType.PROTOBUF if why == "other format" else SchemaType.AVRO
        with pytest.raises(SchemaRefused) as exc:
            encode_v2(schemas, "t", fmt, bad)
        assert exc.value.v2_code == code, why


def test_v3_stream_resolves_each_schema_once(schemas: Schemas) -> None:
    calls: list[int] = []
    by_id = schemas.registry.schema_by_id
    registered = schemas.resolve(
        "t", False, SchemaRequest(schema_type=SchemaType.PROTOBUF, text=PROTO)
    )

    def counted(schema_id: int) -> Any:
        calls.append(schema_id)
        return by_id(schema_id)

    schemas.registry.schema_by_id = counted  # type: ignore[method-assign]
    records = [{"value": {"schema_id": registered.schema_id, "data": {"id": i}}} for i in range(5)]
    records.append({"value": {"schema_id": registered.schema_id, "data": {"id": "x"}}})
    items = decode_each(records, schemas=SchemaContext(schemas, "t"))
    assert calls == [registered.schema_id]
    decoded = [item for item in items if isinstance(item, Decoded)]
    assert len(decoded) == 5
    assert decoded[0].value_info is not None
    assert decoded[0].value_info.type == "PROTOBUF"
    assert decoded[0].value_info.subject == "t-value"
    assert isinstance(items[5], RecordRefused) and items[5].error_code == 400
    assert schemas.decode(decoded[3].value or b"", SchemaType.PROTOBUF, "v") == {"id": "3"}


def test_subject_acls_are_the_callers(schemas: Schemas) -> None:
    asked: list[tuple[str, bool]] = []

    def may(allowed: set[tuple[str, bool]]) -> Callable[[str, bool], None]:
        def check(subject: str, write: bool) -> None:
            asked.append((subject, write))
            if (subject, write) not in allowed:
                raise subject_denied(f"no {'WRITE' if write else 'READ'} on {subject}")

        return check

    inline = SchemaRequest(schema_type=SchemaType.AVRO, text=ORDER)
    with pytest.raises(SchemaRefused) as exc:  # READ does not register
        schemas.resolve("t", False, inline, may({("t-value", False)}))
    assert refusal(exc) == (403, 40301, 403)
    registered = schemas.resolve("t", False, inline, may({("t-value", True)}))
    # READ alone finds it now; so do a version and the id (looked up under the subject)
    for how in (inline, SchemaRequest(version=1), SchemaRequest(schema_id=registered.schema_id)):
        asked.clear()
        found = schemas.resolve("t", False, how, may({("t-value", False)}))
        assert found.schema_id == registered.schema_id
        assert ("t-value", False) in asked
    with pytest.raises(SchemaRefused) as exc:
        schemas.resolve("t", False, SchemaRequest(), may(set()))
    assert refusal(exc) == (403, 40301, 403)
    # v2 by id needs no subject: a schema id is readable by any authenticated caller
    body = v2_body(value_schema_id=registered.schema_id, records=[(None, {"id": 1, "blob": ""})])
    asked.clear()
    encode_v2(schemas, "t", SchemaType.AVRO, body, may(set()))
    assert asked == []
