"""Kafka REST Proxy compatibility (v2 and v3) against a real broker, local root and S3.

Records produced through the proxy APIs are read back through the native
fetch API and compared byte for byte. v3 answers are checked against the
shapes a REST Proxy client expects (``tests/server/rest_proxy_v3_shapes.py``).
"""

from __future__ import annotations

import base64
import copy
import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest

from lakelog.catalog import Catalog
from lakelog.records import Record
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.rest_proxy_v3_shapes import assert_shape

V2_JSON = "application/vnd.kafka.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
CLUSTER = "lakelog"  # the broker's default cluster_id
#: One record with a partition, headers, a BINARY key and a JSON value.
PRODUCE_EXAMPLE: dict[str, Any] = {
    "partition_id": 1,
    "headers": [
        {"name": "trace-id", "value": base64.b64encode(b"abc-123").decode()},
        {"name": "origin", "value": base64.b64encode(b"checkout").decode()},
    ],
    "key": {"type": "BINARY", "data": base64.b64encode(b"foobar").decode()},
    "value": {"type": "JSON", "data": {"order": 17, "items": ["pen", "ink"]}},
}
#: A batch of two STRING records.
BATCH_EXAMPLE: dict[str, Any] = {
    "entries": [
        {"id": "1", "value": {"type": "STRING", "data": "first order"}},
        {"id": "2", "value": {"type": "STRING", "data": "second order"}},
    ]
}


# -- helpers -----------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def post_v2(http: httpx.Client, path: str, body: Any, kind: str = BINARY_V2) -> httpx.Response:
    return http.post(path, content=json.dumps(body), headers={"Content-Type": kind})


def fetch(http: httpx.Client, topic: str, partition: int) -> list[dict[str, Any]]:
    """Every record of a partition through the native API, keys/values/headers in base64."""
    got = http.get(
        f"/v1/topics/{topic}/partitions/{partition}/records",
        params={"offset": 0, "key_format": "base64", "value_format": "base64"},
    )
    assert got.status_code == 200, got.text
    records: list[dict[str, Any]] = got.json()["records"]
    return records


def stored(http: httpx.Client, topic: str, partitions: int) -> dict[tuple[int, int], Any]:
    """(partition, offset) -> (key, value) as stored, base64 (or None)."""
    return {
        (p, r["offset"]): (r["key"], r["value"])
        for p in range(partitions)
        for r in fetch(http, topic, p)
    }


