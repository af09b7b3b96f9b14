"""REST Proxy produce bodies decode to what their records say, or to their documented refusal.

Pure logic, as for the native fast path. A v2 body has one decoder per
embedded format: every body below is either stored as its records say (the
bytes, partitions) or refused with its documented code. A v3 stream of the
usual shapes is decoded whole (the fast path), any other record by record as
``V3ProduceRecord``; the fast path takes a stream exactly when the record path
accepts it and would store the very same bytes, partitions and timestamps, and
report the same key and value types and sizes. The answers rendered from
columns are compared with the models' renderings byte for byte.
"""

from __future__ import annotations

import base64
import json
import random
from collections import Counter
from typing import Any, Literal

import numpy as np
import pytest
from starlette.responses import JSONResponse

from lakelog.errors import InvalidRecordError
from server.codec import decode_data
from server.rest_proxy.records_models import (
    V2Failure,
    V2PartitionOffset,
    V2ProduceResponse,
    V3Columns,
    V3ProduceResponse,
    V3ProduceResponseData,
    decode_v2,
    decode_v3_stream,
    v2_offsets_json,
    v3_report_json,
)
from server.rest_proxy.v3_records import (
    Decoded,
    RecordRefused,
    column_timestamps,
    decode_each,
    render_reports,
    report_times,
    rfc3339,
    split_concatenated,
)

Route = Literal["fast", "models", "refused"]
V2Format = Literal["base64", "json"]
STORED = None  # the body is stored (else: the v2 error_code it is refused with)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- v2 ---------------------------------------------------------------------------

V2Rows = tuple[list[bytes | None], list[bytes | None], list[int | None]]


def _records_say(raw: bytes, fmt: V2Format) -> V2Rows:
    """What an accepted body's records say: the bytes of each key and value, each partition."""
    records: list[dict[str, Any]] = json.loads(raw)["records"]
    keys = [decode_data(r.get("key"), fmt, "key") for r in records]
    values = [decode_data(r.get("value"), fmt, "value") for r in records]
    partitions = [None if r.get("partition") is None else int(r["partition"]) for r in records]
    return keys, values, partitions


def _decoded_v2(raw: bytes, fmt: V2Format, with_partition: bool) -> V2Rows | int:
    """What the decoder stores for a body, or the v2 error_code of its refusal."""
    try:
        columns = decode_v2(raw, fmt, with_partition)
    except V2Failure as failure:
        return failure.error_code
    except InvalidRecordError:
        return 42203
    partitions: list[int | None] = [None] * len(columns)
    if columns.partitions is not None and columns.named is not None:
        partitions = [
            int(p) if named else None
            for p, named in zip(columns.partitions, columns.named, strict=True)
        ]
    return columns.keys.to_pylist(), columns.values.to_pylist(), partitions


