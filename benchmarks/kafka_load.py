"""The client processes of the ``kafka`` suite: confluent-kafka producers, consumers, committers.

Every function here runs in a worker process of its own (spawned by the
suite), so a client's CPU is not the broker's and the GIL of one client does
not slow another. Arguments and results are plain picklable values. Times
that cross processes are ``time.monotonic()`` readings: CLOCK_MONOTONIC is
one clock for the whole machine on Linux, so a producer's stamp and a
consumer's receive time can be subtracted.

``bootstrap=None`` means librdkafka's in-process mock cluster
(``test.mock.num.brokers=1``): the protocol's own cost against an in-memory
broker, with the same client code.
"""

from __future__ import annotations

import http.client
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from benchmarks.bench_groups import CommitFigures, CommitThread, measure
from benchmarks.broker_load import ARROW_TYPE, arrow_body, produce_path
from benchmarks.common import random_binary
from lakelog.testing.brokers import LOOPBACK

#: A stamped value starts with (monotonic ns when due, when sent, kind); the rest is padding.
STAMP = struct.Struct(">QQB")
KIND_AT = 16
WARMUP, TIMED, STOP = 0, 1, 2
#: Records a closed-loop producer sends (and flushes) before its clock starts.
WARMUP_RECORDS = 1
#: How long ``consume_range`` lets one ``consume`` call wait. confluent-kafka's
#: ``consume(n, timeout)`` returns only once it has ``n`` messages or the timeout
#: has passed, so the last, partial batch of a range always waits the whole
#: timeout: at 0.5 s that wait was most of a 300,000-record read.
RANGE_POLL_S = 0.01
#: librdkafka logs only errors (the mock cluster announces itself at notice level).
QUIET = {"log_level": 3}


def client_config(bootstrap: str | None) -> dict[str, Any]:
    """The connection part of a client's settings: a broker, or the in-process mock cluster."""
    if bootstrap is None:
        return {"test.mock.num.brokers": 1, **QUIET}
    return {"bootstrap.servers": bootstrap, **QUIET}


def producer_config(bootstrap: str | None, idempotent: bool) -> dict[str, Any]:
    """The suite's producer: acks=all, linger.ms=5, default batching, no key."""
    return {
        **client_config(bootstrap),
        "acks": "all",
        "linger.ms": 5,
        "enable.idempotence": idempotent,
    }


def make_values(count: int, value_bytes: int, seed: int) -> list[bytes]:
    """``count`` distinct random values (a few, reused: values are built before the clock)."""
    array = random_binary(count, value_bytes, np.random.default_rng(seed))
    return [bytes(v) for v in array.to_pylist()]


def _produce(producer: Any, topic: str, value: bytes, **kwargs: Any) -> None:
    """``produce``, serving callbacks while librdkafka's queue is full."""
    while True:
        try:
            producer.produce(topic, value, **kwargs)
            return
        except BufferError:
            producer.poll(0.001)


@dataclass
class ProduceFigures:
    """What a closed-loop producer measured; ``partitions`` is what its topic had."""

    records: int
    seconds: float
    errors: list[str] = field(default_factory=list)
    partitions: int = 0
    bootstrap: str = ""


def produce_closed(
    bootstrap: str | None, topic: str, records: int, value_bytes: int, idempotent: bool
) -> ProduceFigures:
    """Produce ``records`` values as fast as the producer takes them; seconds until all acked.

    One record is produced and flushed first (metadata, connections, producer
    id), untimed.
    """
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, idempotent))
    values = make_values(64, value_bytes, seed=1)
    errors: list[str] = []
    acked = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is not None:
            if len(errors) < 10:
                errors.append(str(err))
        else:
            acked += 1

    for i in range(WARMUP_RECORDS):
        _produce(producer, topic, values[i], on_delivery=delivered)
    if producer.flush(60) != 0:
        return ProduceFigures(0, 0.0, ["the warm-up record was not acknowledged in 60 s"])
    acked = 0
    partitions = len(producer.list_topics(topic, timeout=30).topics[topic].partitions)
    start = time.perf_counter()
    for i in range(records):
        _produce(producer, topic, values[i & 63], on_delivery=delivered)
    left = producer.flush(600)
    seconds = time.perf_counter() - start
    if left:
        errors.append(f"{left} records not acknowledged after 600 s")
    return ProduceFigures(acked, seconds, errors, partitions)


