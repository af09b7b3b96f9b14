"""The REST Proxy produce shapes users send most, end to end on a real broker.

Keyed v2 binary and json bodies and newline-separated v3 streams take the
columnar path; they must land on Kafka's murmur2 partition of each key, in
request order, byte for byte, with answers in the documented shapes. The
body-level refusals the v3 path checks only for bodies the fast decoder
declines keep their status.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import httpx

from lakelog.partitioner import partition_for_key
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.test_rest_proxy import (
    BINARY_V2,
    CLUSTER,
    JSON_V2,
    V2_JSON,
    assert_v2_error,
    fetch,
)

PARTITIONS = 3


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def by_partition(http: httpx.Client, topic: str) -> dict[int, list[dict[str, Any]]]:
    return {p: fetch(http, topic, p) for p in range(PARTITIONS)}


def test_keyed_rest_produce_lands_on_murmur2_partitions(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    keys = [f"user-{i % 17}".encode() for i in range(60)]
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        for topic in ("v2b", "v2j", "v3"):
            http.post("/v1/topics", json={"name": topic, "partitions": PARTITIONS})

        # v2 binary: keyed records, one explicit partition among them
        records: list[dict[str, Any]] = [
            {"key": b64(k), "value": b64(b"v%d" % i)} for i, k in enumerate(keys)
        ]
        records[5]["partition"] = 2
        answer = http.post(
            "/topics/v2b",
            content=json.dumps({"records": records}),
            headers={"Content-Type": BINARY_V2},
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == V2_JSON
        body = answer.json()
        assert set(body) == {"key_schema_id", "value_schema_id", "offsets"}
        expected = [2 if i == 5 else partition_for_key(k, PARTITIONS) for i, k in enumerate(keys)]
        assert [o["partition"] for o in body["offsets"]] == expected
        assert all(o["error_code"] is None and o["error"] is None for o in body["offsets"])
        stored = by_partition(http, "v2b")
        for i, (k, p) in enumerate(zip(keys, expected, strict=True)):
            offset = body["offsets"][i]["offset"]
            (row,) = [r for r in stored[p] if r["offset"] == offset]
            assert (row["key"], row["value"]) == (b64(k), b64(b"v%d" % i))

        # v2 json: keys and values stored as compact JSON text
        json_records = [
            {"key": k.decode(), "value": {"n": i, "s": "é"}} for i, k in enumerate(keys)
        ]
        answer = http.post(
            "/topics/v2j",
            content=json.dumps({"records": json_records}),
            headers={"Content-Type": JSON_V2},
        )
        assert answer.status_code == 200, answer.text
        offsets = answer.json()["offsets"]
        assert [o["partition"] for o in offsets] == [
            partition_for_key(b'"' + k + b'"', PARTITIONS) for k in keys
        ]
        stored = by_partition(http, "v2j")
        first = offsets[0]
        (row,) = [r for r in stored[first["partition"]] if r["offset"] == first["offset"]]
        assert base64.b64decode(row["value"]) == '{"n":0,"s":"é"}'.encode()

        # v3: a newline-separated stream, STRING keys and BINARY values
        stream = "\n".join(
            json.dumps(
                {"key": {"type": "STRING", "data": k.decode()}, "value": {"data": b64(b"x" * i)}}
            )
            for i, k in enumerate(keys)
        )
        answer = http.post(
            f"/v3/clusters/{CLUSTER}/topics/v3/records",
            content=stream,
            headers={"Content-Type": "application/json"},
        )
        assert answer.status_code == 200, answer.text
        reports = [json.loads(line) for line in answer.text.splitlines()]
        assert len(reports) == len(keys)
        for i, (k, report) in enumerate(zip(keys, reports, strict=True)):
            assert report["error_code"] == 200
            assert report["partition_id"] == partition_for_key(k, PARTITIONS)
            assert report["key"] == {"type": "STRING", "size": len(k)}
            assert report["value"] == {"type": "BINARY", "size": i}
            assert report["cluster_id"] == CLUSTER and report["topic_name"] == "v3"
            assert report["timestamp"].endswith("Z")
        stored = by_partition(http, "v3")
        for p in range(PARTITIONS):  # request order within each partition
            mine = [i for i, k in enumerate(keys) if partition_for_key(k, PARTITIONS) == p]
            assert [base64.b64decode(r["value"]) for r in stored[p]] == [b"x" * i for i in mine]


def test_rest_produce_body_refusals_keep_their_status(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        http.post("/v1/topics", json={"name": "t", "partitions": 1}).raise_for_status()
        path = f"/v3/clusters/{CLUSTER}/topics/t/records"
        for content, status in ((b"", 422), (b" \n\t", 422), (b'{"value":{"data":"\xff"}}', 400)):
            answer = http.post(path, content=content, headers={"Content-Type": "application/json"})
            assert answer.status_code == status, answer.text
            assert answer.json()["error_code"] == status
        # a lone surrogate is not text: refused as bad record data, nothing stored
        lone = b'{"records":[{"value":"\\ud800"}]}'
        assert_v2_error(
            http.post("/topics/t", content=lone, headers={"Content-Type": JSON_V2}), 422, 42203
        )
        assert fetch(http, "t", 0) == []