V2_EDGE_CASES: list[tuple[bytes, V2Format, bool, int | None]] = [
    (b'{"records":[{"value":"QQ=="}]}', "base64", True, STORED),
    (b'{"records":[{"key":"a2V5","value":"QQ==","partition":2147483647}]}', "base64", True, STORED),
    (b'{"records":[{"value":"QQ==","partition":1}]}', "base64", False, 422),
    (b'{"records":[{"value":"QQ=="}]}', "base64", False, STORED),
    (b'{"records":[]}', "base64", True, 422),
    (b'{"records":[null]}', "base64", True, 422),
    (b'{"records":[{"value":"QQ"}]}', "base64", True, 42203),
    (b'{"records":[{"value":"a-_b"}]}', "base64", True, 42203),
    (b'{"records":[{"value":3}]}', "base64", True, 42203),
    (b'{"records":[{"value":"QQ==","partition":-1}]}', "base64", True, 422),
    (b'{"records":[{"value":"QQ==","partition":2147483648}]}', "base64", True, 422),
    # a float with no fraction or a numeric string is a partition, as for Jackson
    (b'{"records":[{"value":"QQ==","partition":1.0}]}', "base64", True, STORED),
    (b'{"records":[{"value":"QQ==","partition":"1"}]}', "base64", True, STORED),
    (
        b'{"records":[{"value":"QQ=="}],"key_schema":null,"value_schema_id":null}',
        "base64",
        True,
        STORED,
    ),
    (b'{"records":[{"value":"QQ=="}],"key_schema":"s"}', "base64", True, 42201),
    (b'{"records":[{"value":"QQ=="}],"value_schema_id":1}', "base64", True, 42202),
    # the schema refusal comes before the data's, a shape refusal before both
    (b'{"records":[{"value":"QQ"}],"value_schema":"s"}', "base64", True, 42202),
    (b'{"records":[{"value":"QQ","x":1}],"value_schema":"s"}', "base64", True, 422),
    (b'{"records":[{"value":"QQ==","extra":1}]}', "base64", True, 422),
    (b'{"records":[{"value":"QQ=="}],"extra":1}', "base64", True, 422),
    (b'{"records":[{"value":"QQ=="}]} x', "base64", True, 400),
    (b'{"records":[{"value":"\xff"}]}', "base64", True, 400),
    (b'{"records":[{"value":"QQ==","value":"Qg=="}]}', "base64", True, STORED),
    (b'{"records":[{"value":{"b":1,"a":[1.5,"\xc3\xa9",null]},"key":"k"}]}', "json", True, STORED),
    (b'{"records":[{"value":1e400}]}', "json", True, 42203),
    (b'{"records":[{"value":NaN}]}', "json", True, 42203),
    (b'{"records":[{"value":NaN}]}', "base64", True, 42203),
    (b'{"records":[{"value":"\\ud800"}]}', "json", True, 42203),
    (b'{"records":[{"value":"a\\u0000\\n\\"\\u2028"}]}', "json", True, STORED),
    (b'{"records":[{"value":{"a":1,"a":2,"b":3}}]}', "json", True, STORED),
    (b'{"records":[{"value":123456789012345678901234567890}]}', "json", True, STORED),
    (b'{"records":[{"value":-0.0},{"value":1e16},{"value":1E-7}]}', "json", True, STORED),
]


def _random_v2(count: int) -> list[tuple[bytes, V2Format, bool, int | None]]:
    """Random bodies, each with its outcome known by construction (see the edge cases)."""
    rnd = random.Random(11)
    bodies: list[tuple[bytes, V2Format, bool, int | None]] = []
    for _ in range(count):
        fmt: V2Format = rnd.choice(["base64", "json"])
        with_partition = rnd.random() < 0.7
        misshapen = bad_data = False
        records = []
        for _ in range(rnd.randint(1, 6)):
            record: dict[str, object] = {}
            for field in ("key", "value"):
                if rnd.random() < 0.8:
                    data: object
                    if fmt == "base64":
                        data = rnd.choice([None, _b64(rnd.randbytes(rnd.randint(0, 9))), "QQ", 3])
                        bad_data |= data in ("QQ", 3)
                    else:
                        data = rnd.choice([None, "s", 3, 2.5, [1, {"x": None}], {"é": True}])
                    record[field] = data
            if rnd.random() < 0.4:
                partition = rnd.choice([0, 1, 7, None, -2, 2.0])
                # the partition route's records have no partition field
                misshapen |= partition == -2 or not with_partition
                record["partition"] = partition
            records.append(record)
        outcome = 422 if misshapen else 42203 if bad_data else STORED
        bodies.append((json.dumps({"records": records}).encode(), fmt, with_partition, outcome))
    return bodies


RANDOM_V2 = _random_v2(150)


@pytest.mark.parametrize(("raw", "fmt", "with_partition", "outcome"), V2_EDGE_CASES + RANDOM_V2)
def test_v2_body_is_stored_as_sent_or_refused_as_documented(
    raw: bytes, fmt: V2Format, with_partition: bool, outcome: int | None
) -> None:
    decoded = _decoded_v2(raw, fmt, with_partition)
    if outcome is STORED:
        assert decoded == _records_say(raw, fmt)
    else:
        assert decoded == outcome


