"""The columnar JSON produce decoding agrees with the model-validating path it shortcuts.

Pure logic: every body has a known route. The fast path takes it (and the
models accept it and build the very same produce columns), or it declines
(None) and the models accept it or refuse it with the precise error. A change
of route either way fails, as does any disagreement.
"""

from __future__ import annotations

import base64
import json
import random
from collections import Counter
from typing import Literal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from lakelog.errors import LakelogError
from lakelog.records import PRODUCE_SCHEMA
from lakelog.topic_log import AppendResult
from server.codec import decode_produce_json, joined_lines, produce_response_json
from server.models import ProduceRequest
from server.routes.records import request_to_batch


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _slow(raw: bytes) -> pa.Table | None:
    try:
        return request_to_batch(ProduceRequest.model_validate_json(raw)).table
    except (ValidationError, LakelogError):
        return None


#: Where a body goes: the fast decoder takes it ("fast"), or declines it and the models
#: accept it ("models") or refuse it with the precise error ("refused").
Route = Literal["fast", "models", "refused"]

EDGE_CASES: list[tuple[bytes, Route]] = [
    (b'{"records":[{"value":"a"}]}', "fast"),
    (b'{"records":[{"value":"\xc3\xa9t\xc3\xa9","key":null,"partition":2147483647}]}', "fast"),
    (b'{"records":[]}', "refused"),
    (b'{"records":null}', "refused"),
    (b'{"records":[null]}', "refused"),
    (b'{"records":[1]}', "refused"),
    (b"null", "refused"),
    (b"[]", "refused"),
    (b"", "refused"),
    (b'{"records":[{"value":"a","partition":1.5}]}', "refused"),
    # strict: a boolean is not a partition
    (b'{"records":[{"value":"a","partition":true}]}', "refused"),
    (b'{"records":[{"value":"a","partition":-1}]}', "refused"),
    (b'{"records":[{"value":"a","partition":2147483648}]}', "refused"),
    (b'{"records":[{"value":"a","timestamp_ms":253402300800000}]}', "refused"),
    (b'{"records":[{"value":"a","headers":[]}]}', "fast"),
    (b'{"records":[{"value":"a","headers":null}]}', "refused"),
    (b'{"records":[{"value":"a","headers":[{"key":"h","value":"v"}]}]}', "models"),
    (b'{"records":[{"value":"a","extra":1}]}', "refused"),
    (b'{"records":[{"value":"a"}],"extra":1}', "refused"),
    (b'{"records":[{"value":"a"}],"producer_id":5,"sequence":0}', "fast"),
    (b'{"records":[{"value":"a"}],"producer_id":-1,"sequence":0}', "refused"),
    (b'{"records":[{"value":{"x":1}}],"value_format":"json"}', "models"),
    (b'{"records":[{"value":"a"},{"value":1}]}', "refused"),
    (b'{"records":[{"value":"QQ"}],"value_format":"base64"}', "refused"),
    (b'{"records":[{"value":"Q==="}],"value_format":"base64"}', "refused"),
    (b'{"records":[{"value":"QQ=A"}],"value_format":"base64"}', "refused"),
    (b'{"records":[{"value":"QQ==QQ=="}],"value_format":"base64"}', "refused"),
    (b'{"records":[{"value":"a-_b"}],"value_format":"base64"}', "refused"),
    (b'{"records":[{"value":"QUJ="},{"value":null},{"value":""}],"value_format":"base64"}', "fast"),
    (b'{"records":[{"value":NaN}]}', "refused"),
    (b'{"records":[{"value":"\\ud800"}]}', "refused"),
    (b'{"records":[{"value":"\xff"}]}', "refused"),  # not UTF-8: msgspec's UnicodeDecodeError
    (b'{"records":[{"value":"a"}]} x', "refused"),
    (b'{"records":[{"value":"a","value":"b"}]}', "fast"),  # the last duplicate wins, as in json
    (b'{"records":[{"value":"a"}],"records":[{"value":"c"}]}', "fast"),
    (b'{"records":[{"value":"QU\\/J"}],"value_format":"base64"}', "fast"),
    (b'{"records":[{"value":"a","timestamp_ms":253402300799999,"partition":0}]}', "fast"),
    (b'{"records":[{"value":"a"}],"key_format":"json"}', "models"),
    (b'{"records":[{"value":"a"}],"producer_id":9223372036854775808,"sequence":0}', "refused"),
]


