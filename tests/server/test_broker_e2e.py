"""A real broker process over HTTP: produce, fetch, offsets, admin, metrics (local root and S3).

Each test starts its own broker subprocess(es) on a fresh root and talks to
them with ``httpx`` the way any client would; nothing is imported from the
server. Checks that need no restart or special settings share one broker per
test (``check_*``), each on a topic of its own, to keep broker start-ups few.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.ipc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lakelog.catalog import Catalog
from lakelog.partitioner import partition_for_key
from server.batcher import COMMIT_PHASES
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.topic_metrics import topic_counter

ARROW = "application/vnd.apache.arrow.stream"
StartBroker = Callable[..., BrokerProcess]


@contextmanager
def client(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        yield http


def create_topic(http: httpx.Client, name: str, partitions: int = 1, **configs: str) -> None:
    body = {"name": name, "partitions": partitions, "configs": configs}
    response = http.post("/v1/topics", json=body)
    assert response.status_code == 201, response.text


def produce(http: httpx.Client, topic: str, body: dict[str, Any], **params: Any) -> Any:
    response = http.post(f"/v1/topics/{topic}/records", json=body, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def fetch(http: httpx.Client, topic: str, partition: int, **params: Any) -> Any:
    response = http.get(f"/v1/topics/{topic}/partitions/{partition}/records", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def fetch_all(http: httpx.Client, topic: str, partition: int, **params: Any) -> list[Any]:
    """Every record of a partition, following next_offset like a consumer."""
    records: list[Any] = []
    offset = 0
    while True:
        got = fetch(http, topic, partition, offset=offset, **params)
        records += got["records"]
        if got["next_offset"] >= got["high_watermark"]:
            return records
        assert got["next_offset"] > offset, got
        offset = got["next_offset"]


def high_watermarks(http: httpx.Client, topic: str) -> list[int]:
    response = http.get(f"/v1/topics/{topic}/offsets")
    assert response.status_code == 200, response.text
    return [p["high_watermark"] for p in response.json()["partitions"]]


def metrics(http: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics by (name, sorted labels)."""
    response = http.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def test_produce_fetch_round_trip(root: RootSpec, start_broker: StartBroker) -> None:
    broker = start_broker(root)
    with client(broker) as http:
        create_topic(http, "events", 2)
        sent = produce(
            http, "events", {"records": [{"value": f"m{i}", "partition": i % 2} for i in range(6)]}
        )
        assert [r["offset"] for r in sent["records"]] == [0, 0, 1, 1, 2, 2]
        got = fetch(http, "events", 1, offset=0)
        assert [r["value"] for r in got["records"]] == ["m1", "m3", "m5"]
        assert got["high_watermark"] == 3


def test_long_poll_returns_when_data_arrives(root: RootSpec, start_broker: StartBroker) -> None:
    broker = start_broker(root, fetch_max_wait_ms=120_000)
    with client(broker) as http:
        create_topic(http, "t")

        def produce_later() -> None:
            time.sleep(0.5)  # let the poll below start waiting (the test holds either way)
            with client(broker) as other:
                produce(other, "t", {"records": [{"value": "late"}]})

        producer = threading.Thread(target=produce_later)
        producer.start()
        # The poll may wait up to 120 s; the client gives up after 60 s, so a long poll
        # that ignored the arrival and ran to its deadline fails here with a timeout.
        got = fetch(http, "t", 0, offset=0, max_wait_ms=120_000)
        producer.join()
        assert [r["value"] for r in got["records"]] == ["late"]


def test_long_poll_of_a_departed_client_ends(root: RootSpec, start_broker: StartBroker) -> None:
    """A consumer killed mid-poll leaves no waiter behind until max_wait_ms runs out."""
    broker = start_broker(root, fetch_max_wait_ms=120_000)
    with client(broker) as http:
        create_topic(http, "idle")
        path = "/v1/topics/idle/partitions/0/records"
        with pytest.raises(httpx.ReadTimeout):  # the client gives up (closes) after 1 s
            http.get(path, params={"offset": 0, "max_wait_ms": 120_000}, timeout=1.0)
        deadline = time.monotonic() + 60
        while metrics(http).get(("lakelog_abandoned_fetches_total", ()), 0) < 1:
            if time.monotonic() > deadline:
                pytest.fail("the abandoned long poll was still waiting after 60 s")
            time.sleep(0.1)
        # the broker still serves long polls normally
        produce(http, "idle", {"records": [{"value": "now"}]})
        got = fetch(http, "idle", 0, offset=0, max_wait_ms=5_000)
        assert [r["value"] for r in got["records"]] == ["now"]


