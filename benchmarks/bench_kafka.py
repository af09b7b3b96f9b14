"""The broker over Kafka's wire protocol, through an unmodified confluent-kafka client.

One broker subprocess (``python -m server`` with a Kafka listener) serves a
temporary local root. Every client is a confluent-kafka (librdkafka) client
in a worker process of its own (:mod:`benchmarks.kafka_load`), with 100-byte
values, no key, ``acks=all``, ``linger.ms=5`` and librdkafka's default
batching. Each figure has baselines measured in the same run:

* produce throughput: one producer sending N records as fast as it can, until
  all are acknowledged, idempotence off and on. Baselines: the same producer
  code against librdkafka's in-process mock cluster (an in-memory broker: the
  protocol's and the client's own cost), and lakelog's HTTP Arrow produce
  path (one connection posting Arrow IPC bodies of 10,000 records, the same
  N records over the same partitions).
* produce latency: the producer on a fixed schedule at half the saturation
  measured above (open loop: latency runs from when a record was due to its
  delivery callback). Baseline: the mock cluster on the same schedule.
* fetch throughput: one consumer assigned every partition from the
  beginning, reading the N records the first produce wrote. Baselines: the
  same consumer against a mock cluster filled with N records (in another
  process; it keeps only the newest few megabytes of each partition, so it
  serves fewer: both figures are records read per second), and lakelog's
  HTTP Arrow fetch of the same partitions. It runs twice: with the client's
  defaults, and with ``fetch.queue.backoff.ms=10`` (librdkafka otherwise stops
  fetching for a second whenever the application drains its queue more slowly
  than the broker fills it); the mock cluster gets the same two settings.
* end-to-end latency: a producer process stamps each value with its send
  time, a consumer process takes the receive time; the same schedule as
  produce latency. Baseline: the producer's own acknowledgement latency in
  the same window.
* offset commits: M committers of one group (100 at small and large), each a
  confluent-kafka consumer with ``enable.auto.commit=False`` calling
  ``commit(offsets, asynchronous=False)`` once a second for its own
  partition, spread over a few processes. They do not join the group (a
  manually assigned consumer's commit, generation -1): a 100-member join is
  the groups suite's subject, this is the commit path. Baseline: the naive
  offsets table of the groups suite, one ``write_deltalake`` append per
  commit, serialized, in-process.

* produce on an S3-protocol root: a second broker over a bucket of moto's
  standalone S3 server (loopback, no added delay), the same producer
  closed loop (a third of N records) and open loop at half that saturation.
  Baseline: the local root's figure from this run.

Goals are printed in the notes, each beside its figure.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import kafka_load
from benchmarks.bench_groups import CommitFigures, CommitThread, NaiveOffsets, measure
from benchmarks.broker_admin import broker_metrics, loop_lag_ms
from benchmarks.broker_load import RangeRead, read_range, target_of
from benchmarks.common import (
    JSONScalar,
    Progress,
    Report,
    Result,
    config_for,
    load_note,
    percentile,
    rate,
    scratch_dir,
    settle_disk,
)
from benchmarks.servers import start_broker
from lakelog.client import AdminClient
from lakelog.testing.brokers import ServerProcess
from lakelog.testing.s3 import start_moto

NAME = "kafka"
DESCRIPTION = (
    "Kafka listener with confluent-kafka: produce throughput/latency, fetch throughput, "
    "end-to-end latency, offset commits vs librdkafka's mock cluster, HTTP Arrow, naive Delta"
)

PRODUCE = "kafka produce throughput"
LATENCY = "kafka produce latency"
FETCH = "kafka fetch throughput"
E2E = "kafka end-to-end latency"
COMMITS = "kafka offset commits"
S3 = "kafka produce, S3-protocol root (moto)"

MOCK = "librdkafka mock cluster"
HTTP_ARROW = "HTTP Arrow"
ACK = "produce ack"
NAIVE = "naive Delta append"
LOCAL = "local root"

VALUE_BYTES = 100
HTTP_BATCH = 10_000
#: A fraction of the measured saturation for the open-loop windows.
LOAD_FRACTION = 0.5
#: librdkafka mock cluster's partitions for an auto-created topic; the broker's topics match it.
DEFAULT_PARTITIONS = 4
#: The fetch runs once per consumer configuration: the library's defaults, and
#: refetching after 10 ms instead of 1 s once the client's queue is full.
FETCH_CLIENTS: dict[str, dict[str, Any]] = {
    "library defaults": {},
    "fetch.queue.backoff.ms=10": kafka_load.QUICK_REFETCH,
}


@dataclass(frozen=True)
class KafkaBenchConfig:
    records: int  # produced per throughput run, and read back by the fetch
    latency_warmup_s: float
    latency_seconds: float
    committers: int
    commit_processes: int
    commit_warmup_s: float
    commit_seconds: float


CONFIGS = {
    "tiny": KafkaBenchConfig(20_000, 0.5, 1.5, 4, 2, 1.0, 2.0),
    # A throughput run lasts over a second: at 300,000 records (half a second) the
    # same producer and broker measured 464,000-613,000 records/s from run to run.
    "small": KafkaBenchConfig(1_000_000, 2.0, 8.0, 100, 4, 3.0, 8.0),
    "large": KafkaBenchConfig(2_000_000, 5.0, 30.0, 100, 4, 5.0, 30.0),
}


@dataclass(frozen=True)
class Goal:
    """A figure's target: at least (higher is better) or at most ``value``."""

    value: float
    unit: str
    at_least: bool

    def verdict(self, figure: float) -> str:
        met = figure >= self.value if self.at_least else figure <= self.value
        sign = ">=" if self.at_least else "<="
        return f"goal {sign} {self.value:,.0f} {self.unit}: {'met' if met else 'MISSED'}"


