"""A fetch answers exactly what storage holds, from the recent-batch cache or from storage.

Two real brokers share a root (local and S3). One of them produces most
batches, so its cache holds them; the other writes the rest, which the first
can only read from storage. Then the first broker is asked, over HTTP, for every
offset of every partition with several record and byte limits, and each answer
is compared, field by field, with the topic's Delta table as delta-rs reads it:
no lakelog code stands between storage and the expected answer.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import Any

import httpx
from deltalake import DeltaTable
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

#: (max_records, max_bytes) of the fetches: a few records across batch boundaries, all
#: there is, a byte limit, and a byte limit below any record (one record all the same).
LIMITS = [(3, 1 << 20), (1000, 1 << 20), (1000, 120), (4, 1)]
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def random_records(rnd: random.Random, round_no: int, partitions: int) -> list[dict[str, Any]]:
    """Records with null and non-null keys and values, headers, sizes from 0 to 90 bytes."""
    records = []
    for i in range(rnd.randint(2, 7)):
        record: dict[str, Any] = {
            "value": b64(rnd.randbytes(rnd.randint(0, 90))) if rnd.random() < 0.9 else None,
            "partition": rnd.randrange(partitions),
            "timestamp_ms": 1_700_000_000_000 + round_no * 1000 + i,
        }
        if rnd.random() < 0.7:
            record["key"] = b64(f"k{rnd.randrange(5)}".encode())
        if rnd.random() < 0.3:
            record["headers"] = [
                {"key": "trace", "value": b64(rnd.randbytes(4))},
                {"key": "empty", "value": None},
            ]
        records.append(record)
    return records


def as_fetched(row: dict[str, Any]) -> dict[str, Any]:
    """A row of the Delta table in the shape a JSON fetch with base64 formats returns."""
    return {
        "offset": row["offset"],
        "timestamp_ms": int(row["timestamp"].timestamp() * 1000),
        "timestamp_type": TIMESTAMP_TYPES[row["timestamp_type"]],
        "key": b64(row["key"]),
        "value": b64(row["value"]),
        "headers": [{"key": h["key"], "value": b64(h["value"])} for h in row["headers"] or []],
    }


def stored_rows(http: httpx.Client, root: RootSpec, topic: str) -> dict[int, list[dict[str, Any]]]:
    """Every row of the topic's Delta table, by partition in offset order, read by delta-rs."""
    response = http.get(f"/v1/topics/{topic}")
    assert response.status_code == 200, response.text
    options: dict[str, str] = {}
    if root.s3 is not None:
        options = {
            "AWS_ENDPOINT_URL": str(root.s3.endpoint_url),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }
    table = DeltaTable(response.json()["table_uri"], storage_options=options).to_pyarrow_table()
    rows: dict[int, list[dict[str, Any]]] = {}
    for row in sorted(table.to_pylist(), key=lambda r: (r["partition"], r["offset"])):
        rows.setdefault(row["partition"], []).append(as_fetched(row))
    return rows


def cache_counts(http: httpx.Client) -> tuple[float, float]:
    response = http.get("/metrics")
    assert response.status_code == 200, response.text
    samples = {
        s.name: s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    return samples["lakelog_fetch_cache_hits"], samples["lakelog_fetch_cache_misses"]


def check_fetch(
    http: httpx.Client, topic: str, partition: int, stored: list[dict[str, Any]], offset: int
) -> None:
    for max_records, max_bytes in LIMITS:
        params: dict[str, int | str] = {
            "offset": offset,
            "max_records": max_records,
            "max_bytes": max_bytes,
            "key_format": "base64",
            "value_format": "base64",
        }
        response = http.get(f"/v1/topics/{topic}/partitions/{partition}/records", params=params)
        assert response.status_code == 200, response.text
        got = response.json()
        where = f"{topic}-{partition} {params}"
        records = got["records"]
        assert 1 <= len(records) <= max_records, where
        assert records == stored[offset : offset + len(records)], where
        assert got["next_offset"] == offset + len(records), where
        assert got["high_watermark"] == len(stored), where
        sizes = [len(base64.b64decode(r["key"] or "")) + len(base64.b64decode(r["value"] or ""))
                 for r in records]  # fmt: skip
        assert len(records) == 1 or sum(sizes) <= max_bytes, where


def check_caught_up(http: httpx.Client, topic: str, partition: int, end: int) -> None:
    """At the high watermark a fetch (no wait) has no records and points at the watermark."""
    params: dict[str, int | str] = {"offset": end, "key_format": "base64", "value_format": "base64"}
    response = http.get(f"/v1/topics/{topic}/partitions/{partition}/records", params=params)
    assert response.status_code == 200, response.text
    got = response.json()
    where = f"{topic}-{partition} at {end}"
    assert got["records"] == [], where
    assert got["next_offset"] == end, where
    assert got["high_watermark"] == end, where


def test_every_fetch_is_exactly_what_the_delta_table_holds(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    # Each broker commits its own batches: with commit handoff, whichever broker
    # leads the topic would commit (and cache) every batch, and nothing would be a miss.
    writer, other = (start_broker(root, commit_handoff=False) for _ in range(2))
    rnd = random.Random(11)
    topics = {"created": ({}, 2), "appended": ({"message.timestamp.type": "LogAppendTime"}, 1)}
    with (
        httpx.Client(base_url=writer.url, timeout=60) as http,
        httpx.Client(base_url=other.url, timeout=60) as other_http,
    ):
        for name, (configs, partitions) in topics.items():
            body = {"name": name, "partitions": partitions, "configs": configs}
            response = http.post("/v1/topics", json=body)
            assert response.status_code == 201, response.text
            for round_no in range(8):
                # Every third batch comes from the other broker: a gap in this one's cache.
                via = other_http if round_no % 3 == 1 else http
                records = random_records(rnd, round_no, partitions)
                response = via.post(
                    f"/v1/topics/{name}/records",
                    json={"records": records, "key_format": "base64", "value_format": "base64"},
                )
                assert response.status_code == 200, response.text

        hits, misses = cache_counts(http)
        for name, (_, partitions) in topics.items():
            stored = stored_rows(http, root, name)
            assert sorted(stored) == list(range(partitions))
            for partition in range(partitions):
                for offset in range(len(stored[partition])):
                    check_fetch(http, name, partition, stored[partition], offset)
                check_caught_up(http, name, partition, len(stored[partition]))
        hits_after, misses_after = cache_counts(http)
    # Both kinds of answer were checked: from the cache and from storage.
    assert hits_after > hits and misses_after > misses