def check_kafka_quickstart(http: httpx.Client) -> None:
    """kafka-topics --create; kafka-console-producer; kafka-console-consumer --from-beginning."""
    lines = ["This is my first event", "This is my second event", "", "ünïcödé ✓", "last"]
    create_topic(http, "quickstart-events")
    assert http.get("/v1/topics").json() == {"topics": ["quickstart-events"]}
    for i, line in enumerate(lines):  # the console producer sends one line per request
        sent = produce(http, "quickstart-events", {"records": [{"value": line}]})
        assert sent["records"] == [
            {"partition": 0, "offset": i, "timestamp_ms": sent["records"][0]["timestamp_ms"]}
        ]
        assert sent["duplicate"] is False
    got = fetch(http, "quickstart-events", 0, offset="earliest")
    assert [r["value"] for r in got["records"]] == lines
    assert [r["offset"] for r in got["records"]] == list(range(len(lines)))
    assert all(r["key"] is None and r["headers"] == [] for r in got["records"])
    assert all(r["timestamp_type"] == "CreateTime" for r in got["records"])
    assert (got["log_start_offset"], got["high_watermark"], got["next_offset"]) == (0, 5, 5)
    # A consumer at the end gets nothing, and is told where it stands.
    tail = fetch(http, "quickstart-events", 0, offset="latest")
    assert tail["records"] == [] and tail["next_offset"] == 5
    # Small max_records pages through the same records in order.
    paged = fetch_all(http, "quickstart-events", 0, max_records=2)
    assert [r["value"] for r in paged] == lines


def check_keyed_records_land_on_kafka_partitions(http: httpx.Client) -> None:
    partitions = 6
    keys = [f"user-{i}" for i in range(40)] + ["", "ключ", "user-1", "user-1"]
    create_topic(http, "keyed", partitions)
    sent = produce(
        http, "keyed", {"records": [{"key": k, "value": f"v{i}"} for i, k in enumerate(keys)]}
    )
    # The same keys again, one request each (group commit must not change placement).
    for i, k in enumerate(keys[:10]):
        again = produce(http, "keyed", {"records": [{"key": k, "value": f"again{i}"}]})
        assert again["records"][0]["partition"] == partition_for_key(k.encode(), partitions)
    for k, placed in zip(keys, sent["records"], strict=True):
        assert placed["partition"] == partition_for_key(k.encode(), partitions), k
    assert len({p["partition"] for p in sent["records"]}) > 1
    for p in range(partitions):
        got = fetch_all(http, "keyed", p)
        assert all(partition_for_key(r["key"].encode(), partitions) == p for r in got)
    # Per-key order: user-1's three values come back in the order they were sent.
    home = partition_for_key(b"user-1", partitions)
    values = [r["value"] for r in fetch_all(http, "keyed", home) if r["key"] == "user-1"]
    assert values == ["v1", "v42", "v43", "again1"]


