"""The producer against a real broker: partitions, ordering, callbacks, flush, errors."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future

import pytest

from lakelog.client import Producer, RecordMetadata
from lakelog.client.errors import NetworkError
from lakelog.client.producer import DeliveryCallback
from lakelog.errors import (
    MessageTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from lakelog.partitioner import partition_for_key
from lakelog.testing.brokers import free_port
from tests.client.conftest import create_topic, read_all, values
from tests.fixtures.brokers import BrokerProcess


def test_keyed_records_round_trip_on_kafkas_partitions_in_order(broker: BrokerProcess) -> None:
    """Both wire formats: every record comes back byte-exact, on murmur2's partition, in order."""
    partitions = 4
    sent: dict[str, list[tuple[bytes, bytes, int]]] = {}
    for wire_format in ("json", "arrow"):
        topic = f"keyed-{wire_format}"
        create_topic(broker.url, topic, partitions)
        futures: list[tuple[bytes, bytes, Future[RecordMetadata]]] = []
        with Producer(broker.url, wire_format=wire_format, linger_ms=20) as producer:
            for i in range(300):
                key = f"user-{i % 23}".encode()
                value = bytes([i % 256, 0, 255]) + str(i).encode()
                future = producer.send(
                    topic, value, key=key, headers=[("i", str(i)), ("bin", b"\x00")]
                )
                futures.append((key, value, future))
        sent[topic] = []
        for key, value, future in futures:
            meta = future.result()
            assert meta.topic == topic
            assert meta.partition == partition_for_key(key, partitions)
            sent[topic].append((key, value, meta.partition))
        got = read_all(broker.url, topic, partitions, len(futures))
        for p in range(partitions):
            expected = [(k, v) for k, v, part in sent[topic] if part == p]
            assert [(r.key, r.value) for r in got[p]] == expected, "order within a partition"
            assert [r.offset for r in got[p]] == list(range(len(expected)))
        first = got[partition_for_key(b"user-0", partitions)][0]
        assert first.headers == [("i", b"0"), ("bin", b"\x00")]


def test_partitions_serializers_acks0_and_parallel_requests(broker: BrokerProcess) -> None:
    create_topic(broker.url, "t", 3)
    with Producer(
        broker.url,
        key_serializer=lambda k: None if k is None else json.dumps(k).encode(),
        value_serializer=lambda v: json.dumps(v).encode(),
    ) as producer:
        meta = producer.send("t", {"a": 1}, key=[1, 2], partition=2, timestamp_ms=1234).result()
        assert (meta.partition, meta.offset, meta.timestamp_ms) == (2, 0, 1234)
        tomb = producer.send("t", None, key="gone", partition=2).result()
        assert tomb.offset == 1
    with Producer(broker.url, acks=0) as fire_and_forget:
        assert not fire_and_forget.enable_idempotence
        unconfirmed = fire_and_forget.send("t", b"x", partition=1).result()
        assert (unconfirmed.partition, unconfirmed.offset) == (1, -1)
    with Producer(
        broker.url, enable_idempotence=False, max_in_flight_requests_per_topic=4, linger_ms=0
    ) as parallel:
        keyless = [parallel.send("t", f"p{i}", partition=0) for i in range(60)]
        assert sorted(f.result().offset for f in keyless) == list(range(60))
    got = read_all(broker.url, "t", 3, 63)
    first = got[2][0]
    assert (first.key, first.value, first.timestamp_ms) == (b"[1, 2]", b'{"a": 1}', 1234)
    assert got[2][1].value == b"null"  # the serializer's choice, not a tombstone
    assert values(got[1]) == [b"x"]
    assert sorted(r.value or b"" for r in got[0]) == sorted(f"p{i}".encode() for i in range(60))


def test_callbacks_run_once_in_order_and_flush_waits(broker: BrokerProcess) -> None:
    create_topic(broker.url, "cb", 2)
    outcomes: list[tuple[int, int, int]] = []
    unexpected: list[BaseException] = []
    lock = threading.Lock()

    def on_delivery(i: int) -> DeliveryCallback:
        def callback(meta: RecordMetadata | None, error: BaseException | None) -> None:
            with lock:
                if error is not None or meta is None:
                    unexpected.append(error or AssertionError("no metadata"))
                else:
                    outcomes.append((meta.partition, meta.offset, i))

        return callback

    producer = Producer(broker.url, linger_ms=50)
    try:
        futures = [
            producer.send("cb", str(i), partition=i % 2, callback=on_delivery(i))
            for i in range(200)
        ]
        producer.flush(timeout=60)
        assert all(f.done() for f in futures), "flush returned with records unsettled"
        assert unexpected == []
        assert len(outcomes) == 200, "a callback ran twice or not at all"
        for p in (0, 1):
            mine = [(off, i) for part, off, i in outcomes if part == p]
            assert [i for _, i in mine] == sorted(i for _, i in mine), "callbacks out of order"
            assert [off for off, _ in mine] == list(range(100))
        # flush with nothing pending returns at once; the producer keeps working after it
        producer.flush(timeout=60)
        assert producer.send("cb", "after", partition=0).result().offset == 100
    finally:
        producer.close()
    with pytest.raises(RuntimeError):
        producer.send("cb", "closed")

    # Errors: each fails its own futures (and callbacks), and the producer carries on.
    create_topic(broker.url, "small", 1, max_message_bytes="100")
    errors: list[BaseException | None] = []
    with Producer(broker.url, max_request_size=10_000) as producer:
        too_big_locally = producer.send("small", b"x" * 20_000)
        assert isinstance(too_big_locally.exception(), MessageTooLargeError)
        unknown = producer.send("no-such-topic", b"x", callback=lambda m, e: errors.append(e))
        error = unknown.exception(timeout=60)
        assert isinstance(error, UnknownTopicOrPartitionError) and not error.retriable
        assert errors == [error]
        # Rejected by the broker (max.message.bytes): nothing is written but the request
        # used sequence numbers; the topic's next request must still be accepted.
        rejected = producer.send("small", b"y" * 500)
        assert isinstance(rejected.exception(timeout=60), MessageTooLargeError)
        ok = [producer.send("small", f"ok{i}") for i in range(5)]
        assert [f.result(timeout=60).offset for f in ok] == [0, 1, 2, 3, 4]
    assert values(read_all(broker.url, "small", 1, 5)[0]) == [f"ok{i}".encode() for i in range(5)]


def test_unreachable_cluster_times_out_and_close_settles_everything() -> None:
    """No broker at all: retries stop at delivery_timeout_ms; close(timeout) fails the rest."""
    dead = f"127.0.0.1:{free_port()}"
    producer = Producer(
        dead, request_timeout_ms=500, delivery_timeout_ms=1_500, retry_backoff_max_ms=200
    )
    future = producer.send("t", b"x")
    error = future.exception(timeout=30)
    assert isinstance(error, RequestTimedOutError)
    assert isinstance(error.__cause__, NetworkError)
    stuck = Producer(dead, request_timeout_ms=500, delivery_timeout_ms=60_000)
    pending = [stuck.send("t", b"x") for _ in range(3)]
    stuck.close(timeout=0.5)
    assert all(f.done() for f in pending)
    assert all(isinstance(f.exception(), RequestTimedOutError) for f in pending)
    producer.close()