def test_v2_random_bodies_take_every_outcome() -> None:
    assert set(Counter(outcome for *_, outcome in RANDOM_V2)) == {STORED, 422, 42203}


def test_v2_answer_is_the_models_rendering() -> None:
    partitions, offsets = [0, 5, 2, 2], [10, 0, 7, 8]
    model = V2ProduceResponse(
        offsets=[
            V2PartitionOffset(partition=p, offset=o, error_code=None, error=None)
            for p, o in zip(partitions, offsets, strict=True)
        ]
    )
    rendered = JSONResponse(model.model_dump(mode="json")).body
    assert v2_offsets_json(partitions, offsets) == rendered


@pytest.mark.parametrize("seed", range(6))
def test_v2_answer_from_arrays_is_the_models_rendering(seed: int) -> None:
    # The broker hands over numpy columns: any partitions, offsets up to int64's top.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    partitions = rng.integers(0, 1_000, n)
    offsets = rng.integers(0, 2**63 - 1, n)
    model = V2ProduceResponse(
        offsets=[
            V2PartitionOffset(partition=p, offset=o, error_code=None, error=None)
            for p, o in zip(partitions.tolist(), offsets.tolist(), strict=True)
        ]
    )
    rendered = JSONResponse(model.model_dump(mode="json")).body
    assert v2_offsets_json(partitions, offsets) == rendered


# -- v3 ---------------------------------------------------------------------------


def _slow_v3(raw: bytes) -> list[Decoded] | None:
    """The validating path's records, or None when it refuses any record of the stream."""
    items = decode_each(split_concatenated(raw.decode()))
    rows = [item for item in items if isinstance(item, Decoded)]
    return rows if len(rows) == len(items) else None


def _part(kind: str | None, data: object) -> dict[str, object]:
    part: dict[str, object] = {"data": data}
    if kind is not None:
        part["type"] = kind
    return part


V3_EDGE_CASES: list[tuple[bytes, Route]] = [
    (b'{"value":{"type":"BINARY","data":"QQ=="}}', "fast"),
    (b'{"value":{"data":"QQ=="},"key":{"type":"STRING","data":"k\xc3\xa9"}}', "fast"),
    (b'{"value":{"type":null,"data":"QQ=="},"key":{"type":"BINARY"}}', "fast"),
    (b'{"value":{"data":"QQ=="},"key":null,"partition_id":3,"headers":[]}', "fast"),
    (b'{"value":{"data":"QQ=="}}\n{"value":{"data":"Qg=="}}\r\n  {"value":null}\n', "fast"),
    (b'{\n  "value": {\n    "data": "QQ=="\n  }\n}\n{\n  "key": {"data": "Qg=="}\n}', "fast"),
    (b'{"value":{"data":"QQ=="}} {"value":{"data":"Qg=="}}', "fast"),
    (b'{"value":{"data":"QQ=="}}{"value":{"data":"Qg=="}}', "fast"),
    (b' \t{"value":{"data":"QQ=="}}\r\n', "fast"),
    (b'\x0c{"value":{"data":"QQ=="}}', "refused"),
    (b'{"value":{"type":"binary","data":"QQ=="}}', "models"),
    (b'{"value":{"type":"JSON","data":{"a":[1]}}}', "models"),
    (
        b'{"value":{"type":"BINARY","data":"QQ=="},"headers":[{"name":"h","value":"QQ=="}]}',
        "models",
    ),
    (b'{"value":{"data":"QQ=="},"timestamp":"2024-01-02T03:04:05.678Z"}', "fast"),
    (b'{"value":{"data":"QQ=="},"timestamp":"2024-01-02T03:04:05"}', "refused"),
    (b'{"value":{"data":"QQ=="},"timestamp":"yesterday"}', "refused"),
    (b'{"value":{"data":"QQ"}}', "refused"),
    (b'{"value":{"data":3}}', "refused"),
    (b'{"value":{"type":"STRING","data":3}}', "refused"),
    (b'{"value":{"type":"AVRO","data":"x"}}', "refused"),
    (b'{"value":{"data":"QQ==","schema_id":1}}', "refused"),
    (b'{"value":{"data":"QQ==","schema_id":null}}', "models"),
    (b'{"value":{"data":"QQ=="},"partition_id":-1}', "refused"),
    (b'{"value":{"data":"QQ=="},"id":"x"}', "refused"),
    (b'[{"value":{"data":"QQ=="}}]', "refused"),
    (b'{"value":{"data":"QQ=="}}\n5', "refused"),
    # a newline between two objects inside an array is not a boundary between records
    (b'{"value":{"data":"QQ=="},"headers":[{"name":"a"}\n{"name":"b"}]}', "refused"),
    (b'{"value":{"type":"JSON","data":[{"a":1}\n{"b":2}]}}', "refused"),
    (b'{"value":{"type":"STRING","data":"}\\n{"}}', "fast"),
]


