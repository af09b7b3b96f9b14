"""A real broker process: produce, fetch, long poll, errors (local root and S3)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec


def test_produce_fetch_round_trip(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        created = http.post("/v1/topics", json={"name": "events", "partitions": 2})
        assert created.status_code == 201, created.text
        sent = http.post(
            "/v1/topics/events/records",
            json={"records": [{"value": f"m{i}", "partition": i % 2} for i in range(6)]},
        )
        assert sent.status_code == 200, sent.text
        assert [r["offset"] for r in sent.json()["records"]] == [0, 0, 1, 1, 2, 2]
        got = http.get("/v1/topics/events/partitions/1/records", params={"offset": 0}).json()
        assert [r["value"] for r in got["records"]] == ["m1", "m3", "m5"]
        assert got["high_watermark"] == 3


def test_long_poll_returns_when_data_arrives(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        http.post("/v1/topics", json={"name": "t", "partitions": 1}).raise_for_status()

        def produce_later() -> None:
            time.sleep(0.5)
            httpx.post(
                f"{broker.url}/v1/topics/t/records", json={"records": [{"value": "late"}]}
            ).raise_for_status()

        threading.Thread(target=produce_later).start()
        started = time.monotonic()
        got = http.get(
            "/v1/topics/t/partitions/0/records", params={"offset": 0, "max_wait_ms": 60_000}
        ).json()
        waited = time.monotonic() - started
        assert [r["value"] for r in got["records"]] == ["late"]
        assert waited < 30, "the long poll ran to its 60 s deadline instead of returning on arrival"