@dataclass
class LatencyFigures:
    """What an open-loop producer measured: latency of every timed record, in ms.

    ``max_lag_ms``: how far behind its schedule the generator itself ever got
    (when it handed a record to the client, after that record was due); a
    large lag means the client process, not the broker, set the pace.
    """

    scheduled: int
    latencies_ms: list[float]
    max_lag_ms: float
    errors: list[str] = field(default_factory=list)


def produce_open(
    bootstrap: str | None,
    topic: str,
    rate: float,
    value_bytes: int,
    start_at: float,
    warmup_s: float,
    duration_s: float,
    idempotent: bool = False,
) -> LatencyFigures:
    """Records due on a fixed schedule (``rate``/s from ``start_at``), timed from when due.

    Each value is stamped with when it was due, when it was sent (monotonic
    ns) and its kind (warm-up, timed, and one stop record at the end), for a
    consumer to time end to end. Latency runs from when a record was due to
    its delivery callback, so a slow acknowledgement cannot hide the records
    queued behind it. The loop wakes every millisecond (``poll``) and
    produces every record due by then; one callback serves every record (it
    reads the due time back from the value), which keeps the generator's own
    cost per record low enough for hundreds of thousands of records a second.
    """
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, idempotent))
    padding = make_values(1, value_bytes, seed=2)[0][STAMP.size :]
    clock = time.monotonic_ns
    first = int(start_at * 1e9)
    step = 1e9 / rate
    begin = first + int(warmup_s * 1e9)
    end = begin + int(duration_s * 1e9)
    total = int((warmup_s + duration_s) * rate)
    latencies: list[float] = []
    errors: list[str] = []
    scheduled = 0
    max_lag = 0

    def delivered(err: Any, message: Any) -> None:
        if err is not None:
            if len(errors) < 10:
                errors.append(str(err))
            return
        value = message.value()
        if value[KIND_AT] == TIMED:
            latencies.append((clock() - STAMP.unpack_from(value)[0]) / 1e6)

    producer.list_topics(topic, timeout=30)  # metadata and connections before the clock
    pack, produce = STAMP.pack, producer.produce
    i = 0
    while i < total:
        due_by_now = min(int((clock() - first) / step) + 1, total)
        while i < due_by_now:
            due = first + int(i * step)
            timed = begin <= due < end
            try:
                produce(
                    topic,
                    pack(due, clock(), TIMED if timed else WARMUP) + padding,
                    on_delivery=delivered,
                )
            except BufferError:
                producer.poll(0.001)
                continue
            scheduled += timed
            i += 1
        if i:
            max_lag = max(max_lag, clock() - (first + int((i - 1) * step)))
        producer.poll(0.001)
    now = clock()
    _produce(producer, topic, pack(now, now, STOP) + padding)
    left = producer.flush(120)
    if left:
        errors.append(f"{left} records not acknowledged 120 s after the last was due")
    return LatencyFigures(scheduled, latencies, max_lag / 1e6, errors)


@dataclass
class ConsumeFigures:
    """What a consumer measured: records read, seconds, and end-to-end latencies in ms."""

    records: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def consumer_config(bootstrap: str) -> dict[str, Any]:
    """A plain consumer: library defaults, a group only for its client id, no commits."""
    return {
        **client_config(bootstrap),
        "group.id": "lakelog-bench-reader",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    }


def _assign_from_start(consumer: Any, topic: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])


#: librdkafka pauses fetching for ``fetch.queue.backoff.ms`` (1 s by default) once
#: more than ``queued.min.messages`` wait in the client; a reader that drains more
#: slowly than the broker serves then idles for whole seconds.
QUICK_REFETCH = {"fetch.queue.backoff.ms": 10}


