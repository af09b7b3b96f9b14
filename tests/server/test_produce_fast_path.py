"""The columnar JSON produce decoding agrees with the model-validating path it shortcuts.

Pure logic: for every body, either the fast path declines (None) and the models
decide, or both accept and build the very same produce columns.
"""

from __future__ import annotations

import base64
import json
import random

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from lakelog.errors import LakelogError
from lakelog.produce import conform
from lakelog.records import PRODUCE_SCHEMA
from lakelog.topic_log import AppendResult
from server.codec import decode_produce_json, produce_response_json
from server.models import ProduceRequest
from server.routes.records import request_to_table


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _slow(raw: bytes) -> pa.Table | None:
    try:
        return conform(request_to_table(ProduceRequest.model_validate_json(raw)))
    except (ValidationError, LakelogError):
        return None


EDGE_CASES = [
    b'{"records":[{"value":"a"}]}',
    b'{"records":[{"value":"\xc3\xa9t\xc3\xa9","key":null,"partition":2147483647}]}',
    b'{"records":[]}',
    b'{"records":null}',
    b'{"records":[null]}',
    b'{"records":[1]}',
    b"null",
    b"[]",
    b"",
    b'{"records":[{"value":"a","partition":1.5}]}',
    b'{"records":[{"value":"a","partition":true}]}',
    b'{"records":[{"value":"a","partition":-1}]}',
    b'{"records":[{"value":"a","partition":2147483648}]}',
    b'{"records":[{"value":"a","timestamp_ms":253402300800000}]}',
    b'{"records":[{"value":"a","headers":[]}]}',
    b'{"records":[{"value":"a","headers":null}]}',
    b'{"records":[{"value":"a","headers":[{"key":"h","value":"v"}]}]}',
    b'{"records":[{"value":"a","extra":1}]}',
    b'{"records":[{"value":"a"}],"extra":1}',
    b'{"records":[{"value":"a"}],"producer_id":5,"sequence":0}',
    b'{"records":[{"value":"a"}],"producer_id":-1,"sequence":0}',
    b'{"records":[{"value":{"x":1}}],"value_format":"json"}',
    b'{"records":[{"value":"a"},{"value":1}]}',
    b'{"records":[{"value":"QQ"}],"value_format":"base64"}',
    b'{"records":[{"value":"Q==="}],"value_format":"base64"}',
    b'{"records":[{"value":"QQ=A"}],"value_format":"base64"}',
    b'{"records":[{"value":"QQ==QQ=="}],"value_format":"base64"}',
    b'{"records":[{"value":"a-_b"}],"value_format":"base64"}',
    b'{"records":[{"value":"QUJ="},{"value":null},{"value":""}],"value_format":"base64"}',
    b'{"records":[{"value":NaN}]}',
    b'{"records":[{"value":"\\ud800"}]}',
    b'{"records":[{"value":"a"}]} x',
    b'{"records":[{"value":"a","value":"b"}]}',
    b'{"records":[{"value":"a"}],"records":[{"value":"c"}]}',
    b'{"records":[{"value":"QU\\/J"}],"value_format":"base64"}',
    b'{"records":[{"value":"a","timestamp_ms":253402300799999,"partition":0}]}',
    b'{"records":[{"value":"a"}],"key_format":"json"}',
    b'{"records":[{"value":"a"}],"producer_id":9223372036854775808,"sequence":0}',
]


def _random_bodies(count: int) -> list[bytes]:
    rnd = random.Random(7)
    bodies = []
    for _ in range(count):
        records = []
        for _ in range(rnd.randint(1, 6)):
            record: dict[str, object] = {}
            if rnd.random() < 0.8:
                record["value"] = rnd.choice(
                    [None, _b64(rnd.randbytes(rnd.randint(0, 9))), "QQ", 3]
                )
            if rnd.random() < 0.5:
                record["key"] = rnd.choice([None, _b64(rnd.randbytes(rnd.randint(0, 5)))])
            if rnd.random() < 0.4:
                record["partition"] = rnd.choice([0, 1, 7, None, -2])
            if rnd.random() < 0.1:
                record["headers"] = rnd.choice([[], [{"key": "a", "value": "QQ=="}]])
            records.append(record)
        fmt = {"key_format": rnd.choice(["base64", "string"])}
        fmt["value_format"] = rnd.choice(["base64", "string"])
        bodies.append(json.dumps({"records": records, **fmt}).encode())
    return bodies


@pytest.mark.parametrize("raw", EDGE_CASES + _random_bodies(150))
def test_fast_path_never_disagrees_with_the_models(raw: bytes) -> None:
    fast = decode_produce_json(raw)
    if fast is None:
        return  # declined: the models decide (and explain any error)
    slow = _slow(raw)
    assert slow is not None, "the fast path accepted a body the models refuse"
    assert fast.table.schema.equals(PRODUCE_SCHEMA)
    assert conform(fast.table).equals(slow)
    body = ProduceRequest.model_validate_json(raw)
    assert (fast.producer_id, fast.sequence) == (body.producer_id, body.sequence)


def test_common_bodies_take_the_fast_path() -> None:
    values = [_b64(bytes([i]) * 100) for i in range(50)]
    raw = json.dumps(
        {"records": [{"value": v, "partition": 1} for v in values], "value_format": "base64"}
    ).encode()
    fast = decode_produce_json(raw)
    assert fast is not None
    assert fast.table.column("value").to_pylist() == [bytes([i]) * 100 for i in range(50)]


@pytest.mark.parametrize("mixed", [False, True])
def test_produce_response_has_the_model_shape(mixed: bool) -> None:
    n = 25
    partitions = np.arange(n) % 3 if mixed else np.full(n, 2)
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
