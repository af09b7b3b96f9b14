"""A produce response lost after the broker committed: the retry must not write twice."""

from __future__ import annotations

import json
import threading

import httpx

from lakelog.client import Producer, RecordMetadata
from tests.client.conftest import create_topic, read_all
from tests.fixtures.brokers import BrokerProcess


class LoseProduceResponses(httpx.BaseTransport):
    """Delivers produce requests, lets the broker answer, then loses the first ``n`` answers.

    To the client this looks like a connection that broke after sending: the
    request may or may not have been written. Every answer the broker gave is
    kept, lost or not, so the test can see what the broker said to the retry.
    """

    def __init__(self, lose: int) -> None:
        self.inner = httpx.HTTPTransport()
        self.to_lose = lose
        self.answers: list[dict[str, object]] = []
        self.metadata: list[RecordMetadata] = []
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method != "POST" or not request.url.path.endswith("/records"):
            return response
        response.read()
        with self._lock:
            self.answers.append(json.loads(response.content))
            lose = self.to_lose > 0
            self.to_lose -= 1
        if lose:
            response.close()
            raise httpx.ReadError("connection reset after the broker answered", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


def _produce_losing_one_response(url: str, topic: str, idempotent: bool) -> LoseProduceResponses:
    transport = LoseProduceResponses(lose=1)
    # A long linger keeps the 20 records in one request until flush() sends it; the checks
    # still hold if a slow machine splits them (they read the lost request's size).
    with Producer(
        url,
        transport=transport,
        enable_idempotence=idempotent,
        retry_backoff_ms=10,
        linger_ms=1_000,
    ) as producer:
        futures = [producer.send(topic, f"v{i}", key=f"k{i}") for i in range(20)]
        producer.flush(timeout=60)
        later = producer.send(topic, "after", key="k0")
        metadata = [f.result() for f in [*futures, later]]
    transport.metadata = metadata
    return transport


def test_retry_after_a_lost_response_writes_once(broker: BrokerProcess) -> None:
    """The retry is recognised by its sequence: same offsets, ``duplicate``, one copy stored.

    The control run without idempotence writes the records twice in the same
    scenario, which shows the lost response really reached the broker.
    """
    create_topic(broker.url, "control", 2)
    control_run = _produce_losing_one_response(broker.url, "control", idempotent=False)
    # The first answer is the lost one: its records were written, and written again.
    written_twice = len(control_run.answers[0]["records"])  # type: ignore[arg-type]
    assert written_twice > 0
    control = read_all(broker.url, "control", 2, 20 + written_twice + 1)
    assert sum(len(v) for v in control.values()) == 20 + written_twice + 1

    create_topic(broker.url, "lost", 2)
    transport = _produce_losing_one_response(broker.url, "lost", idempotent=True)
    first = transport.answers[0]
    (retry,) = [a for a in transport.answers if a["duplicate"] is True]
    assert retry["records"] == first["records"], "the retry got the original offsets"
    expected = {f"v{i}".encode() for i in range(20)} | {b"after"}
    got = read_all(broker.url, "lost", 2, len(expected))
    stored = [r.value for part in got.values() for r in part]
    assert len(stored) == len(expected) and set(stored) == expected
    for i, meta in enumerate(transport.metadata):
        record = got[meta.partition][meta.offset]
        assert record.offset == meta.offset
        assert record.value == (b"after" if i == 20 else f"v{i}".encode())