def check_fetch_formats(http: httpx.Client) -> None:
    binary = bytes(range(256))
    create_topic(http, "formats")
    produce(
        http,
        "formats",
        {
            "key_format": "base64",
            "value_format": "base64",
            "records": [
                {
                    "key": base64.b64encode(b"k\x00").decode(),
                    "value": base64.b64encode(binary).decode(),
                    "headers": [{"key": "h", "value": base64.b64encode(b"\xff").decode()}],
                    "timestamp_ms": 1_700_000_000_000,
                }
            ],
        },
    )
    document = {"id": 7, "tags": ["a", "b"], "nested": {"ok": True, "none": None}}
    produce(
        http,
        "formats",
        {
            "key_format": "json",
            "value_format": "json",
            "records": [
                {"key": {"id": 7}, "value": document, "headers": [{"key": "h", "value": "x"}]},
                {"key": "plain", "value": None},  # a tombstone
            ],
        },
    )
    produce(http, "formats", {"records": [{"key": "s", "value": "text ✓"}]})

    raw = fetch(http, "formats", 0, key_format="base64", value_format="base64")["records"]
    decoded = [
        (
            base64.b64decode(r["key"]),
            None if r["value"] is None else base64.b64decode(r["value"]),
        )
        for r in raw
    ]
    assert decoded == [
        (b"k\x00", binary),
        (b'{"id":7}', json.dumps(document, separators=(",", ":")).encode()),
        (b'"plain"', None),
        (b"s", "text ✓".encode()),
    ]
    assert raw[0]["headers"] == [{"key": "h", "value": "/w=="}]
    assert raw[0]["timestamp_ms"] == 1_700_000_000_000

    as_json = fetch(
        http, "formats", 0, offset=1, max_records=2, key_format="json", value_format="json"
    )
    assert [(r["key"], r["value"]) for r in as_json["records"]] == [
        ({"id": 7}, document),
        ("plain", None),
    ]
    assert as_json["records"][0]["headers"] == [{"key": "h", "value": "x"}]
    as_text = fetch(http, "formats", 0, offset=1)["records"]
    assert as_text[0]["value"] == json.dumps(document, separators=(",", ":"))
    assert as_text[2] == {**as_text[2], "key": "s", "value": "text ✓"}

    # ndjson, chosen by format= or by Accept; one record per line, same fields as json.
    for kwargs in (
        {"params": {"offset": 1, "format": "ndjson"}},
        {"params": {"offset": 1}, "headers": {"accept": "application/x-ndjson"}},
    ):
        response = http.get("/v1/topics/formats/partitions/0/records", **kwargs)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.text.splitlines()]
        assert lines == as_text
        assert response.headers["x-lakelog-high-watermark"] == "4"
        assert response.headers["x-lakelog-next-offset"] == "4"

    # Arrow IPC stream, chosen by Accept (or format=arrow).
    response = http.get("/v1/topics/formats/partitions/0/records", headers={"accept": ARROW})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == ARROW
    table = pyarrow.ipc.open_stream(response.content).read_all()
    assert table.column_names == [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "headers",
    ]
    assert table.column("topic").to_pylist() == ["formats"] * 4
    assert table.column("partition").to_pylist() == [0] * 4
    assert table.column("offset").to_pylist() == [0, 1, 2, 3]
    assert (
        list(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))
        == decoded
    )
    assert table.column("headers").to_pylist()[0] == [{"key": "h", "value": b"\xff"}]
    assert table.column("timestamp").cast(pa.int64()).to_pylist()[0] == 1_700_000_000_000
    same = http.get("/v1/topics/formats/partitions/0/records", params={"format": "arrow"})
    assert pyarrow.ipc.open_stream(same.content).read_all().equals(table)


def check_offsets_endpoints(http: httpx.Client) -> None:
    create_topic(http, "times", 2)
    stamps = [1_000, 2_000, 2_000, 5_000]
    produce(
        http,
        "times",
        {"records": [{"value": f"at{t}", "timestamp_ms": t, "partition": 1} for t in stamps]},
    )

    def offset(partition: int, timestamp: str) -> Any:
        response = http.get(
            f"/v1/topics/times/partitions/{partition}/offsets", params={"timestamp": timestamp}
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["topic"], body["partition"]) == ("times", partition)
        return body["offset"], body["timestamp_ms"]

    assert offset(1, "earliest") == (0, None)
    assert offset(1, "latest") == (4, None)
    assert offset(1, "-2") == (0, None) and offset(1, "-1") == (4, None)
    assert offset(1, "0") == (0, 1_000)
    assert offset(1, "1500") == (1, 2_000)  # first record at or after the time
    assert offset(1, "2000") == (1, 2_000)
    assert offset(1, "2001") == (3, 5_000)
    assert offset(1, "5001") == (4, None)  # nothing that late: the high watermark
    assert offset(0, "earliest") == (0, None) and offset(0, "latest") == (0, None)
    assert offset(0, "0") == (0, None)
    everything = http.get("/v1/topics/times/offsets").json()
    assert everything == {
        "topic": "times",
        "partitions": [
            {"partition": 0, "log_start_offset": 0, "high_watermark": 0},
            {"partition": 1, "log_start_offset": 0, "high_watermark": 4},
        ],
    }
    # The offset found by time is where a consumer starts reading.
    start = offset(1, "1500")[0]
    assert [r["value"] for r in fetch(http, "times", 1, offset=start)["records"]] == [
        "at2000",
        "at2000",
        "at5000",
    ]