def _random_v3(count: int) -> list[tuple[bytes, Route]]:
    rnd = random.Random(13)
    bodies: list[tuple[bytes, Route]] = []
    for _ in range(count):
        refused = models_only = False
        kinds = {
            "key": rnd.choice(["BINARY", "STRING", None]),
            "value": rnd.choice(["BINARY", None]),
        }
        records = []
        for _ in range(rnd.randint(1, 5)):
            record: dict[str, object] = {}
            for field, kind in kinds.items():
                if rnd.random() < 0.1:
                    record[field] = None
                elif rnd.random() < 0.9:
                    if kind == "STRING":
                        data: object = rnd.choice(["k", "ü", None])
                    else:
                        data = rnd.choice([_b64(rnd.randbytes(rnd.randint(0, 7))), None, "QQ"])
                        refused |= data == "QQ"
                    record[field] = _part(kind, data)
            if rnd.random() < 0.3:
                partition = rnd.choice([0, 4, None, -1])
                refused |= partition == -1
                record["partition_id"] = partition
            if rnd.random() < 0.1:
                record["headers"] = [{"name": "h", "value": None}]
                models_only = True
            records.append(record)
        route: Route = "refused" if refused else "models" if models_only else "fast"
        text = rnd.choice(["\n", "\n\n", "\r\n"]).join(json.dumps(r) for r in records)
        bodies.append((text.encode(), route))
    return bodies


RANDOM_V3 = _random_v3(150)


def _info(columns: V3Columns, sizes: list[int], field: Literal["key", "value"], i: int) -> object:
    present = (columns.has_key if field == "key" else columns.has_value)[i]
    kind = columns.key_kind if field == "key" else columns.value_kind
    return V3ProduceResponseData(type=kind, size=sizes[i]) if present else None


@pytest.mark.parametrize(("raw", "route"), V3_EDGE_CASES + RANDOM_V3)
def test_v3_stream_takes_its_route_and_both_paths_agree(raw: bytes, route: Route) -> None:
    fast = decode_v3_stream(raw)
    stamps = column_timestamps(fast.timestamps) if fast is not None else None
    slow = _slow_v3(raw)
    taken: Route = "fast" if stamps is not None else "models" if slow is not None else "refused"
    assert taken == route
    if fast is None or stamps is None:
        return
    assert slow is not None, "the fast path accepted a stream the models refuse"
    keys, values = fast.keys.to_pylist(), fast.values.to_pylist()
    key_sizes = [len(k or b"") for k in keys]
    value_sizes = [len(v or b"") for v in values]
    assert keys == [r.key for r in slow]
    assert values == [r.value for r in slow]
    assert fast.partitions == [r.partition for r in slow]
    assert stamps.cast("int64").to_pylist() == [r.timestamp_ms for r in slow]
    assert [_info(fast, key_sizes, "key", i) for i in range(len(slow))] == [
        r.key_info for r in slow
    ]
    assert [_info(fast, value_sizes, "value", i) for i in range(len(slow))] == [
        r.value_info for r in slow
    ]


def test_v3_random_streams_take_every_route() -> None:
    assert set(Counter(route for _, route in RANDOM_V3)) == {"fast", "models", "refused"}


