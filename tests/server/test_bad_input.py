"""Bad input to a real broker: a precise error, and stored data left exactly as it was.

Every case checks the HTTP status, the Kafka error code and name, that the
message names what is wrong, and that no file under the storage root was
created, changed or removed (local roots: every file's bytes; S3: every
object's bytes under the root's prefixes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.ipc
import pytest

from lakelog.client import Producer
from lakelog.errors import InvalidTopicError
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.fixtures.snapshots import RootSnapshots

ARROW = "application/vnd.apache.arrow.stream"
MAX_REQUEST_BYTES = 4_000
ERROR_NAMES = {
    1: "OFFSET_OUT_OF_RANGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    10: "MESSAGE_TOO_LARGE",
    17: "INVALID_TOPIC_EXCEPTION",
    18: "RECORD_LIST_TOO_LARGE",
    21: "INVALID_REQUIRED_ACKS",
    32: "INVALID_TIMESTAMP",
    36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS",
    38: "INVALID_REPLICATION_FACTOR",
    40: "INVALID_CONFIG",
    42: "INVALID_REQUEST",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    87: "INVALID_RECORD",
}


class BadInput:
    """A broker with two topics holding data, and the checks every bad request must pass."""

    def __init__(self, root: RootSpec, broker: BrokerProcess) -> None:
        self.snapshots = RootSnapshots(root)
        self.http = httpx.Client(base_url=broker.url, timeout=60)
        self.before = self.snapshots.take()
        self.watermarks = self.offsets()
        self.checked = 0

    def offsets(self) -> dict[str, list[int]]:
        return {
            topic: [
                p["high_watermark"]
                for p in self.http.get(f"/v1/topics/{topic}/offsets").json()["partitions"]
            ]
            for topic in ("t", "compacted")
        }

    def expect(
        self, response: httpx.Response, status: int, code: int, *words: str
    ) -> dict[str, Any]:
        """The error answer, and the root unchanged by the request that caused it."""
        context = f"{response.request.method} {response.request.url}: {response.text}"
        assert response.status_code == status, context
        assert response.headers["content-type"].startswith("application/json"), context
        body: dict[str, Any] = response.json()
        assert body["error_code"] == code, context
        assert body["error"] == ERROR_NAMES[code], context
        assert isinstance(body["retriable"], bool) and not body["retriable"], context
        for word in words:
            assert word.lower() in body["message"].lower(), f"{word!r} not named: {context}"
        assert self.snapshots.take() == self.before, f"stored files changed by {context}"
        self.checked += 1
        return body

    def produce(self, topic: str = "t", **kwargs: Any) -> httpx.Response:
        return self.http.post(f"/v1/topics/{topic}/records", **kwargs)

    def fetch(self, partition: int | str = 0, topic: str = "t", **params: Any) -> httpx.Response:
        return self.http.get(f"/v1/topics/{topic}/partitions/{partition}/records", params=params)

    def close(self) -> None:
        assert self.offsets() == self.watermarks, "a refused request changed an offset"
        self.http.close()


def seed(broker: BrokerProcess) -> None:
    """Two topics holding data: a plain one and a compacted one with a small record limit."""
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        for body in (
            {"name": "t", "partitions": 2},
            {
                "name": "compacted",
                "configs": {"cleanup.policy": "compact", "max.message.bytes": "100"},
            },
        ):
            response = http.post("/v1/topics", json=body)
            assert response.status_code == 201, response.text
        for topic, records in (
            ("t", [{"key": f"k{i}", "value": f"v{i}", "partition": i % 2} for i in range(6)]),
            ("compacted", [{"key": "k", "value": "small"}]),
        ):
            response = http.post(f"/v1/topics/{topic}/records", json={"records": records})
            assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def bad_broker(
    module_root: RootSpec, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    """One broker for the module's tests. A refused request changes nothing, and the few
    valid writes (a sequence's first batch, a group's offsets) are read by no other test."""
    broker = start_module_broker(
        module_root,
        max_request_bytes=MAX_REQUEST_BYTES,
        fetch_max_wait_ms=1_000,
        heartbeat_interval_ms=60_000,
    )
    seed(broker)
    return broker


@pytest.fixture
def bad(module_root: RootSpec, bad_broker: BrokerProcess) -> Iterator[BadInput]:
    """The checks of one test: the root and offsets as the test found them must stay so,
    and the broker logs no traceback while the test runs."""
    logged = len(bad_broker.log())
    checks = BadInput(module_root, bad_broker)
    yield checks
    checks.close()
    during = bad_broker.log()[logged:]
    assert "Traceback" not in during, during


def arrow_body(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def test_malformed_and_misshapen_produce_bodies(bad: BadInput) -> None:
    json_type = {"content-type": "application/json"}
    bad.expect(
        bad.produce(content=b'{"records": [{"value": "x"}', headers=json_type),
        400,
        42,
        "malformed JSON",
    )
    bad.expect(bad.produce(content=b"", headers=json_type), 400, 42, "JSON")
    bad.expect(bad.produce(json=[{"value": "x"}]), 422, 42, "object")
    bad.expect(bad.produce(json={"records": "x"}), 422, 42, "records")
    bad.expect(bad.produce(json={"records": []}), 422, 42, "records")
    bad.expect(bad.produce(json={"recs": [{"value": "x"}]}), 422, 42, "records", "recs")
    bad.expect(bad.produce(json={"records": [{"valu": "x"}]}), 422, 42, "valu")
    bad.expect(
        bad.produce(json={"records": [{"value": "x", "partition": "one"}]}), 422, 42, "partition"
    )
    bad.expect(
        bad.produce(json={"records": [{"value": "x", "partition": -1}]}), 422, 42, "partition"
    )
    bad.expect(bad.produce(json={"records": [{"value": 5}]}), 400, 87, "records[0].value", "string")
    bad.expect(
        bad.produce(json={"records": [{"value": "x", "headers": [{"key": "h", "value": 1}]}]}),
        400,
        87,
        "records[0].headers[0]",
    )
    bad.expect(
        bad.produce(json={"records": [{"value": "x"}], "key_format": "xml"}), 422, 42, "key_format"
    )
    bad.expect(
        bad.produce(json={"records": [{"value": "x"}], "producer_id": 1}),
        400,
        42,
        "producer_id",
        "sequence",
    )
    bad.expect(
        bad.produce(json={"records": [{"value": "x"}]}, params={"sequence": 0}),
        400,
        42,
        "producer_id",
        "sequence",
    )
    # Bad base64, and JSON that is not JSON (NaN) in the json format.
    bad.expect(
        bad.produce(json={"records": [{"value": "not base64!"}], "value_format": "base64"}),
        400,
        87,
        "records[0].value",
        "base64",
    )
    bad.expect(
        bad.produce(json={"records": [{"value": "x", "key": "%%%"}], "key_format": "base64"}),
        400,
        87,
        "records[0].key",
        "base64",
    )
    bad.expect(
        bad.produce(
            content=b'{"value_format": "json", "records": [{"value": NaN}]}', headers=json_type
        ),
        400,
        87,
        "records[0].value",
        "NaN",
    )
    # A timestamp the log cannot store, and one before the epoch.
    bad.expect(
        bad.produce(json={"records": [{"value": "x", "timestamp_ms": 2**62}]}),
        422,
        42,
        "timestamp_ms",
    )
    bad.expect(
        bad.produce(json={"records": [{"value": "x", "timestamp_ms": -1}]}), 422, 42, "timestamp_ms"
    )
    # Unsupported content types.
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml"):
        bad.expect(
            bad.produce(content=b"value=x", headers={"content-type": content_type}),
            415,
            42,
            "content type",
            content_type,
        )

    check_arrow_bodies(bad)


def check_arrow_bodies(bad: BadInput) -> None:
    def send(body: bytes, **params: Any) -> httpx.Response:
        return bad.produce(content=body, headers={"content-type": ARROW}, params=params)

    bad.expect(send(b""), 400, 42, "empty Arrow")
    bad.expect(send(b"definitely not arrow"), 400, 42, "malformed Arrow")
    valid = arrow_body(pa.table({"value": pa.array([b"x"] * 10, pa.binary())}))
    bad.expect(send(valid[: len(valid) // 2]), 400, 42, "malformed Arrow")
    bad.expect(send(arrow_body(pa.table({"key": pa.array([b"k"], pa.binary())}))), 400, 87, "value")
    bad.expect(send(arrow_body(pa.table({"value": [b"x"], "colour": ["red"]}))), 400, 87, "colour")
    bad.expect(
        send(arrow_body(pa.table({"value": [b"x"], "partition": ["zero"]}))), 400, 87, "schema"
    )
    repeated = pa.Table.from_arrays([pa.array([b"a"]), pa.array([b"b"])], names=["value", "value"])
    bad.expect(send(arrow_body(repeated)), 400, 87, "value", "more than once")
    forged = pa.table(
        {
            "value": [b"x"],
            "producer_id": pa.array([7], pa.int64()),
            "sequence": pa.array([0], pa.int32()),
        }
    )
    bad.expect(send(arrow_body(forged)), 400, 87, "producer_id", "query parameters")
    empty = pa.table({"value": pa.array([], pa.binary())})
    bad.expect(send(arrow_body(empty)), 400, 42, "at least one record")
    late = pa.table({"value": [b"x"], "timestamp": pa.array([2**62], pa.int64())})
    bad.expect(send(arrow_body(late)), 400, 32, "timestamp", "9999")
    early = pa.table({"value": [b"x"], "timestamp": pa.array([-5], pa.int64())})
    bad.expect(send(arrow_body(early)), 400, 32, "timestamp", "-5")
    bad.expect(send(valid, partition=2), 404, 3, "partition 2")


def test_unknown_and_invalid_topics_and_partitions(bad: BadInput) -> None:
    check_invalid_topic_names(bad)
    record = {"records": [{"value": "x"}]}
    bad.expect(bad.produce("nope", json=record), 404, 3, "nope", "does not exist")
    bad.expect(bad.fetch(0, "nope"), 404, 3, "nope")
    for path in (
        "/v1/topics/nope",
        "/v1/topics/nope/offsets",
        "/v1/topics/nope/partitions/0/offsets",
    ):
        bad.expect(bad.http.get(path), 404, 3, "nope")
    bad.expect(bad.http.delete("/v1/topics/nope"), 404, 3, "nope")
    bad.expect(
        bad.http.patch("/v1/topics/nope/configs", json={"set": {"retention.ms": "1"}}),
        404,
        3,
        "nope",
    )
    bad.expect(bad.http.post("/v1/topics/nope/partitions", json={"count": 3}), 404, 3, "nope")
    bad.expect(
        bad.produce(json={"records": [{"value": "x", "partition": 5}]}),
        404,
        3,
        "partition 5",
        "2 partitions",
    )
    bad.expect(
        bad.produce(
            json={"records": [{"value": "a", "partition": 0}, {"value": "b", "partition": 2}]}
        ),
        404,
        3,
        "partition 2",
    )
    bad.expect(bad.produce(json=record, params={"partition": 9}), 404, 3, "partition 9")
    bad.expect(bad.fetch(7), 404, 3, "partition 7")
    bad.expect(bad.http.get("/v1/topics/t/partitions/7/offsets"), 404, 3, "partition 7")


INVALID_NAMES = [  # (name, as a path segment, words the message must hold)
    ("../x", "..%2Fx", ("'../x'", "illegal")),
    ("", "", ("non-empty",)),
    ("a" * 250, "a" * 250, ("250", "249")),
    ("a b", "a%20b", ("'a b'", "illegal")),
    ("tab\tname", "tab%09name", ("illegal",)),
    ("..", None, ("'..'",)),  # ".." in a path is resolved by the client before it is sent
]


def check_invalid_topic_names(bad: BadInput) -> None:
    record = {"records": [{"value": "x"}]}
    for name, in_path, words in INVALID_NAMES:
        bad.expect(bad.http.post("/v1/topics", json={"name": name}), 400, 17, *words)
        if in_path is None:
            continue
        bad.expect(bad.http.post(f"/v1/topics/{in_path}/records", json=record), 400, 17, *words)
        bad.expect(bad.http.get(f"/v1/topics/{in_path}/partitions/0/records"), 400, 17, *words)


def test_too_large_and_keyless_records(bad: BadInput) -> None:
    # The topic's max.message.bytes (100) against one record's key + value + headers.
    bad.expect(
        bad.produce("compacted", json={"records": [{"key": "k", "value": "x" * 150}]}),
        413,
        10,
        "max.message.bytes=100",
        "record 0",
    )
    bad.expect(
        bad.produce(
            "compacted",
            json={
                "records": [
                    {"key": "k", "value": "ok"},
                    {"key": "k", "value": "y", "headers": [{"key": "h", "value": "z" * 120}]},
                ]
            },
        ),
        413,
        10,
        "record 1",
    )
    # The broker's max_request_bytes against the whole body, declared or streamed.
    big = {"records": [{"value": "x" * 1_000} for _ in range(5)]}
    body = bad.expect(bad.produce(json=big), 413, 18, str(MAX_REQUEST_BYTES))
    assert "exceeds" in body["message"]

    def chunks() -> Iterator[bytes]:
        yield b'{"records": ['
        for i in range(10):
            yield (b"," if i else b"") + b'{"value": "' + b"y" * 1_000 + b'"}'
        yield b"]}"

    bad.expect(
        bad.produce(content=chunks(), headers={"content-type": "application/json"}),
        413,
        18,
        str(MAX_REQUEST_BYTES),
    )
    arrow = arrow_body(pa.table({"value": pa.array([b"z" * 2_000] * 3, pa.binary())}))
    bad.expect(bad.produce(content=arrow, headers={"content-type": ARROW}), 413, 18, "limit")

    # A compacted topic refuses records without a key.
    bad.expect(
        bad.produce("compacted", json={"records": [{"value": "no key"}]}),
        400,
        87,
        "compacted",
        "key",
    )
    body = bad.expect(
        bad.produce(
            "compacted", json={"records": [{"key": "k", "value": "a"}, {"key": None, "value": "b"}]}
        ),
        400,
        87,
        "record 1",
        "compacted",
        "key",
    )
    assert body["details"] == {"record_index": 1}
    # Each refusal names the record at fault, in the message and in details.record_index.
    records: list[dict[str, object]] = [{"value": "ok", "partition": 0} for _ in range(3)]
    records.insert(2, {"value": "far", "partition": 7})
    body = bad.expect(bad.produce(json={"records": records}), 404, 3, "record 2", "partition 7")
    assert body["details"] == {"record_index": 2}


def test_bad_parameters_and_sequence_gap(bad: BadInput) -> None:
    body = bad.expect(bad.fetch(0, offset=1_000), 416, 1, "offset 1000", "out of range", "0..3")
    assert body["details"] == {"log_start_offset": 0, "high_watermark": 3}
    bad.expect(bad.fetch(0, offset=2**70), 416, 1, "out of range")
    bad.expect(bad.fetch(0, offset="abc"), 400, 42, "offset", "abc")
    bad.expect(bad.fetch(0, offset="-5"), 400, 42, "offset", "-5")
    bad.expect(bad.fetch(0, offset="²"), 400, 42, "offset")
    bad.expect(bad.fetch(0, max_records=0), 422, 42, "max_records")
    bad.expect(bad.fetch(0, max_records="many"), 422, 42, "max_records")
    bad.expect(bad.fetch(0, max_bytes=-1), 422, 42, "max_bytes")
    bad.expect(bad.fetch(0, max_wait_ms=5_000), 400, 42, "max_wait_ms", "1000")
    bad.expect(bad.fetch(0, format="xml"), 422, 42, "format")
    bad.expect(bad.fetch(0, value_format="utf-16"), 422, 42, "value_format")
    bad.expect(bad.fetch("first"), 422, 42, "partition")
    bad.expect(bad.fetch(-1), 422, 42, "partition")
    # Stored values that are not JSON cannot be fetched in the json format.
    bad.expect(bad.fetch(0, value_format="json"), 400, 42, "not JSON", "offset 0")
    offsets = "/v1/topics/t/partitions/0/offsets"
    bad.expect(bad.http.get(offsets, params={"timestamp": "yesterday"}), 400, 42, "timestamp")
    bad.expect(bad.http.get(offsets, params={"timestamp": "¹²"}), 400, 42, "timestamp")
    for acks in ("2", "-2", "none", ""):
        bad.expect(
            bad.produce(json={"records": [{"value": "x"}]}, params={"acks": acks}), 400, 21, "acks"
        )
    bad.expect(
        bad.produce(json={"records": [{"value": "x"}]}, params={"partition": "one"}),
        422,
        42,
        "partition",
    )
    bad.expect(
        bad.produce(json={"records": [{"value": "x"}]}, params={"producer_id": -1, "sequence": 0}),
        422,
        42,
        "producer_id",
    )

    # An idempotent producer's sequence gap: refused, nothing written.
    first = bad.produce(
        json={"records": [{"value": "x", "partition": 0}]}, params={"producer_id": 5, "sequence": 0}
    )
    assert first.status_code == 200, first.text
    bad.before = bad.snapshots.take()
    bad.watermarks = bad.offsets()
    bad.expect(
        bad.produce(
            json={"records": [{"value": "y", "partition": 0}]},
            params={"producer_id": 5, "sequence": 3},
        ),
        409,
        45,
        "producer 5",
        "expected is 1",
    )


def test_bad_admin_requests(bad: BadInput) -> None:
    bad.expect(
        bad.http.post("/v1/topics", json={"name": "t", "partitions": 2}),
        409,
        36,
        "'t'",
        "already exists",
    )
    bad.expect(bad.http.post("/v1/topics", json={"name": "compacted"}), 409, 36, "compacted")
    bad.expect(
        bad.http.post("/v1/topics/t/partitions", json={"count": 1}), 400, 37, "2 partitions", "1"
    )
    bad.expect(bad.http.post("/v1/topics/t/partitions", json={"count": 2}), 400, 37, "2 partitions")
    bad.expect(bad.http.post("/v1/topics/t/partitions", json={"count": 0}), 422, 42, "count")
    bad.expect(bad.http.post("/v1/topics/t/partitions", json={}), 422, 42, "count")
    bad.expect(
        bad.http.post("/v1/topics", json={"name": "n", "partitions": 0}), 422, 42, "partitions"
    )
    bad.expect(
        bad.http.post("/v1/topics", json={"name": "n", "partitions": 10_001}), 422, 42, "partitions"
    )
    bad.expect(
        bad.http.post("/v1/topics", json={"name": "n", "configs": {"bogus": "1"}}), 400, 40, "bogus"
    )
    bad.expect(
        bad.http.post("/v1/topics", json={"name": "n", "configs": {"retention.ms": "soon"}}),
        400,
        40,
        "retention.ms",
        "soon",
    )
    bad.expect(
        bad.http.post("/v1/topics", json={"name": "n", "replication_factor": 0}),
        400,
        38,
        "replication factor",
    )
    bad.expect(bad.http.post("/v1/topics", json={"partitions": 1}), 422, 42, "name")
    bad.expect(
        bad.http.post("/v1/topics", content=b"{", headers={"content-type": "application/json"}),
        400,
        42,
        "JSON",
    )
    bad.expect(
        bad.http.patch("/v1/topics/t/configs", json={"set": {"retention.ms": "-7"}}),
        400,
        40,
        "retention.ms",
    )
    bad.expect(
        bad.http.patch("/v1/topics/t/configs", json={"set": {"cleanup.policy": "keep"}}),
        400,
        40,
        "cleanup.policy",
        "keep",
    )
    bad.expect(bad.http.patch("/v1/topics/t/configs", json={"delete": ["nope"]}), 400, 40, "nope")
    bad.expect(
        bad.http.patch(
            "/v1/topics/t/configs",
            json={"set": {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}},
        ),
        400,
        40,
        "min.compaction.lag.ms",
    )
    bad.expect(bad.http.patch("/v1/topics/t/configs", json={"sett": {}}), 422, 42, "sett")
    assert bad.checked >= 18
    check_numbers_must_be_numbers(bad)


def test_schema_mismatch_is_422_and_malformed_json_400(bad: BadInput) -> None:
    """Every native route documents 422 for a request that does not match its schema: JSON
    of the wrong shape answers 422 naming the field, JSON that does not parse 400, and a
    well-typed value lakelog refuses 400; none of them stores anything."""
    create = {"name": "n", "partitions": "3"}
    body = bad.expect(bad.http.post("/v1/topics", json=create), 422, 42, "partitions")
    assert set(body) == {"error_code", "error", "message", "retriable"}, body
    assert "n" not in bad.http.get("/v1/topics").json()["topics"]
    bad.expect(bad.fetch(0, max_records="ten"), 422, 42, "max_records")
    malformed = b'{"name": "n", "partitions": 3'
    json_type = {"content-type": "application/json"}
    bad.expect(bad.http.post("/v1/topics", content=malformed, headers=json_type), 400, 42, "JSON")
    bad.expect(bad.produce(content=b'{"records": [', headers=json_type), 400, 42, "JSON")
    bad.expect(bad.fetch(0, offset="ten"), 400, 42, "offset", "ten")
    bad.expect(bad.http.post("/v1/topics", json={"name": "a b"}), 400, 17, "a b")
    assert "n" not in bad.http.get("/v1/topics").json()["topics"]


def check_numbers_must_be_numbers(bad: BadInput) -> None:
    """Native request bodies take no value of another JSON type in place of a number, a
    flag or a string; the refusal names the field and its type."""
    integers: list[tuple[str, str, dict[str, Any], str]] = [
        ("post", "/v1/topics", {"name": "n", "partitions": "3"}, "partitions"),
        ("post", "/v1/topics", {"name": "n", "partitions": 3.0}, "partitions"),
        ("post", "/v1/topics", {"name": "n", "partitions": True}, "partitions"),
        ("post", "/v1/topics", {"name": "n", "replication_factor": "1"}, "replication_factor"),
        ("post", "/v1/topics", {"name": "n", "replication_factor": False}, "replication_factor"),
        ("post", "/v1/topics/t/partitions", {"count": "3"}, "count"),
        (
            "post",
            "/v1/topics/t/records",
            {"records": [{"value": "x", "partition": "1"}]},
            "partition",
        ),
        (
            "post",
            "/v1/topics/t/records",
            {"records": [{"value": "x", "timestamp_ms": "5"}]},
            "timestamp_ms",
        ),
        (
            "post",
            "/v1/groups/g/offsets",
            {"offsets": [{"topic": "t", "partition": 0, "offset": "5"}]},
            "offset",
        ),
        ("post", "/v1/groups/g/offsets", {"generation_id": "-1", "offsets": []}, "generation_id"),
    ]
    for method, path, body, field in integers:
        bad.expect(bad.http.request(method, path, json=body), 422, 42, field, "valid integer")
    bad.expect(
        bad.http.post("/v1/topics", json={"name": "n", "configs": {"retention.ms": 1000}}),
        422,
        42,
        "configs.retention.ms",
        "valid string",
    )
    bad.expect(bad.http.post("/v1/topics", json={"name": 7}), 422, 42, "name", "valid string")
    reset = {"topics": [{"topic": "t"}], "to": {"earliest": "true"}}
    bad.expect(
        bad.http.post("/v1/groups/g/offsets:reset", json=reset), 422, 42, "to.earliest", "boolean"
    )
    quotas = {"entity": {"user": "alice"}, "set": {"producer_byte_rate": "1024"}}
    bad.expect(
        bad.http.patch("/v1/quotas", json=quotas), 422, 42, "set.producer_byte_rate", "valid number"
    )


def test_produce_to_an_internal_topic_is_refused_on_every_api(bad: BadInput) -> None:
    """Kafka's INVALID_TOPIC_EXCEPTION for client writes to ``__consumer_offsets``, in each
    API's own error shape; nothing stored changes and the groups keep working."""
    committed = bad.http.post(
        "/v1/groups/g1/offsets", json={"offsets": [{"topic": "t", "partition": 0, "offset": 2}]}
    )
    assert committed.status_code == 200, committed.text
    bad.before = bad.snapshots.take()
    internal = "__consumer_offsets"
    refusal = f"cannot append to internal topic {internal}"
    forged = {"records": [{"key": "g1", "value": "x"}]}
    bad.expect(bad.produce(internal, json=forged), 400, 17, refusal)
    bad.expect(bad.produce(internal, json=forged, params={"acks": "0"}), 400, 17, refusal)
    bad.expect(bad.produce(internal, json=forged, params={"partition": 0}), 400, 17, refusal)
    arrow = arrow_body(pa.table({"key": [b"g1"], "value": [b"x"]}))
    bad.expect(bad.produce(internal, content=arrow, headers={"content-type": ARROW}), 400, 17)

    # REST Proxy v2 reports Kafka's refusal per record, as it does for producer errors.
    v2_body = json.dumps({"records": [{"key": "ZzE=", "value": "eA=="}, {"value": "eQ=="}]})
    for path in (f"/topics/{internal}", f"/topics/{internal}/partitions/0"):
        response = bad.http.post(
            path, content=v2_body, headers={"content-type": "application/vnd.kafka.binary.v2+json"}
        )
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/vnd.kafka.v2+json"
        offsets = response.json()["offsets"]
        assert len(offsets) == 2
        for offset in offsets:
            assert (offset["partition"], offset["offset"], offset["error_code"]) == (None, None, 1)
            assert offset["error"].startswith("INVALID_TOPIC_EXCEPTION: " + refusal)

    # REST Proxy v3: a delivery report per record with the error, as for other refusals.
    cluster = bad.http.get("/v3/clusters").json()["data"][0]["cluster_id"]
    v3 = f"/v3/clusters/{cluster}/topics/{internal}/records"
    record = {"key": {"type": "STRING", "data": "g1"}, "value": {"type": "STRING", "data": "x"}}
    response = bad.http.post(
        v3,
        content=json.dumps(record) + json.dumps({"value": {"data": "eQ=="}}),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200, response.text
    reports = [json.loads(line) for line in response.text.splitlines()]
    assert [r["error_code"] for r in reports] == [400, 400]
    for report in reports:
        assert "INVALID_TOPIC_EXCEPTION" in report["message"] and refusal in report["message"]
    response = bad.http.post(f"{v3}:batch", json={"entries": [{"id": "a", **record}]})
    assert response.status_code == 207, response.text
    assert response.json()["successes"] == []
    [failure] = response.json()["failures"]
    assert failure["error_code"] == 400 and refusal in failure["message"]

    # The Python client, and the console producer built on it.
    with Producer(str(bad.http.base_url)) as producer:
        error = producer.send(internal, b"x", key=b"g1").exception(timeout=60)
    assert isinstance(error, InvalidTopicError) and refusal in error.message
    command = [sys.executable, "-m", "lakelog.cli", "console-producer", "--topic", internal]
    properties = ["--property", "parse.key=true", "--property", "key.separator=:"]
    done = subprocess.run(
        [*command, "--bootstrap-server", str(bad.http.base_url), *properties],
        input="g1:x\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "INVALID_TOPIC_EXCEPTION" in done.stderr, done.stderr
    assert refusal in done.stderr
    assert bad.snapshots.take() == bad.before, "a refused produce changed stored files"

    listed = bad.http.get("/v1/groups")
    assert listed.status_code == 200 and "g1" in listed.text, listed.text
    described = bad.http.get("/v1/groups/g1")
    assert described.status_code == 200, described.text
    assert [(o["topic"], o["offset"]) for o in described.json()["offsets"]] == [("t", 2)]
