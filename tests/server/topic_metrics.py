"""Reading a broker's per-topic counters off its ``/metrics`` page, and reading a topic back."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lakelog.testing.brokers import wait_for


def topic_counter(http: httpx.Client, family: str, topic: str) -> float:
    """The value of ``<family>_total{topic=...}`` (0 if the topic has no sample yet)."""
    return labelled_counter(http, family, {"topic": topic})


def labelled_counter(http: httpx.Client, family: str, labels: dict[str, str]) -> float:
    """The value of ``<family>_total`` with these labels (0 if there is no such sample yet)."""
    response = http.get("/metrics")
    assert response.status_code == 200, response.text
    for metric in text_string_to_metric_families(response.text):
        if metric.name != family:
            continue
        for sample in metric.samples:
            if sample.name == f"{family}_total" and all(
                sample.labels.get(k) == v for k, v in labels.items()
            ):
                return float(sample.value)
    return 0.0


def gauge(http: httpx.Client, name: str) -> float:
    response = http.get("/metrics")
    assert response.status_code == 200, response.text
    for metric in text_string_to_metric_families(response.text):
        for sample in metric.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"/metrics has no {name}")


def wait_for_live_brokers(clients: list[httpx.Client], count: int, timeout_s: float = 30) -> None:
    """Until every broker's view of the registry (``lakelog_live_brokers``) holds ``count``."""
    wait_for(
        lambda: all(gauge(http, "lakelog_live_brokers") == count for http in clients),
        f"every broker to see {count} live brokers",
        timeout_s,
    )


def read_partition(
    http: httpx.Client, topic: str, partition: int, page: int = 500
) -> list[dict[str, Any]]:
    """Every record of a partition, from offset 0 to the high watermark, ``page`` at a time."""
    records: list[dict[str, Any]] = []
    offset = 0
    while True:
        response = http.get(
            f"/v1/topics/{topic}/partitions/{partition}/records",
            params={"offset": offset, "max_records": page},
        )
        assert response.status_code == 200, response.text
        got = response.json()
        records += got["records"]
        if got["next_offset"] >= got["high_watermark"]:
            return records
        offset = got["next_offset"]