def _random_bodies(count: int) -> list[tuple[bytes, Route]]:
    """Random bodies, each with its route known by construction.

    Every choice below is valid for both paths unless marked: an integer value or
    a negative partition is refused by both; "QQ" is bad base64 (refused as a
    base64 value, plain text as a string value); a non-empty header list is
    valid, but only the models decode headers.
    """
    rnd = random.Random(7)
    bodies: list[tuple[bytes, Route]] = []
    for _ in range(count):
        refused = models_only = bad_base64 = False
        records = []
        for _ in range(rnd.randint(1, 6)):
            record: dict[str, object] = {}
            if rnd.random() < 0.8:
                value = rnd.choice([None, _b64(rnd.randbytes(rnd.randint(0, 9))), "QQ", 3])
                refused |= value == 3
                bad_base64 |= value == "QQ"
                record["value"] = value
            if rnd.random() < 0.5:
                record["key"] = rnd.choice([None, _b64(rnd.randbytes(rnd.randint(0, 5)))])
            if rnd.random() < 0.4:
                partition = rnd.choice([0, 1, 7, None, -2])
                refused |= partition == -2
                record["partition"] = partition
            if rnd.random() < 0.1:
                headers = rnd.choice([[], [{"key": "a", "value": "QQ=="}]])
                models_only |= bool(headers)
                record["headers"] = headers
            records.append(record)
        formats = {"key_format": rnd.choice(["base64", "string"])}
        formats["value_format"] = rnd.choice(["base64", "string"])
        refused |= bad_base64 and formats["value_format"] == "base64"
        route: Route = "refused" if refused else "models" if models_only else "fast"
        bodies.append((json.dumps({"records": records, **formats}).encode(), route))
    return bodies


RANDOM_BODIES = _random_bodies(150)


@pytest.mark.parametrize(("raw", "route"), EDGE_CASES + RANDOM_BODIES)
def test_each_body_takes_its_route_and_both_paths_agree(raw: bytes, route: Route) -> None:
    fast = decode_produce_json(raw)
    slow = _slow(raw)
    taken: Route = "fast" if fast is not None else "models" if slow is not None else "refused"
    assert taken == route
    if fast is not None:
        assert slow is not None, "the fast path accepted a body the models refuse"
        assert fast.batch.table.schema.equals(PRODUCE_SCHEMA)
        assert fast.batch.table.equals(slow)
        body = ProduceRequest.model_validate_json(raw)
        assert (fast.producer_id, fast.sequence) == (body.producer_id, body.sequence)


def test_random_bodies_take_every_route() -> None:
    routes = Counter(route for _, route in RANDOM_BODIES)
    assert set(routes) == {"fast", "models", "refused"}


def test_common_bodies_take_the_fast_path() -> None:
    values = [_b64(bytes([i]) * 100) for i in range(50)]
    raw = json.dumps(
        {"records": [{"value": v, "partition": 1} for v in values], "value_format": "base64"}
    ).encode()
    fast = decode_produce_json(raw)
    assert fast is not None
    assert fast.batch.column("value").to_pylist() == [bytes([i]) * 100 for i in range(50)]


@pytest.mark.parametrize(
    ("mixed", "keyed"), [(False, False), (False, True), (True, True)], ids=["one", "keyed", "mixed"]
)
def test_produce_response_has_the_model_shape(mixed: bool, keyed: bool) -> None:
    n = 25
    partitions = np.arange(n) % 12 if keyed else np.full(n, 2)
    stamps = np.arange(n) if mixed else np.full(n, 17)
    result = AppendResult(partitions, np.arange(100, 100 + n), stamps, [], 4, duplicate=mixed)
    body = json.loads(produce_response_json('t"ö', result, throttle_time_ms=3))
    assert body == {
        "topic": 't"ö',
        "records": [
            {"partition": p, "offset": o, "timestamp_ms": t}
            for p, o, t in zip(result.partitions, result.offsets, result.timestamps_ms, strict=True)
        ],
        "duplicate": mixed,
        "throttle_time_ms": 3,
    }


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2**40)), min_size=1, max_size=60),
    st.sampled_from(["", "0", 'ö"\\', "long-head-" * 5]),
    st.text(max_size=20),
    st.integers(0, 10**12),
)
def test_joined_lines_equal_each_line_written_out(
    records: list[tuple[int, int]], odd_head: str, tail: str, base: int
) -> None:
    """Both renderings (one line width, or several) give every line, in order."""
    partitions = np.array([p for p, _ in records], np.int64)
    offsets = np.array([base + o % 1000 if p % 2 else base + o for p, o in records], np.int64)

    def head(p: int) -> str:
        return f'{{"p":{p},{odd_head if p == 7 else ""}"o":'

    expected = "".join(f"{head(p)}{o}{tail}" for p, o in zip(partitions, offsets, strict=True))
    assert joined_lines(head, partitions, offsets, tail).to_pybytes() == expected.encode()
    one_width = np.full(len(offsets), 10**9 + 5)
    expected = "".join(f"{head(2)}{o}{tail}" for o in one_width)
    assert joined_lines(head, np.full(len(offsets), 2), one_width, tail).to_pybytes() == (
        expected.encode()
    )
