"""Two brokers on one root; SIGKILL the one the clients use, mid-stream.

Local root only: the guarantees come from the client's retry and the shared
commit protocol, not from the storage flavour, and S3 would double the
runtime of the slowest test here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import httpx
import pytest

from lakelog.client import AdminClient, Consumer, Producer, RecordMetadata, TopicPartition
from lakelog.client.connection import Connection
from tests.client.conftest import create_topic, read_all
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("make_root", ["local"], indirect=True)]

Sent = list[tuple[bytes, Future[RecordMetadata]]]


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 90) -> None:
    """Poll ``condition``; the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def delivered(sent: Sent) -> int:
    return sum(1 for _, f in list(sent) if f.done() and f.exception() is None)


class WatchProduce(httpx.BaseTransport):
    """Network transport that shows when a produce request to ``url`` is in flight,
    and keeps the errors produce attempts to it ran into."""

    def __init__(self, url: str) -> None:
        self.inner = httpx.HTTPTransport()
        self.url = url
        self.in_flight = threading.Event()
        self.errors: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        watched = request.method == "POST" and str(request.url).startswith(self.url)
        if watched:
            self.in_flight.set()
        try:
            return self.inner.handle_request(request)
        except httpx.TransportError as exc:
            if watched:
                self.errors.append(type(exc).__name__)
            raise
        finally:
            if watched:
                self.in_flight.clear()

    def close(self) -> None:
        self.inner.close()


def test_producer_and_consumer_survive_sigkill_of_their_broker(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    first, second = start_broker(root), start_broker(root)
    create_topic(first.url, "failover", 4)
    watch = WatchProduce(first.url)
    producer = Producer(
        [first.url, second.url],
        linger_ms=2,
        request_timeout_ms=15_000,
        retry_backoff_ms=20,
        transport=watch,
    )
    sent: Sent = []
    stop = threading.Event()

    def pump() -> None:
        i = 0
        while not stop.is_set():
            value = f"m{i}".encode()
            sent.append((value, producer.send("failover", value, key=f"k{i % 37}")))
            i += 1
            if i % 25 == 0:
                time.sleep(0.002)  # leave the sender some air; records still overlap commits

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    try:
        wait_for(lambda: delivered(sent) >= 500, "records delivered by the first broker")
        assert producer.connection.current == first.url
        wait_for(watch.in_flight.is_set, "a produce request in flight")
        first.kill()  # most likely mid-request: the broker was lingering or committing
        at_kill = len(sent)
        wait_for(lambda: delivered(sent[at_kill:]) >= 500, "records delivered after the first died")
    finally:
        stop.set()
        thread.join()
    producer.flush(timeout=120)
    producer.close()
    assert producer.connection.current == second.url
    assert watch.errors, "no produce attempt failed: the kill did not test failover"

    failures = [f.exception() for _, f in sent if f.exception() is not None]
    assert failures == [], f"{len(failures)} records failed, e.g. {failures[:3]}"
    # The consumer's bootstrap list starts with the dead broker: it fails over too.
    got = read_all([first.url, second.url], "failover", 4, len(sent))
    for value, future in sent:
        meta = future.result()
        assert got[meta.partition][meta.offset].value == value, f"{meta} does not hold {value!r}"
    stored = [r.value for records in got.values() for r in records]
    assert len(stored) == len(sent), "a record was written twice (or a stranger appeared)"
    for records in got.values():
        assert [r.offset for r in records] == list(range(len(records)))


def test_brokers_are_discovered_and_used_when_the_bootstrap_broker_dies(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    """Only the first broker is named; the second is found through ``/v1/brokers``."""
    first, second = start_broker(root), start_broker(root)
    with Connection(first.url) as conn:
        wait_for(lambda: second.url in conn.refresh_brokers(), "the second broker to register")
        admin = AdminClient(first.url, connection=conn)
        admin.create_topic("found", 1)
        consumer = Consumer(first.url, connection=conn, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("found", 0)])
        assert consumer.poll(100) == {}
        first.kill()
        producer = Producer(first.url, connection=conn)
        assert producer.send("found", b"via-second").result(timeout=60).offset == 0
        producer.close()
        assert conn.current == second.url
        wait_for(lambda: bool(consumer.poll(500)), "the record through the second broker")
        assert admin.describe_topic("found").partitions[0].high_watermark == 1
        consumer.close()