def test_v3_reports_are_the_models_rendering() -> None:
    raw = (
        b'{"key":{"type":"STRING","data":"ab"},"value":{"data":"QUJD"}}\n'
        b'{"value":{"data":null}}\n{"key":{"type":"STRING"},"value":null}'
    )
    columns = decode_v3_stream(raw)
    assert columns is not None
    partitions, offsets, stamps = [1, 0, 1], [7, 3, 8], ["2024-01-02T03:04:05.678Z"] * 3
    key_sizes, value_sizes = [2, 0, 0], [3, 0, 0]
    reports = [
        V3ProduceResponse(
            error_code=200,
            cluster_id="clüster",
            topic_name='t"1',
            partition_id=p,
            offset=o,
            timestamp=t,
            key=V3ProduceResponseData(type="STRING", size=ks) if columns.has_key[i] else None,
            value=V3ProduceResponseData(type="BINARY", size=vs) if columns.has_value[i] else None,
        )
        for i, (p, o, t, ks, vs) in enumerate(
            zip(partitions, offsets, stamps, key_sizes, value_sizes, strict=True)
        )
    ]
    got = v3_report_json(
        "clüster", 't"1', columns, partitions, offsets, stamps, key_sizes, value_sizes
    )
    assert got.decode() == render_reports(reports)


@pytest.mark.parametrize("seed", range(12))
def test_v3_uniform_reports_are_the_models_rendering(seed: int) -> None:
    # The usual stream (one timestamp, one key size, one value size) is rendered from a
    # head per partition and a shared tail: still the models' rendering byte for byte.
    rnd = random.Random(seed)
    n = rnd.randint(1, 40)
    key = rnd.choice(['"key":{"type":"STRING","data":"abc"},', '"key":{"data":"QUJD"},', ""])
    value = rnd.choice(['"value":{"data":"QUJDRA=="}', '"value":{"type":"STRING","data":"x"}'])
    raw = "\n".join("{" + key + value + "}" for _ in range(n)).encode()
    columns = decode_v3_stream(raw)
    assert columns is not None
    partitions = [rnd.randrange(6) for _ in range(n)]
    offsets = [rnd.randrange(2**40) for _ in range(n)]
    stamps = ["2024-01-02T03:04:05.678Z"] * n
    key_sizes = [3 if columns.has_key[0] else 0] * n
    value_sizes = [rnd.choice([1, 4])] * n
    cluster, topic = rnd.choice([("clüster", 't"1'), ("c-1", "orders"), ("c\\", "t\u2028")])
    reports = [
        V3ProduceResponse(
            error_code=200,
            cluster_id=cluster,
            topic_name=topic,
            partition_id=p,
            offset=o,
            timestamp=t,
            key=V3ProduceResponseData(type=columns.key_kind, size=ks)
            if columns.has_key[i]
            else None,
            value=V3ProduceResponseData(type=columns.value_kind, size=vs)
            if columns.has_value[i]
            else None,
        )
        for i, (p, o, t, ks, vs) in enumerate(
            zip(partitions, offsets, stamps, key_sizes, value_sizes, strict=True)
        )
    ]
    got = v3_report_json(
        cluster, topic, columns, partitions, offsets, stamps, key_sizes, value_sizes
    )
    assert got.decode() == render_reports(reports)


def test_refusals_are_the_models_own() -> None:
    # The fast path declines; what the client sees is the models' documented message.
    (refused,) = decode_each(split_concatenated('{"value":{"data":"QQ"}}'))
    assert isinstance(refused, RecordRefused)
    assert decode_v3_stream(b'{"value":{"data":"QQ"}}') is None


@pytest.mark.parametrize(
    "stamps",
    [[1_700_000_000_123] * 5, [5, 3, 5, 3_000_000_000_000, 3], [0], []],
    ids=["one reading", "several readings", "one record", "no record"],
)
def test_report_times_render_each_record_timestamp(stamps: list[int]) -> None:
    assert report_times(np.array(stamps, np.int64)) == [rfc3339(t) for t in stamps]