def concatenated(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    values, position = [], 0
    while text[position:].strip():
        while text[position].isspace():
            position += 1
        value, position = decoder.raw_decode(text, position)
        values.append(value)
    return values


def assert_v2_error(response: httpx.Response, status: int, code: int) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == V2_JSON
    body = response.json()
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == code, body
    assert isinstance(body["message"], str) and body["message"]


# -- v2 ----------------------------------------------------------------------------------


def test_v2_round_trip_metadata_and_errors(
    root: RootSpec,
    start_broker: Callable[..., BrokerProcess],
    make_catalog: Callable[..., Catalog],
) -> None:
    broker = start_broker(root)
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        created = http.post(
            "/v1/topics",
            json={"name": "events", "partitions": 2, "configs": {"retention.ms": "86400000"}},
        )
        assert created.status_code == 201, created.text

        http.post("/v1/topics", json={"name": "audit", "partitions": 1}).raise_for_status()
        listed = http.get("/topics")
        assert listed.status_code == 200 and listed.headers["content-type"] == V2_JSON
        assert listed.json() == ["audit", "events"]

        topic = http.get("/topics/events")
        assert topic.status_code == 200 and topic.headers["content-type"] == V2_JSON
        described = topic.json()
        assert set(described) == {"name", "configs", "partitions"}
        assert described["name"] == "events"
        assert described["configs"]["retention.ms"] == "86400000"
        assert described["configs"]["cleanup.policy"] == "delete"
        assert all(isinstance(v, str) for v in described["configs"].values())
        # the broker answering leads every partition; it is the one live broker
        brokers = http.get("/brokers")
        assert brokers.status_code == 200 and brokers.headers["content-type"] == V2_JSON
        (leader,) = brokers.json()["brokers"]
        assert isinstance(leader, int)
        replica = {"broker": leader, "leader": True, "in_sync": True}
        expected_partitions = [
            {"partition": p, "leader": leader, "replicas": [replica]} for p in range(2)
        ]
        assert described["partitions"] == expected_partitions
        assert http.get("/topics/events/partitions").json() == expected_partitions
        one = http.get("/topics/events/partitions/1")
        assert one.headers["content-type"] == V2_JSON
        assert one.json() == expected_partitions[1]

        # produce, binary embedded format (keys and values base64), as in the v2 docs
        sent: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
        binary: list[dict[str, Any]] = [
            {"key": b64(b"key"), "value": b64(b"confluent")},
            {"value": b64(b"kafka"), "partition": 1},
            {"value": b64(b"logs")},
            {"key": b64(b"key"), "value": None},
        ]
        answer = post_v2(http, "/topics/events", {"records": binary})
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == V2_JSON
        body = answer.json()
        assert body["key_schema_id"] is None and body["value_schema_id"] is None
        assert len(body["offsets"]) == len(binary)
        for record, offset in zip(binary, body["offsets"], strict=True):
            assert offset["error_code"] is None and offset["error"] is None
            assert set(offset) == {"partition", "offset", "error_code", "error"}
            key = base64.b64decode(record["key"]) if record.get("key") else None
            value = base64.b64decode(record["value"]) if record["value"] else None
            sent[(offset["partition"], offset["offset"])] = (key, value)
        assert body["offsets"][1]["partition"] == 1
        # the same key lands in the same partition
        assert body["offsets"][0]["partition"] == body["offsets"][3]["partition"]

        # produce, json embedded format (stored as compact JSON text)
        embedded: list[dict[str, Any]] = [
            {"key": "somekey", "value": {"foo": "bar"}},
            {"value": ["foo", "bar"], "partition": 1},
            {"value": 53.5},
        ]
        answer = post_v2(http, "/topics/events", {"records": embedded}, JSON_V2)
        assert answer.status_code == 200, answer.text
        for record, offset in zip(embedded, answer.json()["offsets"], strict=True):
            assert offset["error_code"] is None
            key = json.dumps(record["key"]).encode() if "key" in record else None
            value = json.dumps(record["value"], separators=(",", ":")).encode()
            sent[(offset["partition"], offset["offset"])] = (key, value)

        # produce to one partition; a content type without embedded format is binary
        for kind in (BINARY_V2, V2_JSON):
            records = [{"value": b64(f"p0-{kind}-{i}".encode())} for i in range(3)]
            answer = post_v2(http, "/topics/events/partitions/0", {"records": records}, kind)
            assert answer.status_code == 200, answer.text
            offsets = answer.json()["offsets"]
            assert [o["partition"] for o in offsets] == [0, 0, 0]
            assert [o["offset"] for o in offsets] == list(
                range(offsets[0]["offset"], offsets[0]["offset"] + 3)
            )
            for record, offset in zip(records, offsets, strict=True):
                sent[(0, offset["offset"])] = (None, base64.b64decode(record["value"]))

        # read everything back through the native fetch API
        expected = {
            at: (b64(k) if k is not None else None, b64(v) if v is not None else None)
            for at, (k, v) in sent.items()
        }
        assert stored(http, "events", 2) == expected

        # offsets agree with the native API
        native = http.get("/v1/topics/events/offsets").json()["partitions"]
        for p in range(2):
            got = http.get(f"/topics/events/partitions/{p}/offsets")
            assert got.headers["content-type"] == V2_JSON
            assert got.json() == {
                "beginning_offset": native[p]["log_start_offset"],
                "end_offset": native[p]["high_watermark"],
            }
            assert got.json()["end_offset"] == sum(1 for q, _ in sent if q == p)

        # another writer's commits (as another broker's) count in the offsets of this one
        before = http.get("/topics/events/partitions/1/offsets").json()["end_offset"]
        make_catalog().topic("events").append([Record(value=b"elsewhere", partition=1)])
        deadline = time.monotonic() + 10
        while http.get("/topics/events/partitions/1/offsets").json()["end_offset"] == before:
            if time.monotonic() >= deadline:  # a hang guard, not a speed check
                pytest.fail("the other writer's record never showed up")
            time.sleep(0.05)
        assert http.get("/topics/events/partitions/1/offsets").json() == {
            "beginning_offset": 0,
            "end_offset": before + 1,
        }

        check_v2_errors(http)


def check_v2_errors(http: httpx.Client) -> None:
    """Every kind of v2 error has the v2 shape and code, and writes nothing."""
    http.post("/v1/topics", json={"name": "t", "partitions": 2}).raise_for_status()
    good = {"records": [{"value": b64(b"x")}]}

    # unknown topic: 40401 wherever it is named
    assert_v2_error(http.get("/topics/nope"), 404, 40401)
    assert_v2_error(http.get("/topics/nope/partitions"), 404, 40401)
    assert_v2_error(http.get("/topics/nope/partitions/0"), 404, 40401)
    assert_v2_error(http.get("/topics/nope/partitions/0/offsets"), 404, 40401)
    assert_v2_error(post_v2(http, "/topics/nope", good), 404, 40401)
    assert_v2_error(post_v2(http, "/topics/nope/partitions/0", good), 404, 40401)
    assert_v2_error(http.get("/topics/bad$name"), 404, 40401)

    # unknown partition: 40402
    assert_v2_error(http.get("/topics/t/partitions/2"), 404, 40402)
    assert_v2_error(http.get("/topics/t/partitions/-1"), 404, 40402)
    assert_v2_error(http.get("/topics/t/partitions/x/offsets"), 404, 40402)
    # "³" passes str.isdigit() but not int(): it is an unknown partition, not a 500
    assert_v2_error(http.get("/topics/t/partitions/³"), 404, 40402)
    assert_v2_error(http.get("/topics/t/partitions/³/offsets"), 404, 40402)
    assert_v2_error(http.get("/topics/t/partitions/9/offsets"), 404, 40402)
    assert_v2_error(post_v2(http, "/topics/t/partitions/2", good), 404, 40402)
    beyond = {"records": [{"value": b64(b"x")}, {"value": b64(b"y"), "partition": 2}]}
    assert_v2_error(post_v2(http, "/topics/t", beyond), 404, 40402)

    # record data that is not what the embedded format says
    bad_b64 = {"records": [{"value": b64(b"ok")}, {"value": "not base64!"}]}
    assert_v2_error(post_v2(http, "/topics/t", bad_b64), 422, 42203)
    not_string = {"records": [{"key": 12, "value": b64(b"x")}]}
    assert_v2_error(post_v2(http, "/topics/t", not_string), 422, 42203)

    # content types without a supported embedded format
    for kind in ("application/json", "text/plain", "application/vnd.kafka.xml.v2+json"):
        assert_v2_error(post_v2(http, "/topics/t", good, kind), 415, 415)
    assert_v2_error(
        http.post("/topics/t", content=json.dumps(good).encode()), 415, 415
    )  # no content type at all

    # schemas are for the schema'd embedded formats
    with_key_schema = {**good, "key_schema": '{"type": "string"}'}
    assert_v2_error(post_v2(http, "/topics/t", with_key_schema), 422, 42201)
    with_value_schema_id = {**good, "value_schema_id": 7}
    assert_v2_error(post_v2(http, "/topics/t", with_value_schema_id), 422, 42202)
    nulls_are_fine = {**good, "key_schema": None, "value_schema_id": None}
    assert post_v2(http, "/topics/t", nulls_are_fine).status_code == 200

    # malformed and misshapen bodies
    malformed = http.post("/topics/t", content=b"{oops", headers={"Content-Type": BINARY_V2})
    assert_v2_error(malformed, 400, 400)
    assert_v2_error(post_v2(http, "/topics/t", {"records": []}), 422, 422)
    assert_v2_error(post_v2(http, "/topics/t", {"rekords": []}), 422, 422)
    unknown_field = {"records": [{"value": b64(b"x"), "headers": []}]}
    assert_v2_error(post_v2(http, "/topics/t", unknown_field), 422, 422)
    with_partition = {"records": [{"value": b64(b"x"), "partition": 0}]}
    assert_v2_error(post_v2(http, "/topics/t/partitions/0", with_partition), 422, 422)

    # only the one good request above was written
    ends = [http.get(f"/topics/t/partitions/{p}/offsets").json()["end_offset"] for p in (0, 1)]
    assert sum(ends) == 1


# -- v3 ----------------------------------------------------------------------------------


def assert_report_ok(report: dict[str, Any], topic: str) -> None:
    assert_shape("ProduceResponse", report)
    assert report["error_code"] == 200, report
    assert report["cluster_id"] == CLUSTER and report["topic_name"] == topic
    assert datetime.fromisoformat(report["timestamp"]).tzinfo is not None


def test_v3_produce_single_streamed_and_batch(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    base = f"/v3/clusters/{CLUSTER}/topics/orders"
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        http.post("/v1/topics", json={"name": "orders", "partitions": 2}).raise_for_status()

        cluster = http.get(f"/v3/clusters/{CLUSTER}")
        assert cluster.status_code == 200, cluster.text
        assert_shape("Cluster", cluster.json())
        assert cluster.json()["cluster_id"] == CLUSTER
        assert cluster.json()["metadata"]["self"] == f"{broker.url}/v3/clusters/{CLUSTER}"
        assert_shape("ClusterList", http.get("/v3/clusters").json())

        # one record with headers, a BINARY key and a JSON value
        example = copy.deepcopy(PRODUCE_EXAMPLE)
        single = http.post(f"{base}/records", json=example)
        assert single.status_code == 200, single.text
        assert single.headers["content-type"].startswith("application/json")
        report = single.json()  # one record: one JSON object
        assert_report_ok(report, "orders")
        value_bytes = json.dumps(example["value"]["data"], separators=(",", ":")).encode()
        assert report["partition_id"] == example["partition_id"] == 1
        assert report["offset"] == 0
        assert report["key"] == {"type": "BINARY", "size": len(b"foobar")}
        assert report["value"] == {"type": "JSON", "size": len(value_bytes)}
        (back,) = fetch(http, "orders", 1)
        assert back["key"] == b64(b"foobar") and back["value"] == b64(value_bytes)
        assert back["headers"] == [
            {"key": h["name"], "value": h["value"]} for h in example["headers"]
        ]

        # several records as concatenated JSON, one of them invalid, one to a missing partition
        stream = [
            {"partition_id": 0, "value": {"type": "STRING", "data": "first"}},
            {"partition_id": 0, "value": {"type": "BINARY", "data": 1}},
            {
                "partition_id": 0,
                "key": {"type": "STRING", "data": "k"},
                "value": {"type": "JSON", "data": [1, 2]},
                "timestamp": "2021-02-05T19:14:42Z",
            },
            {"partition_id": 7, "value": {"type": "STRING", "data": "nowhere"}},
            {"partition_id": 0, "value": {"data": b64(b"\x00\xff")}},
        ]
        body = (
            json.dumps(stream[0])
            + json.dumps(stream[1])
            + "\n"
            + "\n".join(json.dumps(s) for s in stream[2:])
        )
        streamed = http.post(
            f"{base}/records", content=body.encode(), headers={"Content-Type": "application/json"}
        )
        assert streamed.status_code == 200, streamed.text
        reports = concatenated(streamed.text)
        assert len(reports) == len(stream)
        for item in reports:
            assert_shape("ProduceResponse", item)
        assert [r["error_code"] for r in reports] == [200, 400, 200, 404, 200]
        assert "base64" in reports[1]["message"]
        assert "partition 7" in reports[3]["message"]
        for i in (0, 2, 4):
            assert_report_ok(reports[i], "orders")
        assert [reports[i]["offset"] for i in (0, 2, 4)] == [0, 1, 2]
        assert reports[2]["timestamp"] == "2021-02-05T19:14:42.000Z"
        assert reports[2]["key"] == {"type": "STRING", "size": 1}
        assert reports[4]["value"] == {"type": "BINARY", "size": 2}
        assert "key" not in reports[0]
        partition0 = fetch(http, "orders", 0)
        assert [r["value"] for r in partition0] == [b64(b"first"), b64(b"[1,2]"), b64(b"\x00\xff")]
        assert partition0[1]["timestamp_ms"] == 1612552482000
        assert partition0[1]["key"] == b64(b"k")

        # a batch of STRING records, plus an invalid entry
        batch = copy.deepcopy(BATCH_EXAMPLE)
        batch["entries"].append({"id": "3", "value": {"type": "BINARY", "data": "%%"}})
        answer = http.post(f"{base}/records:batch", json=batch)
        assert answer.status_code == 207, answer.text
        result = answer.json()
        assert_shape("BatchResponse", result)
        for success in result["successes"]:
            assert_shape("BatchSuccess", success)
        for failure in result["failures"]:
            assert_shape("BatchFailure", failure)
        assert [s["id"] for s in result["successes"]] == ["1", "2"]
        assert [(f["id"], f["error_code"]) for f in result["failures"]] == [("3", 400)]
        written = {
            (s["partition_id"], s["offset"]): s["value"]["size"] for s in result["successes"]
        }
        data = stored(http, "orders", 2)
        for entry, success in zip(batch["entries"], result["successes"], strict=False):
            at = (success["partition_id"], success["offset"])
            assert data[at][1] == b64(entry["value"]["data"].encode())
            assert written[at] == len(entry["value"]["data"].encode())

        # errors of the whole request: the v3 Error shape
        for response, status in [
            (http.post("/v3/clusters/other/topics/orders/records", json=example), 404),
            (http.post(f"/v3/clusters/{CLUSTER}/topics/nope/records", json=example), 404),
            (http.post(f"/v3/clusters/{CLUSTER}/topics/nope/records:batch", json=batch), 404),
            (
                http.post(f"{base}/records", content=b"{}", headers={"Content-Type": "text/plain"}),
                415,
            ),
            (
                http.post(
                    f"{base}/records", content=b" \n", headers={"Content-Type": "application/json"}
                ),
                422,
            ),
            (http.post(f"{base}/records:batch", json={"entries": [{"id": "1"}, {"id": "1"}]}), 400),
            (http.post(f"{base}/records:batch", json={"records": []}), 400),
        ]:
            assert response.status_code == status, response.text
            assert_shape("Error", response.json())
            assert response.json()["error_code"] == status
        assert len(stored(http, "orders", 2)) == 1 + 3 + 2  # nothing more was written
