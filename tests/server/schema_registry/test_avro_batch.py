"""The column decoder against fastavro: the same values, and no payload fastavro refuses
is taken.

Pure logic: payloads are written by fastavro from seeded random records, then some
are damaged (cut short, extended, a byte changed, replaced by noise).
"""

from __future__ import annotations

import io
import random
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from server.schema_registry.avro_batch import Unsupported, avro_batch_decoder
from server.schema_registry.avro_columns import avro_columns

KIND = {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}
SUB = {
    "type": "record",
    "name": "Sub",
    "fields": [{"name": "n", "type": "int"}, {"name": "kind", "type": "Kind"}],
}
FLAT = {
    "type": "record",
    "name": "Flat",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "count", "type": "int"},
        {"name": "blob", "type": "bytes"},
        {"name": "four", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "kind", "type": KIND},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "later", "type": ["string", "null"]},
        {"name": "sub", "type": ["null", SUB], "default": None},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "nothing", "type": "null"},
    ],
}


def flat_record(rnd: random.Random, i: int) -> dict[str, Any]:
    return {
        "id": rnd.randint(-(2**63), 2**63 - 1),
        "name": "ñ" * rnd.randint(0, 4) + str(i),
        "amount": rnd.uniform(-1e9, 1e9),
        "ratio": 0.5,
        "ok": i % 3 == 0,
        "count": rnd.randint(-(2**31), 2**31 - 1),
        "blob": rnd.randbytes(rnd.randint(0, 6)),
        "four": rnd.randbytes(4),
        "kind": "ABC"[i % 3],
        "note": None if i % 2 else f"n{i}",
        "later": f"l{i}" if i % 4 else None,
        "sub": None if i % 5 else {"n": i, "kind": "B"},
        "placed": rnd.randint(0, 2**42),
        "day": rnd.randint(0, 30_000),
        "nothing": None,
    }


def encode(schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def damage(rnd: random.Random, payload: bytes) -> bytes:
    kind = rnd.randrange(4)
    if kind == 0:
        return payload[: rnd.randrange(len(payload) or 1)]
    if kind == 1:
        return payload + rnd.randbytes(rnd.randint(1, 3))
    if kind == 2 and payload:
        changed = bytearray(payload)
        changed[rnd.randrange(len(changed))] = rnd.randrange(256)
        return bytes(changed)
    return rnd.randbytes(rnd.randint(0, 40))


def fastavro_reads(schema: Any, payload: bytes) -> tuple[bool, Any]:
    """fastavro's verdict: decodes, using every byte; and the value (logical types off)."""
    stream = io.BytesIO(payload)
    try:
        value = fastavro.schemaless_reader(stream, avro_columns(schema).reader_schema, None)
    except Exception:
        return False, None
    return stream.tell() == len(payload), value


def decode(schema: Any, payloads: list[bytes]) -> tuple[pa.Array, np.ndarray]:
    """The column decoder over ``payloads`` laid end to end after a 3-byte prefix; its
    flags alone (validation's read) are the same."""
    data = b"pre" + b"".join(payloads)
    bounds = np.cumsum([3] + [len(p) for p in payloads])
    decoder = avro_batch_decoder(schema)
    array, flagged = decoder.decode(data, bounds[:-1], bounds[1:])
    assert decoder.flags(data, bounds[:-1], bounds[1:]).tolist() == flagged.tolist()
    return array, flagged


def check_against_fastavro(schema: Any, payloads: list[bytes]) -> np.ndarray:
    array, flagged = decode(schema, payloads)
    assert array.type == avro_columns(schema).raw_type
    verdicts = [fastavro_reads(schema, p) for p in payloads]
    for i, (ok, value) in enumerate(verdicts):
        if flagged[i]:
            assert not array.is_valid()[i].as_py(), i
            continue
        assert ok, f"row {i} taken, which fastavro refuses: {payloads[i]!r}"
        expected = pa.array([value], avro_columns(schema).raw_type)[0].as_py()
        assert array[i].as_py() == expected, i
    return flagged


def test_valid_payloads_decode_as_fastavro_reads_them() -> None:
    rnd = random.Random(7)
    payloads = [encode(FLAT, flat_record(rnd, i)) for i in range(300)]
    flagged = check_against_fastavro(FLAT, payloads)
    assert not flagged.any()


@pytest.mark.parametrize("seed", range(4))
def test_damaged_payloads_are_flagged_never_taken(seed: int) -> None:
    rnd = random.Random(seed)
    payloads = [encode(FLAT, flat_record(rnd, i)) for i in range(300)]
    mixed = [damage(rnd, p) if rnd.random() < 0.4 else p for p in payloads]
    flagged = check_against_fastavro(FLAT, mixed)
    assert flagged.any() and not flagged.all()


@pytest.mark.parametrize(
    ("schema", "payload"),
    [
        ("long", b"\xff" * 10 + b"\x01"),  # eleven bytes: fastavro reads it, this flags it
        ("int", b"\xff\xff\xff\xff\x7f"),  # beyond 32 bits
        (KIND, b"\x01"),  # index -1
        (KIND, b"\x06"),  # index 3 of 3 symbols
        (["null", "string"], b"\x04"),  # branch 2 of 2
        ("string", b"\x04\xff\xfe"),  # not UTF-8
        ("string", b"\x01"),  # negative length
        ("double", b"\x00\x00"),  # cut short
        ("long", b""),
    ],
)
def test_what_it_does_not_take_is_flagged(schema: Any, payload: bytes) -> None:
    _, flagged = decode(schema, [payload])
    assert flagged.tolist() == [True]


def test_a_flagged_row_leaves_its_neighbours_decoded() -> None:
    values = [encode("string", "a"), b"\x06ab", encode("string", "ccc")]
    array, flagged = decode("string", values)
    assert flagged.tolist() == [False, True, False]
    assert array.to_pylist() == ["a", None, "ccc"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": "int"},
        {"type": "map", "values": "int"},
        ["null", "int", "string"],
        {"type": "record", "name": "R", "fields": [{"name": "x", "type": "Unknown"}]},
    ],
)
def test_schemas_it_does_not_take_raise_unsupported(schema: Any) -> None:
    with pytest.raises(Unsupported):
        avro_batch_decoder(schema)


def test_references_define_the_names_a_schema_uses() -> None:
    user = {"type": "record", "name": "Uses", "fields": [{"name": "kind", "type": "Kind"}]}
    decoder = avro_batch_decoder(KIND, user)
    array, flagged = decoder.decode(b"\x04", np.array([0]), np.array([1]))  # symbol 2
    assert not flagged.any() and array.to_pylist() == [{"kind": "C"}]


def test_avro_columns_use_it_where_it_takes_the_schema() -> None:
    assert avro_columns(FLAT).batch is not None
    assert avro_columns({"type": "array", "items": "int"}).batch is None