GOALS: dict[str, Goal] = {
    PRODUCE: Goal(500_000, "records/s", True),
    LATENCY: Goal(50, "ms", False),
    FETCH: Goal(1_000_000, "records/s", True),
    E2E: Goal(100, "ms", False),
    COMMITS: Goal(100, "ms", False),
    S3: Goal(150, "ms", False),
}


def _checked(figures: kafka_load.ProduceFigures | kafka_load.ConsumeFigures, what: str) -> None:
    if figures.errors:
        raise RuntimeError(f"{what} failed: {'; '.join(figures.errors)}")


def _p99(values: Sequence[float]) -> float:
    return percentile(values, 99) if values else math.nan


@contextlib.contextmanager
def client_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """Worker processes for the clients, spawned (librdkafka's threads survive no fork)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        yield pool


def create_topic(server: ServerProcess, topic: str, partitions: int) -> None:
    with AdminClient(server.url) as admin:
        admin.create_topic(topic, partitions)


def open_loop_produce(
    cfg: KafkaBenchConfig,
    pool: ProcessPoolExecutor,
    bootstrap: str | None,
    topic: str,
    target: float,
) -> kafka_load.LatencyFigures:
    """One producer process on a fixed schedule of ``target`` records/s (see ``produce_open``)."""
    settle_disk()
    figures = pool.submit(
        kafka_load.produce_open,
        bootstrap,
        topic,
        target,
        VALUE_BYTES,
        time.monotonic() + 1.0,
        cfg.latency_warmup_s,
        cfg.latency_seconds,
    ).result()
    if figures.errors or not figures.latencies_ms:
        raise RuntimeError(f"the open-loop produce to {topic} failed: {figures.errors}")
    return figures


# -- the phases ------------------------------------------------------------------


@dataclass
class ProducePhase:
    results: list[Result]
    saturation: float  # records/s of lakelog, idempotence off
    topic: str  # holds ``records`` records, for the fetch
    partitions: int


def bench_produce(
    cfg: KafkaBenchConfig, server: ServerProcess, pool: ProcessPoolExecutor, progress: Progress
) -> ProducePhase:
    assert server.kafka is not None
    results = []
    saturation = 0.0
    partitions = DEFAULT_PARTITIONS
    params: dict[str, JSONScalar] = {
        "records": cfg.records,
        "value_bytes": VALUE_BYTES,
        "linger_ms": 5,
        "acks": "all",
    }
    progress(f"produce: HTTP Arrow, {cfg.records:,} records")
    create_topic(server, "http-arrow", partitions)
    http = pool.submit(
        kafka_load.http_arrow_produce,
        server.port,
        "http-arrow",
        partitions,
        cfg.records,
        HTTP_BATCH,
        VALUE_BYTES,
    ).result()
    _checked(http, "the HTTP Arrow produce")
    for idempotent in (False, True):
        label = f"idempotence {'on' if idempotent else 'off'}"
        progress(f"produce: mock cluster, {label}")
        settle_disk()
        mock = pool.submit(
            kafka_load.produce_closed, None, "bench", cfg.records, VALUE_BYTES, idempotent
        ).result()
        _checked(mock, "the mock cluster produce")
        partitions = mock.partitions or partitions
        topic = f"produce-{'idempotent' if idempotent else 'plain'}"
        create_topic(server, topic, partitions)
        progress(f"produce: lakelog, {label}")
        settle_disk()
        ours = pool.submit(
            kafka_load.produce_closed, server.kafka, topic, cfg.records, VALUE_BYTES, idempotent
        ).result()
        _checked(ours, "the lakelog produce")
        value = rate(ours.records, ours.seconds)
        if not idempotent:
            saturation = value
        results.append(
            Result(
                PRODUCE,
                f"one producer, {label}, {partitions} partitions",
                "throughput",
                value,
                "records/s",
                {
                    MOCK: rate(mock.records, mock.seconds),
                    HTTP_ARROW: rate(http.records, http.seconds),
                },
                params={**params, "idempotent": idempotent, "partitions": partitions},
            )
        )
    return ProducePhase(results, saturation, "produce-plain", partitions)


def bench_latency(
    cfg: KafkaBenchConfig,
    server: ServerProcess,
    pool: ProcessPoolExecutor,
    phase: ProducePhase,
    progress: Progress,
) -> tuple[list[Result], list[Result]]:
    """Produce latency and end-to-end latency, both at half the measured saturation."""
    assert server.kafka is not None
    target = max(phase.saturation * LOAD_FRACTION, 10.0)
    params = {
        "rate": round(target),
        "fraction_of_saturation": LOAD_FRACTION,
        "warmup_s": cfg.latency_warmup_s,
        "seconds": cfg.latency_seconds,
        "partitions": phase.partitions,
    }

    def open_loop(bootstrap: str | None, topic: str) -> kafka_load.LatencyFigures:
        return open_loop_produce(cfg, pool, bootstrap, topic, target)

    progress(f"produce latency: mock cluster, {target:,.0f} records/s")
    mock = open_loop(None, "latency")
    progress(f"produce latency: lakelog, {target:,.0f} records/s")
    create_topic(server, "latency", phase.partitions)
    before = broker_metrics(server)
    ours = open_loop(server.kafka, "latency")
    lag = loop_lag_ms(before, broker_metrics(server))
    variant = f"acks=all, open loop at {LOAD_FRACTION:.0%} of saturation"
    latency = [
        Result(
            LATENCY,
            variant,
            metric,
            percentile(ours.latencies_ms, q),
            "ms",
            {MOCK: percentile(mock.latencies_ms, q)},
            higher_is_better=False,
            params={
                **params,
                "records": len(ours.latencies_ms),
                "scheduled": ours.scheduled,
                "generator_max_lag_ms": round(ours.max_lag_ms, 1),
                "mock_generator_max_lag_ms": round(mock.max_lag_ms, 1),
                **lag,
            },
        )
        for metric, q in (("p50", 50), ("p99", 99))
    ]

    progress(f"end-to-end: lakelog, {target:,.0f} records/s")
    create_topic(server, "e2e", phase.partitions)
    settle_disk()
    before = broker_metrics(server)
    consumer: Future[kafka_load.ConsumeFigures] = pool.submit(
        kafka_load.consume_stamped,
        server.kafka,
        "e2e",
        cfg.latency_warmup_s + cfg.latency_seconds + 120,
    )
    producer = pool.submit(
        kafka_load.produce_open,
        server.kafka,
        "e2e",
        target,
        VALUE_BYTES,
        time.monotonic() + 3.0,  # the consumer process is assigned by then
        cfg.latency_warmup_s,
        cfg.latency_seconds,
    ).result()
    received = consumer.result()
    lag = loop_lag_ms(before, broker_metrics(server))
    _checked(received, "the end-to-end consumer")
    if producer.errors or not received.latencies_ms:
        raise RuntimeError(f"the end-to-end producer failed: {producer.errors}")
    e2e = [
        Result(
            E2E,
            f"produce -> consume, {LOAD_FRACTION:.0%} of saturation",
            metric,
            percentile(received.latencies_ms, q),
            "ms",
            {ACK: percentile(producer.latencies_ms, q)},
            higher_is_better=False,
            params={
                **params,
                "received": len(received.latencies_ms),
                "generator_max_lag_ms": round(producer.max_lag_ms, 1),
                **lag,
            },
        )
        for metric, q in (("p50", 50), ("p99", 99))
    ]
    return latency, e2e


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(kafka_load.consumer_config(bootstrap))
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def bench_fetch(
    cfg: KafkaBenchConfig,
    server: ServerProcess,
    pool: ProcessPoolExecutor,
    phase: ProducePhase,
    progress: Progress,
) -> list[Result]:
    assert server.kafka is not None
    stored = cfg.records + kafka_load.WARMUP_RECORDS
    ours: dict[str, kafka_load.ConsumeFigures] = {}
    for label, settings in FETCH_CLIENTS.items():
        progress(f"fetch: lakelog, {cfg.records:,} records, {label}")
        ours[label] = pool.submit(
            kafka_load.consume_range, server.kafka, phase.topic, 300, settings
        ).result()
        _checked(ours[label], "the lakelog fetch")
        if ours[label].records != stored:
            raise RuntimeError(
                f"the lakelog fetch read {ours[label].records} of {stored} records ({label})"
            )

    progress("fetch: HTTP Arrow, the same partitions")
    ends = end_offsets(server.kafka, phase.topic, phase.partitions)
    target = target_of(server)
    http_records, http_seconds = 0, 0.0
    for partition, end in enumerate(ends):
        part = pool.submit(
            read_range, RangeRead(target, phase.topic, partition, 0, end, "arrow", HTTP_BATCH)
        ).result()
        if part.errors:
            raise RuntimeError(f"the HTTP Arrow fetch failed: {part.errors[:3]}")
        http_records += part.records
        http_seconds += part.seconds

    progress(f"fetch: mock cluster holding {cfg.records:,} records")
    context = multiprocessing.get_context("spawn")
    ours_end, theirs_end = context.Pipe()
    holder = context.Process(
        target=kafka_load.serve_mock,
        args=("fetch", cfg.records, VALUE_BYTES, theirs_end),
        daemon=True,
    )
    holder.start()
    try:
        if not ours_end.poll(600):
            raise RuntimeError("the mock cluster was not filled in 600 s")
        bootstrap = ours_end.recv()
        mock: dict[str, kafka_load.ConsumeFigures] = {}
        for label, settings in FETCH_CLIENTS.items():
            mock[label] = pool.submit(
                kafka_load.consume_range, bootstrap, "fetch", 300, settings
            ).result()
            _checked(mock[label], "the mock cluster fetch")
    finally:
        ours_end.send("stop")
        holder.join(30)
        if holder.is_alive():
            holder.kill()
            holder.join()
    return [
        Result(
            FETCH,
            f"one consumer from the beginning, {phase.partitions} partitions, {label}",
            "throughput",
            rate(ours[label].records, ours[label].seconds),
            "records/s",
            {
                MOCK: rate(mock[label].records, mock[label].seconds),
                HTTP_ARROW: rate(http_records, http_seconds),
            },
            params={
                "records": cfg.records,
                "mock_records": mock[label].records,
                "value_bytes": VALUE_BYTES,
                "consumer": label,
            },
        )
        for label in FETCH_CLIENTS
    ]


def bench_commits(
    cfg: KafkaBenchConfig,
    server: ServerProcess,
    pool: ProcessPoolExecutor,
    scratch: Path,
    progress: Progress,
) -> list[Result]:
    assert server.kafka is not None
    create_topic(server, "commits", cfg.committers)
    progress(f"commits: lakelog, {cfg.committers} committers once a second")
    chunks = [
        list(range(cfg.committers))[i :: cfg.commit_processes] for i in range(cfg.commit_processes)
    ]
    settle_disk()
    futures = [
        pool.submit(
            kafka_load.commit_load,
            server.kafka,
            "bench-commits",
            "commits",
            chunk,
            1.0,
            cfg.commit_warmup_s,
            cfg.commit_seconds,
        )
        for chunk in chunks
        if chunk
    ]
    parts = [f.result() for f in futures]
    ours = CommitFigures(
        offered=sum(p.offered for p in parts),
        achieved=sum(p.achieved for p in parts),
        latencies=[x for p in parts for x in p.latencies],
    )

    progress(f"commits: {NAIVE}, {cfg.committers} threads once a second")
    table = NaiveOffsets(str(scratch / "naive-offsets"))
    threads = [
        CommitThread(partial(table.commit, f"g\0commits\0{i}"), time.sleep, f"naive {i}")
        for i in range(cfg.committers)
    ]
    try:
        naive = measure(threads, 1.0, cfg.commit_warmup_s, cfg.commit_seconds)
    finally:
        for t in threads:
            t.stop()
    variant = f"{cfg.committers} committers, 1/s each"
    params = {
        "committers": cfg.committers,
        "processes": len(futures),
        "seconds": cfg.commit_seconds,
        "commits": len(ours.latencies),
        "naive_commits": len(naive.latencies),
    }
    return [
        Result(COMMITS, variant, metric, value, unit, {NAIVE: base}, higher, params)
        for metric, unit, value, base, higher in (
            ("offered", "commits/s", ours.offered, naive.offered, True),
            ("throughput", "commits/s", ours.achieved, naive.achieved, True),
            ("p99 latency", "ms", ours.p99_ms, naive.p99_ms, False),
        )
    ]


def bench_s3(
    cfg: KafkaBenchConfig,
    scratch: Path,
    pool: ProcessPoolExecutor,
    local: Sequence[Result],
    partitions: int,
    progress: Progress,
) -> list[Result]:
    """Produce throughput and latency of a broker over a bucket of moto's S3 server."""
    records = max(cfg.records // 3, 1)
    progress("S3 root: starting moto and a broker over a bucket")
    moto = start_moto(scratch)
    try:
        bucket = moto.create_bucket()
        server = start_broker(
            f"s3://{bucket}/lakelog",
            scratch,
            {"s3_endpoint_url": moto.url},
            name="broker-s3",
            env=moto.settings().aws_variables(),
        )
        try:
            assert server.kafka is not None
            create_topic(server, "s3-produce", partitions)
            progress(f"S3 root: produce, {records:,} records")
            closed = pool.submit(
                kafka_load.produce_closed, server.kafka, "s3-produce", records, VALUE_BYTES, False
            ).result()
            _checked(closed, "the S3-root produce")
            saturation = rate(closed.records, closed.seconds)
            target = max(saturation * LOAD_FRACTION, 10.0)
            create_topic(server, "s3-latency", partitions)
            progress(f"S3 root: produce latency, {target:,.0f} records/s")
            opened = open_loop_produce(cfg, pool, server.kafka, "s3-latency", target)
        finally:
            server.stop()
    finally:
        moto.stop()

    def local_figure(benchmark: str, metric: str) -> float:
        found = [r.value for r in local if r.benchmark == benchmark and r.metric == metric]
        return found[0] if found else math.nan

    params = {"records": records, "partitions": partitions, "rate": round(target)}
    return [
        Result(
            S3,
            "one producer, idempotence off",
            "throughput",
            saturation,
            "records/s",
            {LOCAL: local_figure(PRODUCE, "throughput")},
            params=params,
        ),
        *(
            Result(
                S3,
                f"acks=all, open loop at {LOAD_FRACTION:.0%} of saturation",
                metric,
                percentile(opened.latencies_ms, q),
                "ms",
                {LOCAL: local_figure(LATENCY, metric)},
                higher_is_better=False,
                params={
                    **params,
                    "records": len(opened.latencies_ms),
                    "generator_max_lag_ms": round(opened.max_lag_ms, 1),
                },
            )
            for metric, q in (("p50", 50), ("p99", 99))
        ),
    ]


# -- the suite ---------------------------------------------------------------------


def _mock_kept(report: Report) -> str:
    found = [r.params.get("mock_records") for r in report.results if r.benchmark == FETCH]
    return f"{found[0]:,}" if found and isinstance(found[0], int) else "-"


def lag_notes(report: Report) -> list[str]:
    """How far each open-loop generator fell behind its schedule (its own limit, not the
    broker's), and how late the broker's event loop ran meanwhile (the broker's)."""
    notes = []
    for r in report.results:
        if r.metric == "p99" and "generator_max_lag_ms" in r.params:
            mock = r.params.get("mock_generator_max_lag_ms")
            notes.append(
                f"{r.benchmark}: the producer process fell behind its schedule by at most "
                f"{r.params['generator_max_lag_ms']} ms"
                + (f" ({MOCK}: {mock} ms)" if mock is not None else "")
            )
        if r.metric == "p99" and r.params.get("broker_loop_lag_p99_ms") is not None:
            notes.append(
                f"{r.benchmark}: the broker's event loop ran what was due "
                f"{r.params['broker_loop_lag_p50_ms']} ms late at p50, "
                f"{r.params['broker_loop_lag_p99_ms']} ms at p99 (every request waited as long)"
            )
    return notes


def goal_notes(report: Report) -> list[str]:
    """Each goal beside the figure it is about."""
    notes = []
    for result in report.results:
        goal = GOALS.get(result.benchmark)
        if goal is None or result.unit != goal.unit:
            continue
        if result.metric not in ("throughput", "p99", "p99 latency"):
            continue
        notes.append(
            f"{result.benchmark}, {result.variant}: {result.value:,.1f} {result.unit}; "
            + goal.verdict(result.value)
        )
    return notes


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``kafka`` suite at a named size (tiny, small, large)."""
    cfg = config_for(CONFIGS, size)
    logging.getLogger("lakelog").setLevel(logging.WARNING)
    report = Report(NAME)
    load_before = os.getloadavg()[0]
    with (
        scratch_dir(workdir, "kafka") as scratch,
        client_pool(max(cfg.commit_processes, 2)) as pool,
    ):
        server = start_broker(scratch / "root", scratch)
        try:
            phase = bench_produce(cfg, server, pool, progress)
            report.results += phase.results
            latency, e2e = bench_latency(cfg, server, pool, phase, progress)
            report.results += latency
            report.results += bench_fetch(cfg, server, pool, phase, progress)
            report.results += e2e
            report.results += bench_commits(cfg, server, pool, scratch, progress)
        finally:
            server.stop()
        report.results += bench_s3(cfg, scratch, pool, report.results, phase.partitions, progress)
    report.notes += goal_notes(report)
    report.notes += lag_notes(report)
    report.notes += [
        f"clients: confluent-kafka, one process each, {VALUE_BYTES}-byte values, no key, "
        "acks=all, linger.ms=5; latency windows at "
        f"{LOAD_FRACTION:.0%} of the idempotence-off saturation; roots: a local directory, "
        "and moto S3 for the last table",
        f"'{MOCK}' = the same client code against librdkafka's in-memory broker; "
        f"'{HTTP_ARROW}' = lakelog's native HTTP API, Arrow IPC bodies of {HTTP_BATCH:,} records "
        f"over one connection; '{ACK}' = the producer's delivery latency in the same window; "
        f"'{NAIVE}' = one write_deltalake append per commit, serialized, in-process",
        f"fetch: the mock cluster kept {_mock_kept(report)} of the records it was given "
        "(it drops a partition's oldest data beyond a few megabytes)",
        "offset committers commit a partition's offset without joining the group "
        "(generation -1), spread over worker processes",
        load_note(load_before, os.getloadavg()[0]),
    ]
    return report