def arrow_body(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def check_arrow_ipc_produce(http: httpx.Client) -> None:
    n = 1_000
    table = pa.table(
        {
            "partition": pa.array([i % 3 for i in range(n)], pa.int32()),
            "timestamp": pa.array([1_600_000_000_000 + i for i in range(n)], pa.int64()),
            "key": pa.array([f"k{i}".encode() for i in range(n)], pa.binary()),
            "value": pa.array(
                [None if i == 4 else f"value-{i}".encode() for i in range(n)], pa.binary()
            ),
            "headers": pa.array(
                [[{"key": "i", "value": str(i).encode()}] for i in range(n)],
                pa.list_(
                    pa.struct(
                        [
                            pa.field("key", pa.string(), nullable=False),
                            pa.field("value", pa.binary()),
                        ]
                    )
                ),
            ),
        }
    )
    create_topic(http, "bulk", 3)
    response = http.post(
        "/v1/topics/bulk/records", content=arrow_body(table), headers={"content-type": ARROW}
    )
    assert response.status_code == 200, response.text
    placed = response.json()["records"]
    assert [r["partition"] for r in placed] == [i % 3 for i in range(n)]
    assert [r["offset"] for r in placed] == [i // 3 for i in range(n)]
    assert [r["timestamp_ms"] for r in placed] == [1_600_000_000_000 + i for i in range(n)]
    # Only the value column is required; the partition query parameter places them all.
    minimal = pa.table({"value": pa.array([b"x", b"y"], pa.binary())})
    response = http.post(
        "/v1/topics/bulk/records",
        params={"partition": 2},
        content=arrow_body(minimal),
        headers={"content-type": ARROW},
    )
    assert response.status_code == 200, response.text
    assert [(r["partition"], r["offset"]) for r in response.json()["records"]] == [
        (2, 333),
        (2, 334),
    ]
    assert high_watermarks(http, "bulk") == [334, 333, 335]
    got = fetch_all(http, "bulk", 1, max_records=100)
    assert [r["value"] for r in got] == [None if i == 4 else f"value-{i}" for i in range(1, n, 3)]
    assert [r["headers"] for r in got[:2]] == [
        [{"key": "i", "value": "1"}],
        [{"key": "i", "value": "4"}],
    ]
    assert got[0]["timestamp_ms"] == 1_600_000_000_001


def test_produce_and_fetch(root: RootSpec, start_broker: StartBroker) -> None:
    """The produce and fetch paths on one broker, each check on a topic of its own."""
    broker = start_broker(root)
    with client(broker) as http:
        check_kafka_quickstart(http)  # first: it expects its topic to be the only one
        check_keyed_records_land_on_kafka_partitions(http)
        check_fetch_formats(http)
        check_offsets_endpoints(http)
        check_arrow_ipc_produce(http)


def test_acks_semantics(root: RootSpec, start_broker: StartBroker) -> None:
    """acks=0 answers at once; acks=1 and all answer once the records are durable.

    The broker lingers a minute for company, so a small request stays queued until a
    request big enough to fill a batch (batch_bytes) arrives and everything is committed.
    """
    settings = {"linger_ms": 60_000, "batch_bytes": 4_000}
    broker = start_broker(root, **settings)
    big = "x" * 5_000
    with client(broker) as http:
        create_topic(http, "acks")
        response = http.post(
            "/v1/topics/acks/records",
            params={"acks": "0"},
            json={"records": [{"value": "fire-and-forget"}]},
        )
        assert response.status_code == 200, response.text
        assert response.json() == {"topic": "acks", "accepted": 1, "throttle_time_ms": 0}
        # Answered, but not durable yet: nothing is readable while it lingers.
        assert high_watermarks(http, "acks") == [0]
        assert metrics(http)[("lakelog_produce_buffer_bytes", ())] > 0

        sent = produce(http, "acks", {"records": [{"value": big}]}, acks="all")
        assert [r["offset"] for r in sent["records"]] == [1]  # committed with the acks=0 one
        assert high_watermarks(http, "acks") == [2]
        values = [r["value"] for r in fetch(http, "acks", 0)["records"]]
        assert values == ["fire-and-forget", big]
        sent = produce(http, "acks", {"records": [{"value": big}]}, acks="1")
        assert [r["offset"] for r in sent["records"]] == [2]
        sent = produce(http, "acks", {"records": [{"value": big}]}, acks="-1")
        assert [r["offset"] for r in sent["records"]] == [3]

        # acks=0 still queued when the broker is stopped: a graceful stop commits it.
        response = http.post(
            "/v1/topics/acks/records",
            params={"acks": "0"},
            json={"records": [{"value": "queued at shutdown"}]},
        )
        assert response.status_code == 200, response.text
    broker.stop()
    assert "Application shutdown complete" in broker.log()

    broker = start_broker(root, **settings)
    with client(broker) as http:
        assert [r["value"] for r in fetch(http, "acks", 0, offset=4)["records"]] == [
            "queued at shutdown"
        ]
        # acks=1 answered means durable: even a SIGKILL right after cannot lose it.
        sent = produce(http, "acks", {"records": [{"value": big + "!"}]}, acks="1")
        assert [r["offset"] for r in sent["records"]] == [5]
    broker.kill()
    catalog = Catalog(root.url, s3=root.s3)  # read what storage holds, no broker involved
    try:
        stored = catalog.topic("acks").read(0, 5)
        assert [r.value for r in stored.to_records("acks")] == [(big + "!").encode()]
        assert stored.high_watermark == 6
    finally:
        catalog.close()


def check_idempotent_producer_retry(http: httpx.Client) -> None:
    create_topic(http, "idem", 2)
    body = {"records": [{"key": f"k{i}", "value": f"v{i}"} for i in range(5)]}
    first = produce(http, "idem", body, producer_id=42, sequence=0)
    assert first["duplicate"] is False
    watermarks = high_watermarks(http, "idem")
    assert sum(watermarks) == 5
    retry = produce(http, "idem", body, producer_id=42, sequence=0)
    assert retry["duplicate"] is True
    assert retry["records"] == first["records"]  # the original offsets and timestamps
    assert high_watermarks(http, "idem") == watermarks  # nothing written twice
    # The body may carry the producer id and sequence instead of the query string.
    in_body = {**body, "producer_id": 42, "sequence": 0}
    assert produce(http, "idem", in_body)["records"] == first["records"]
    # This broker wrote the batch: both retries were answered from memory, not storage.
    assert topic_counter(http, "lakelog_topic_duplicates_from_memory", "idem") == 2
    assert topic_counter(http, "lakelog_topic_duplicate_segment_reads", "idem") == 0
    # The next sequence is new data; a gap is refused with nothing written.
    following = produce(
        http,
        "idem",
        {"records": [{"value": "next", "partition": 0}]},
        producer_id=42,
        sequence=5,
    )
    assert following["duplicate"] is False
    assert following["records"][0]["offset"] == watermarks[0]
    gap = http.post(
        "/v1/topics/idem/records",
        params={"producer_id": 42, "sequence": 9},
        json={"records": [{"value": "gap", "partition": 0}]},
    )
    assert gap.status_code == 409, gap.text
    error = gap.json()
    assert error["error_code"] == 45 and error["error"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert "expected is 6" in error["message"]
    assert high_watermarks(http, "idem") == [watermarks[0] + 1, watermarks[1]]
    # Other producers are independent of producer 42's sequence.
    other = produce(
        http, "idem", {"records": [{"value": "o", "partition": 1}]}, producer_id=7, sequence=100
    )
    assert other["duplicate"] is False
    stored = [r["value"] for p in (0, 1) for r in fetch_all(http, "idem", p)]
    assert sorted(stored) == sorted([f"v{i}" for i in range(5)] + ["next", "o"])


def check_admin(http: httpx.Client) -> None:
    created = http.post(
        "/v1/topics",
        json={"name": "orders", "partitions": 3, "configs": {"retention.ms": "3600000"}},
    )
    assert created.status_code == 201, created.text
    described = created.json()
    assert described["name"] == "orders"
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    configs = {c["name"]: c for c in described["configs"]}
    assert configs["retention.ms"] == {
        "name": "retention.ms",
        "value": "3600000",
        "source": "TOPIC_CONFIG",
        "is_default": False,
    }
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["cleanup.policy"]["is_default"] is True
    create_topic(http, "audit")
    assert http.get("/v1/topics").json() == {"topics": ["audit", "orders"]}

    produce(http, "orders", {"records": [{"value": "a", "partition": 2}]})
    described = http.get("/v1/topics/orders").json()
    assert described["partitions"][2]["high_watermark"] == 1
    assert described["partitions"][2]["num_records"] == 1
    assert described["size_bytes"] > 0

    altered = http.patch(
        "/v1/topics/orders/configs",
        json={"set": {"cleanup.policy": "compact"}, "delete": ["retention.ms"]},
    )
    assert altered.status_code == 200, altered.text
    configs = {c["name"]: c for c in altered.json()["configs"]}
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["retention.ms"]["is_default"] is True
    # The new config applies to produce at once: a compacted topic needs keys.
    refused = http.post("/v1/topics/orders/records", json={"records": [{"value": "x"}]})
    assert refused.status_code == 400 and refused.json()["error_code"] == 87

    grown = http.post("/v1/topics/orders/partitions", json={"count": 5})
    assert grown.status_code == 200, grown.text
    assert len(grown.json()["partitions"]) == 5
    sent = produce(http, "orders", {"records": [{"key": "k", "value": "new", "partition": 4}]})
    assert sent["records"][0]["partition"] == 4
    assert high_watermarks(http, "orders") == [0, 0, 1, 0, 1]

    old_id = described["topic_id"]
    assert fetch(http, "orders", 2)["records"][0]["value"] == "a"
    deleted = http.delete("/v1/topics/orders")
    assert deleted.status_code == 204 and deleted.content == b""
    assert http.get("/v1/topics").json() == {"topics": ["audit"]}
    gone = http.get("/v1/topics/orders")
    assert gone.status_code == 404 and gone.json()["error_code"] == 3
    # The same name again is a new, empty topic: nothing of the old one shows through
    # (neither from storage nor from the broker's cache of recent batches).
    create_topic(http, "orders", 3)
    again = http.get("/v1/topics/orders").json()
    assert again["topic_id"] != old_id
    assert high_watermarks(http, "orders") == [0, 0, 0]
    assert fetch(http, "orders", 2)["records"] == []
    produce(http, "orders", {"records": [{"value": "reborn", "partition": 2}]})
    assert [r["value"] for r in fetch(http, "orders", 2)["records"]] == ["reborn"]


def check_brokers_health_and_metrics(http: httpx.Client, url: str) -> None:
    health = http.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "broker_id": "broker-e2e"}
    brokers = http.get("/v1/brokers").json()
    assert brokers["cluster_id"] == "lakelog"
    assert [(b["broker_id"], b["url"]) for b in brokers["brokers"]] == [("broker-e2e", url)]
    assert brokers["brokers"][0]["heartbeat_ms"] >= brokers["brokers"][0]["started_ms"]

    before = metrics(http)
    create_topic(http, "m")
    sent_bytes = 0
    for i in range(4):
        body = json.dumps({"records": [{"value": f"r{i}-{j}"} for j in range(3)]}).encode()
        sent_bytes += len(body)
        response = http.post(
            "/v1/topics/m/records",
            content=body,
            headers={"content-type": "application/json"},
            params={"producer_id": 1, "sequence": 3 * i},
        )
        assert response.status_code == 200, response.text
    retry = http.post(
        "/v1/topics/m/records",
        content=body,  # a duplicate: not counted
        headers={"content-type": "application/json"},
        params={"producer_id": 1, "sequence": 9},
    )
    assert retry.json()["duplicate"] is True
    sent_bytes += len(body)
    fetched = http.get("/v1/topics/m/partitions/0/records", params={"offset": 0})
    missing = http.get("/v1/topics/m/partitions/0/records", params={"offset": 999})
    assert missing.status_code == 416
    after = metrics(http)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    records_route = "/v1/topics/{topic}/records"
    fetch_route = "/v1/topics/{topic}/partitions/{partition}/records"
    assert grew("lakelog_http_requests_total", route=records_route, status="200") == 5
    assert grew("lakelog_http_requests_total", route=fetch_route, status="200") == 1
    assert grew("lakelog_http_requests_total", route=fetch_route, status="416") == 1
    assert grew("lakelog_http_requests_total", route="/v1/topics", status="201") == 1
    assert grew("lakelog_http_request_seconds_count", route=records_route) == 5
    # Four sequential requests, four group commits; the duplicate retry committed nothing.
    commits = after[("lakelog_commit_seconds_count", (("topic", "m"),))]
    assert commits == 4
    assert after[("lakelog_commit_seconds_sum", (("topic", "m"),))] > 0
    assert after[("lakelog_commit_seconds_bucket", (("le", "+Inf"), ("topic", "m")))] == commits
    # Each of them observed once in each of its three phases (stage, wait, commit): a count
    # of observations, not a duration.
    for phase in COMMIT_PHASES:
        labels = (("phase", phase), ("topic", "m"))
        assert after[("lakelog_commit_phase_seconds_count", labels)] == commits
    assert grew("lakelog_batch_records_sum") == 12
    assert grew("lakelog_batch_requests_count") == 4
    assert grew("lakelog_bytes_in_total") == sent_bytes
    assert grew("lakelog_bytes_out_total") >= len(fetched.content)
    assert after[("lakelog_records_in_total", (("topic", "m"),))] == 12
    assert after[("lakelog_records_out_total", (("topic", "m"),))] == 12
    assert after[("lakelog_produce_buffer_bytes", ())] == 0
    assert after[("lakelog_acks0_failures_total", ())] == 0
    # The event loop's lag is exposed, its buckets consistent with its count.
    assert (
        after[("lakelog_event_loop_lag_seconds_bucket", (("le", "+Inf"),))]
        == after[("lakelog_event_loop_lag_seconds_count", ())]
    )


def test_admin_idempotence_and_observability(root: RootSpec, start_broker: StartBroker) -> None:
    broker = start_broker(root, broker_id="broker-e2e")
    with client(broker) as http:
        check_admin(http)  # first: it lists every topic
        check_idempotent_producer_retry(http)
        check_brokers_health_and_metrics(http, broker.url)


def test_recent_batches_serve_caught_up_consumers(
    root: RootSpec, start_broker: StartBroker
) -> None:
    """A consumer at the head is answered from memory, with exactly what storage holds."""
    writer = start_broker(root)
    with client(writer) as http:
        create_topic(http, "hot", 2)

        def cache() -> tuple[float, float]:
            sample = metrics(http)
            return sample[("lakelog_fetch_cache_hits", ())], sample[
                ("lakelog_fetch_cache_misses", ())
            ]

        hits, misses = cache()
        position = 0
        for round_ in range(5):
            produce(
                http,
                "hot",
                {"records": [{"value": f"{round_}-{i}", "partition": 1} for i in range(4)]},
            )
            got = fetch(http, "hot", 1, offset=position, max_wait_ms=1_000)
            assert [r["offset"] for r in got["records"]] == list(range(position, position + 4))
            position = got["next_offset"]
        # Reading at the head of the partition, a caught-up consumer found its records in memory
        hits_now, misses_now = cache()
        assert hits_now >= hits + 5
        assert misses_now == misses
        from_memory = fetch_all(http, "hot", 1, max_records=3)

    # A broker that never wrote those records reads them from storage: the same answer.
    reader = start_broker(root)
    with client(reader) as http:
        from_storage = fetch_all(http, "hot", 1, max_records=3)
        sample = metrics(http)
        assert sample[("lakelog_fetch_cache_hits", ())] == 0
    assert from_memory == from_storage
    assert [r["value"] for r in from_storage] == [f"{r}-{i}" for r in range(5) for i in range(4)]
