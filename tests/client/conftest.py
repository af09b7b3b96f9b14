"""Fixtures and helpers for client tests: a broker on the test's root, topics, reading back."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import pytest

from lakelog.client import AdminClient, Consumer, TopicPartition
from lakelog.records import ConsumerRecord
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec


@pytest.fixture
def broker(root: RootSpec, start_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    """One real broker process over the (parametrised) root."""
    return start_broker(root)


def create_topic(url: str, name: str, partitions: int = 1, **configs: str) -> None:
    with AdminClient(url) as admin:
        admin.create_topic(name, partitions, {k.replace("_", "."): v for k, v in configs.items()})


def read_all(
    urls: str | list[str],
    topic: str,
    partitions: int,
    expected: int,
    timeout_s: float = 60,
    **consumer_options: Any,
) -> dict[int, list[ConsumerRecord]]:
    """Every record of the topic, per partition, once ``expected`` records have been seen.

    Fails (rather than hangs) if fewer arrive within ``timeout_s``; that bound
    only guards against a hang, it asserts nothing about speed.
    """
    out: dict[int, list[ConsumerRecord]] = {p: [] for p in range(partitions)}
    consumer = Consumer(urls, auto_offset_reset="earliest", **consumer_options)
    with consumer:
        consumer.assign(TopicPartition(topic, p) for p in range(partitions))
        deadline = time.monotonic() + timeout_s
        seen = 0
        while seen < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                out[tp.partition].extend(records)
                seen += len(records)
        # One more short poll: anything beyond ``expected`` would be a duplicate.
        for tp, records in consumer.poll(200).items():
            out[tp.partition].extend(records)
    assert sum(len(v) for v in out.values()) >= expected, "records missing after the timeout"
    return out


def values(records: Iterable[ConsumerRecord]) -> list[bytes | None]:
    return [r.value for r in records]


class RecordingTransport(httpx.BaseTransport):
    """Passes requests to the network, keeping (method, path, status) of each."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.calls: list[tuple[str, str, int]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        self.calls.append((request.method, request.url.path, response.status_code))
        return response

    def close(self) -> None:
        self.inner.close()
