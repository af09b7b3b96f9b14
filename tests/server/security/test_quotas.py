"""Quotas on a real broker: throttle times are reported and throttled clients are slowed.

Rates are checked only as correctness properties with generous bounds (what a
client delivered over the time it took stays under twice its quota), never
as speed requirements of lakelog.
"""

from __future__ import annotations

import base64
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lakelog.client import Producer
from lakelog.client.connection import Connection
from server.security.throttle import hold_until
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.security.helpers import (
    ADMIN,
    KEYS,
    StartBroker,
    acl,
    add_acls,
    call,
    create_topic,
    key,
    start_secured,
)

QUOTA = 50_000  # bytes per second
HEADER = "x-lakelog-throttle-time-ms"


def throttle_metric(broker: BrokerProcess, quota: str, user: str) -> float:
    text = call(broker, "GET", "/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "lakelog_quota_throttled_responses_total" and sample.labels == {
                "quota": quota,
                "user": user,
            }:
                return float(sample.value)
    return 0.0


def test_produce_fetch_and_request_quotas(start_broker: StartBroker, tmp_path: Path) -> None:
    broker = start_secured(
        start_broker,
        RootSpec(str(tmp_path / "root")),
        tmp_path,
        quota_producer_byte_rate=QUOTA,
        quota_consumer_byte_rate=QUOTA,
        # Kafka's 11 samples, of 100 ms: the measured window (1 s) is a few requests long
        quota_window_num=11,
        quota_window_size_ms=100,
    )
    create_topic(broker, "metered")
    add_acls(
        broker,
        acl("User:alice", "ALL", "metered"),
        acl("User:bob", "ALL", "metered"),
        acl("User:carol", "ALL", "metered"),
    )
    value = "x" * 25_000

    # raw HTTP: every answer reports its throttle in the body and (when > 0) the header
    sent, reported = 0, []
    started = time.monotonic()
    with httpx.Client(base_url=broker.url, headers=key("User:alice"), timeout=60) as http:
        while time.monotonic() - started < 3:
            body = {"records": [{"value": value}]}
            answer = http.post("/v1/topics/metered/records", json=body)
            assert answer.status_code == 200, answer.text
            sent += len(answer.request.content)
            throttle = answer.json()["throttle_time_ms"]
            assert int(answer.headers.get(HEADER, "0")) == throttle
            reported.append(throttle)
    elapsed = time.monotonic() - started
    assert max(reported) > 0, reported
    print(f"raw produce: {sent} B in {elapsed:.2f} s against {QUOTA} B/s; throttles {reported}")

    # concurrent requests of one client are held one after another, as Kafka's muted
    # connection serves them, so sending in parallel does not multiply the quota
    def send_for(seconds: float) -> int:
        done = 0
        with httpx.Client(base_url=broker.url, headers=key("User:carol"), timeout=60) as http:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                answer = http.post(
                    "/v1/topics/metered/records", json={"records": [{"value": value}]}
                )
                assert answer.status_code == 200, answer.text
                done += len(answer.request.content)
        return done

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        parallel = sum(pool.map(send_for, [3.0] * 8))
    elapsed = time.monotonic() - started  # printed, not asserted: the queueing is unit-tested
    print(f"8 parallel senders: {parallel} B in {elapsed:.2f} s against {QUOTA} B/s")

    # the Python producer is slowed the same way and still delivers everything. One
    # request is admitted whole and throttled afterwards (Kafka does the same), so the
    # records go in ten flushed waves: every wave after the quota is spent waits.
    connection = Connection(broker.url, api_key=KEYS["User:bob"], discover=False)
    started = time.monotonic()
    offsets = []
    with Producer(broker.url, connection=connection, batch_size=40_000) as producer:
        for _ in range(10):
            # random bytes: quotas count wire bytes, and repeated bytes compress in Arrow
            futures = [producer.send("metered", os.urandom(10_000)) for _ in range(3)]
            producer.flush()
            offsets += [f.result(timeout=120).offset for f in futures]
    elapsed = time.monotonic() - started
    assert len(set(offsets)) == 30
    assert 300_000 / elapsed < 2 * QUOTA, elapsed
    print(f"producer: 300000 B in {elapsed:.2f} s against {QUOTA} B/s")
    assert throttle_metric(broker, "producer_byte_rate", "bob") > 0

    # fetch: the consumer byte rate is enforced on what the broker returns
    fetched, throttles, offset = 0, [], 0
    started = time.monotonic()
    with httpx.Client(base_url=broker.url, headers=key("User:alice"), timeout=60) as http:
        while time.monotonic() - started < 3:
            params: dict[str, str | int] = {
                "offset": offset,
                "max_records": 2,
                "value_format": "base64",
            }
            answer = http.get("/v1/topics/metered/partitions/0/records", params=params)
            assert answer.status_code == 200, answer.text
            got = answer.json()
            fetched += sum(len(base64.b64decode(r["value"])) for r in got["records"])
            throttles.append(got["throttle_time_ms"])
            offset = got["next_offset"] if got["next_offset"] < got["high_watermark"] else 0
    elapsed = time.monotonic() - started
    assert max(throttles) > 0, throttles
    assert fetched / elapsed < 2 * QUOTA, (fetched, elapsed)
    assert throttle_metric(broker, "consumer_byte_rate", "alice") > 0

    # a per-user override beats the default: admin is unlimited, bob gets a request rate
    overrides: list[tuple[str, dict[str, float]]] = [
        ("admin", {"producer_byte_rate": 1e12}),
        ("bob", {"request_rate": 5}),
    ]
    for user, quotas in overrides:
        change = {"entity": {"user": user}, "set": quotas}
        assert call(broker, "PATCH", "/v1/quotas", ADMIN, json=change).status_code == 200
    with httpx.Client(base_url=broker.url, headers=ADMIN, timeout=60) as http:
        for _ in range(5):
            answer = http.post("/v1/topics/metered/records", json={"records": [{"value": value}]})
            assert answer.json()["throttle_time_ms"] == 0
    with httpx.Client(base_url=broker.url, headers=key("User:bob"), timeout=60) as http:
        headers = [http.get("/v1/topics/metered/offsets").headers.get(HEADER) for _ in range(20)]
    request_throttles = [int(h) for h in headers if h is not None]
    assert request_throttles, headers
    assert max(request_throttles) <= 100  # Kafka caps request-rate throttles at one sample window
    assert throttle_metric(broker, "request_rate", "bob") > 0


def test_a_clients_throttled_answers_queue_one_after_another() -> None:
    """Pure scheduling: answers sent side by side wait in turn, not side by side."""
    now = 100.0
    first = hold_until(None, now, 500)
    second = hold_until(first, now, 500)  # sent at the same moment: waits for the first
    assert (first, second) == (100.5, 101.0)
    assert hold_until(second, 102.0, 500) == 102.5  # the queue has drained meanwhile
    assert hold_until(None, now, 0) == now