def consume_range(
    bootstrap: str, topic: str, timeout_s: float, settings: dict[str, Any] | None = None
) -> ConsumeFigures:
    """Read every partition of ``topic`` from its start to the end it had when called.

    The clock starts at ``assign`` (metadata and watermarks already fetched)
    and stops when the last record is in the application's hands. The mock
    cluster keeps only the newest few megabytes of a partition, so its start
    may be past offset 0: the figure is records read over seconds. ``settings``
    override the consumer's library defaults.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**consumer_config(bootstrap), **(settings or {})})
    errors: list[str] = []
    got = 0
    try:
        count = len(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(count)
        }
        pending = {p for p, end in ends.items() if end > 0}
        start = time.perf_counter()
        _assign_from_start(consumer, topic)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(10_000, RANGE_POLL_S):
                if message.error() is not None:
                    errors.append(str(message.error()))
                    continue
                got += 1
                partition, offset = message.partition(), message.offset()
                if partition is not None and offset is not None and offset + 1 >= ends[partition]:
                    pending.discard(partition)
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    if pending:
        errors.append(f"partitions {sorted(pending)} not read to their end in {timeout_s:g} s")
    return ConsumeFigures(got, seconds, errors=errors[:10])


def consume_stamped(bootstrap: str, topic: str, timeout_s: float) -> ConsumeFigures:
    """Read a fresh topic from the beginning until the stop record; time every timed value."""
    from confluent_kafka import Consumer

    consumer = Consumer(consumer_config(bootstrap))
    latencies: list[float] = []
    errors: list[str] = []
    got = 0
    start = time.perf_counter()
    try:
        _assign_from_start(consumer, topic)
        deadline = time.monotonic() + timeout_s
        stopped = False
        while not stopped and time.monotonic() < deadline:
            for message in consumer.consume(1_000, 0.1):
                now = time.monotonic_ns()
                if message.error() is not None:
                    errors.append(str(message.error()))
                    continue
                got += 1
                _due, sent, kind = STAMP.unpack_from(message.value() or b"")
                if kind == TIMED:
                    latencies.append((now - sent) / 1e6)
                stopped = stopped or kind == STOP
        if not stopped:
            errors.append(f"no stop record within {timeout_s:g} s")
    finally:
        consumer.close()
    return ConsumeFigures(got, time.perf_counter() - start, latencies, errors[:10])


def serve_mock(topic: str, records: int, value_bytes: int, conn: Connection) -> None:
    """A mock cluster holding ``records`` records of ``topic``, alive until told to stop.

    The cluster lives inside the producer that filled it, so this process
    sends its bootstrap address (a broker's host:port from the metadata) and
    then waits for any message on ``conn``.
    """
    from confluent_kafka import Producer

    producer = Producer(producer_config(None, idempotent=False))
    values = make_values(64, value_bytes, seed=1)
    for i in range(records):
        _produce(producer, topic, values[i & 63])
    producer.flush(600)
    broker = next(iter(producer.list_topics(topic, timeout=30).brokers.values()))
    conn.send(f"{broker.host}:{broker.port}")
    conn.recv()


def http_arrow_produce(
    port: int, topic: str, partitions: int, records: int, batch: int, value_bytes: int
) -> ProduceFigures:
    """One connection posting Arrow IPC bodies of ``batch`` records, partitions in turn."""
    rng = np.random.default_rng(3)
    bodies = [arrow_body(random_binary(batch, value_bytes, rng), p) for p in range(partitions)]
    path = produce_path("v1", topic)
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=120)
    headers = {"Content-Type": ARROW_TYPE}
    errors: list[str] = []
    sent = 0
    try:
        conn.request("POST", path, bodies[0], headers)  # untimed: the connection and the route
        conn.getresponse().read()
        start = time.perf_counter()
        for i in range(max(records // batch, 1)):
            conn.request("POST", path, bodies[i % partitions], headers)
            response = conn.getresponse()
            data = response.read()
            if response.status != 200:
                errors.append(f"HTTP {response.status}: {data[:200]!r}")
                break
            sent += batch
        seconds = time.perf_counter() - start
    finally:
        conn.close()
    return ProduceFigures(sent, seconds, errors)


def commit_load(
    bootstrap: str,
    group: str,
    topic: str,
    partitions: list[int],
    interval_s: float,
    warmup_s: float,
    seconds: float,
) -> CommitFigures:
    """One committer per partition, each committing its offset every ``interval_s`` seconds.

    A committer is a confluent-kafka consumer of ``group`` with
    ``enable.auto.commit=False`` calling ``commit(offsets, asynchronous=False)``
    for its partition without joining the group (a manually assigned
    consumer's commit: generation -1), driven by the groups suite's load
    generator.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumers = [Consumer({**consumer_config(bootstrap), "group.id": group}) for _ in partitions]

    def committer(consumer: Any, partition: int) -> Callable[[int], None]:
        def commit(offset: int) -> None:
            consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)

        return commit

    threads = [
        CommitThread(committer(c, p), time.sleep, f"committer {p}")
        for c, p in zip(consumers, partitions, strict=True)
    ]
    try:
        for c in consumers:  # connections and metadata, untimed
            c.list_topics(topic, timeout=30)
        return measure(threads, interval_s, warmup_s, seconds)
    finally:
        for t in threads:
            t.stop()
        for c in consumers:
            c.close()
