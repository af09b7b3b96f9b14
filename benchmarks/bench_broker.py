"""The broker over HTTP: produce throughput and latency, end-to-end latency, fetch throughput.

One broker subprocess (``python -m server``) serves a temporary local root.
The load comes from separate client processes (a pool of two, spawned once)
that use persistent ``http.client`` connections, one per thread, and bodies
encoded before the clock starts, so the client's CPU is not the broker's.
Every figure has baselines measured in the same run, with the same client:

* produce throughput (closed loop, several connections): JSON bodies of
  base64 values and Arrow IPC bodies, vs a trivial FastAPI/uvicorn app whose
  POST route reads the body and answers ``{}`` (the HTTP ceiling), vs
  ``pq.write_table`` of the same rows in files of the size the broker's
  segments had (the storage ceiling, in-process, no fsync), and vs a tiny
  FastAPI app doing one ``write_deltalake`` per request (the naive broker).
* produce throughput by body shape (closed loop, the same client and
  connections for every shape, rounds interleaved): native JSON and Arrow
  with an explicit partition, keyed (murmur2 in the broker) and neither
  (sticky), REST Proxy v2 binary and json embedded formats, v3 one record
  per request and streamed; each beside the fastest shape and beside the
  shape its goal compares it to.
* produce latency (open loop: requests are due on a fixed schedule and timed
  from when they were due, so a slow answer cannot hide the ones queued
  behind it) at a fraction of the measured saturation, acks=all.
* end-to-end latency: a consumer process long-polls the head of a partition
  while a producer process stamps each value with its send time; vs the
  producer's own ack latency in the same run.
* fetch throughput of a consumer reading a partition from offset 0, once while
  the data is in the broker's recent-batch cache (caught up) and once after a
  broker restart (storage reads), JSON and Arrow; vs the trivial app serving a
  body of the same size, and ``pq.read_table`` of the same segment files.

The load generator is :mod:`benchmarks.broker_load`, the baseline apps and
in-process ceilings :mod:`benchmarks.broker_baselines`, the server processes
:mod:`benchmarks.servers`, and what is read from the broker between windows
:mod:`benchmarks.broker_admin`.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from benchmarks.broker_admin import (
    CommitStats,
    broker_metrics,
    commit_stats,
    create_topic,
    segment_records,
)
from benchmarks.broker_baselines import raw_parquet_read, raw_parquet_write
from benchmarks.broker_load import (
    ARROW_TYPE,
    STOP,
    Api,
    Format,
    HeadConsume,
    LoadResult,
    Placement,
    ProduceLoad,
    RangeRead,
    StaticRead,
    arrow_body,
    call,
    consume_head,
    json_body,
    make_values,
    produce_path,
    read_range,
    read_static,
    ready,
    run_produce,
    stamp_positions,
    stamped,
    target_of,
    warm_up,
)
from benchmarks.common import (
    CONTENDED,
    Progress,
    Report,
    Result,
    config_for,
    median,
    percentile,
    random_binary,
    rate,
    scratch_dir,
    settle_disk,
)
from benchmarks.servers import start_baseline, start_broker
from lakelog.testing.brokers import ServerProcess

NAME = "broker"
DESCRIPTION = (
    "HTTP broker: produce throughput/latency, end-to-end latency, fetch throughput "
    "vs uvicorn ceiling, raw Parquet and a naive write_deltalake app"
)

PRODUCE = "produce throughput"
SHAPES = "produce throughput by shape"
FASTEST = "fastest shape"
GOAL_SHAPE = "goal shape"
LATENCY = "produce latency"
E2E = "end-to-end latency"
FETCH = "fetch throughput"

LAKELOG = "lakelog"
EMPTY = "uvicorn empty route"
RAW = "raw parquet"
NAIVE = "naive delta-rs"
ACK = "produce ack"
STATIC = "uvicorn static body"
RAW_READ = "raw parquet read"

#: The phases of the suite, in the order they run; ``--phases`` picks some of them.
PHASES: tuple[str, ...] = ("produce", "shapes", "latency", "e2e", "fetch")
PHASES_ENV = "LAKELOG_BENCH_PHASES"

#: An open-loop window schedules at least this many requests, so that every latency
#: figure has samples even when a busy machine measured a near-zero saturation.
MIN_TIMED_REQUESTS = 10


# -- configuration -----------------------------------------------------------


@dataclass(frozen=True)
class ProducePlan:
    """One produce throughput variant: body format, records per request, connections."""

    fmt: Format
    records: int
    connections: int

    @property
    def label(self) -> str:
        return f"{self.fmt}-{self.records}x{self.connections}"

    @property
    def variant(self) -> str:
        kind = "JSON base64" if self.fmt == "json" else "Arrow IPC"
        return f"{kind}, {self.records:,} records/request, {self.connections} connections"


@dataclass(frozen=True)
class ShapePlan:
    """One body shape users send: API (and native format), how records are placed."""

    api: Api
    fmt: Format
    placement: Placement
    #: records per request; 0 takes the config's ``shape_records`` (``arrow_shape_records``)
    records: int = 0

    @property
    def label(self) -> str:
        return (
            f"{self.api}-{self.fmt}-{self.placement}"
            if self.api == "v1"
            else (f"{self.api}-{self.placement}")
        )

    def describe(self) -> str:
        kind = {
            "v1": "native JSON base64" if self.fmt == "json" else "native Arrow IPC",
            "v2-binary": "REST v2 binary",
            "v2-json": "REST v2 json",
            "v3": "REST v3 one record/request",
            "v3-stream": "REST v3 streamed",
        }[self.api]
        how = {
            "partition": "explicit partition",
            "spread": "explicit partitions, all in each request",
            "key": "keyed",
            "none": "no key, no partition",
        }
        return f"{kind}, {how[self.placement]}"


#: Every shape, and the shape its goal compares it to (keyed vs explicit partition in the
#: same format; REST vs native JSON keyed). A shape with a goal runs right after the shape
#: it is compared with, so the pair sees the machine in the same state.
SHAPE_PLAN: tuple[ShapePlan, ...] = (
    ShapePlan("v1", "json", "partition"),
    ShapePlan("v1", "json", "key"),
    ShapePlan("v3-stream", "json", "key"),
    ShapePlan("v2-binary", "json", "key"),
    ShapePlan("v2-json", "json", "key"),
    ShapePlan("v1", "json", "spread"),
    ShapePlan("v1", "json", "none"),
    ShapePlan("v2-binary", "json", "partition"),
    ShapePlan("v1", "arrow", "partition"),
    ShapePlan("v1", "arrow", "key"),
    ShapePlan("v1", "arrow", "spread"),
    ShapePlan("v1", "arrow", "none"),
    ShapePlan("v3", "json", "key", records=1),
)
SHAPE_GOALS: dict[str, tuple[str, float]] = {
    "v1-json-key": ("v1-json-partition", 0.85),
    "v1-arrow-key": ("v1-arrow-partition", 0.85),
    "v2-binary-key": ("v1-json-key", 0.85),
    "v3-stream-key": ("v1-json-key", 0.85),
    "v2-json-key": ("v1-json-key", 0.0),  # no goal: shown beside the native shape only
}


@dataclass(frozen=True)
class BrokerBenchConfig:
    """How much of each benchmark to run; ``CONFIGS`` holds the named sizes."""

    value_bytes: int = 100
    partitions: int = 4
    linger_ms: int = 5
    #: throughput variants; the JSON one with ``latency_records`` sets the latency load
    produce_plan: tuple[ProducePlan, ...] = (
        ProducePlan("json", 1_000, 8),
        ProducePlan("json", 1_000, 16),
        ProducePlan("arrow", 10_000, 4),
        ProducePlan("json", 100, 16),
    )
    warmup_s: float = 1.0
    duration_s: float = 3.0
    rounds: int = 1
    distinct_bodies: int = 8
    #: cap on the rows written for the raw Parquet ceiling of one variant
    raw_max_records: int = 400_000
    latency_records: int = 100
    latency_load: float = 0.5  # fraction of the measured saturation
    latency_s: float = 5.0
    latency_workers: int = 48
    e2e_load: float = 0.25  # fraction of the measured saturation
    e2e_s: float = 4.0
    e2e_formats: tuple[Format, ...] = ("json", "arrow")
    e2e_max_wait_ms: int = 5_000
    #: records in the fetched partition; must fit the broker's 64 MB recent-batch cache
    fetch_records: int = 200_000
    fetch_fill_records: int = 10_000
    fetch_max_records: int = 10_000
    fetch_formats: tuple[Format, ...] = ("json", "arrow")
    raw_read_repeats: int = 3
    #: the body shapes compared in one run (``SHAPES``), each ``shape_rounds`` times, interleaved
    shape_plan: tuple[ShapePlan, ...] = SHAPE_PLAN
    shape_records: int = 1_000
    arrow_shape_records: int = 10_000
    shape_connections: int = 8
    shape_duration_s: float = 3.0
    #: a ratio between two shapes swung by +-10% between rounds on the 2-core machine: the
    #: goals take the median of several rounds' paired ratios
    shape_rounds: int = 4
    seed: int = 0

    def saturation_plan(self) -> ProducePlan:
        for plan in self.produce_plan:
            if plan.fmt == "json" and plan.records == self.latency_records:
                return plan
        raise ValueError(
            f"produce_plan needs a JSON variant of {self.latency_records} records/request "
            "(its saturation sets the latency load)"
        )


CONFIGS: dict[str, BrokerBenchConfig] = {
    "tiny": BrokerBenchConfig(
        partitions=2,
        produce_plan=(
            ProducePlan("json", 50, 2),
            ProducePlan("arrow", 500, 2),
            ProducePlan("json", 20, 3),
        ),
        warmup_s=0.1,
        duration_s=0.4,
        distinct_bodies=2,
        raw_max_records=2_000,
        latency_records=20,
        latency_s=0.5,
        latency_workers=6,
        e2e_s=0.5,
        e2e_max_wait_ms=1_000,
        fetch_records=3_000,
        fetch_fill_records=1_000,
        fetch_max_records=700,
        raw_read_repeats=1,
        shape_records=50,
        arrow_shape_records=500,
        shape_connections=2,
        shape_duration_s=0.4,
        shape_rounds=1,
    ),
    "small": BrokerBenchConfig(),
    "large": BrokerBenchConfig(
        warmup_s=2.0,
        duration_s=10.0,
        rounds=2,
        raw_max_records=1_000_000,
        latency_s=20.0,
        latency_workers=64,
        e2e_s=15.0,
        fetch_records=300_000,
        raw_read_repeats=5,
        shape_duration_s=6.0,
        shape_rounds=5,
    ),
}


def stop_body(cfg: BrokerBenchConfig) -> bytes:
    """One record that tells a head consumer the producer is done."""
    body = json_body(make_values(1, cfg.value_bytes, np.random.default_rng(cfg.seed), True), 0)
    return stamped(body, stamp_positions(body), time.monotonic_ns(), STOP)


# -- the phases --------------------------------------------------------------


@dataclass
class Bench:
    """What the phases share: config, client pool, servers, progress, work directory."""

    cfg: BrokerBenchConfig
    pool: ProcessPoolExecutor
    broker: ServerProcess
    empty: ServerProcess
    naive: ServerProcess
    workdir: Path
    progress: Progress
    notes: list[str] = field(default_factory=list)
    saturation_rps: dict[str, float] = field(default_factory=dict)

    def produce_load(
        self,
        server: ServerProcess,
        topic: str,
        fmt: Format,
        records: int,
        connections: int,
        duration_s: float,
        rate: float | None = None,
        stamp: bool = False,
        partitions: int | None = None,
        lead_s: float = 0.3,
        api: Api = "v1",
        placement: Placement = "partition",
    ) -> ProduceLoad:
        cfg = self.cfg
        return ProduceLoad(
            target=target_of(server),
            path=produce_path(api, topic),
            fmt=fmt,
            records=records,
            partitions=partitions or cfg.partitions,
            value_bytes=cfg.value_bytes,
            connections=connections,
            distinct_bodies=cfg.distinct_bodies,
            seed=cfg.seed,
            start_at=time.monotonic() + lead_s,
            warmup_s=cfg.warmup_s,
            duration_s=duration_s,
            rate=rate,
            stamp=stamp,
            api=api,
            placement=placement,
        )

    def run(self, fn: Callable[[ProduceLoad], LoadResult], load: ProduceLoad) -> LoadResult:
        warm_up(load)
        load = replace(load, start_at=max(load.start_at, time.monotonic() + 0.1))
        settle_disk()
        result = self.pool.submit(fn, load).result()
        check(result, load.path)
        return result


Params = dict[str, str | int | float | bool | None]


def finite(params: Params) -> Params:
    """``params`` with NaN/inf (a figure /proc could not give) as None, as JSON needs."""
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in params.items()
    }


def check(result: LoadResult, what: str) -> None:
    if result.errors:
        raise RuntimeError(
            f"{what}: {len(result.errors)} failed requests, first: {result.errors[0]}"
        )


def _cores(result: LoadResult, records_per_s: float | None = None) -> str:
    text = (
        f"broker {result.server_cores:.2f} cores (event loop {result.server_loop_cores:.2f}), "
        f"client {result.client_cores:.2f}, other processes {result.other_cores:.2f}"
    )
    if records_per_s and math.isfinite(result.server_loop_cores) and result.server_loop_cores > 0:
        # CPU per record holds up on a shared machine better than records/s does
        loop_us = result.server_loop_cores / records_per_s * 1e6
        text += (
            f"; broker CPU {result.server_cores / records_per_s * 1e6:.1f} us/record, event loop "
            f"{loop_us:.1f} us/record = {1e6 / loop_us:,.0f} records/s if the loop had a core"
        )
    return text


def bench_produce(b: Bench) -> list[Result]:
    """Closed-loop produce throughput of each plan against lakelog and both baseline apps."""
    cfg = b.cfg
    results = []
    mb = cfg.value_bytes / 1e6
    for plan in cfg.produce_plan:
        rates: dict[str, list[float]] = {LAKELOG: [], EMPTY: [], NAIVE: []}
        stats: list[CommitStats] = []
        seg: list[float] = []
        lake: LoadResult | None = None
        for round_no in range(cfg.rounds):
            topic = f"produce-{plan.label}-{round_no}"
            create_topic(b.broker, topic, cfg.partitions)
            for name, server in ((LAKELOG, b.broker), (EMPTY, b.empty), (NAIVE, b.naive)):
                b.progress(f"produce {plan.label} round {round_no + 1}: {name}")
                before = broker_metrics(b.broker) if name == LAKELOG else {}
                load = b.produce_load(
                    server, topic, plan.fmt, plan.records, plan.connections, cfg.duration_s
                )
                got = b.run(run_produce, load)
                rates[name].append(rate(got.records, got.seconds))
                if name == LAKELOG:
                    lake = got
                    stats.append(commit_stats(before, broker_metrics(b.broker), topic))
                    seg.append(segment_records(b.broker, topic))
        assert lake is not None
        per_s = {name: median(values) for name, values in rates.items()}
        segment = median(seg)
        b.progress(f"produce {plan.label}: raw parquet, files of {segment:,.0f} records")
        with scratch_dir(b.workdir, "raw") as raw_dir:
            raw = raw_parquet_write(
                round(segment),
                min(max(int(per_s[LAKELOG] * cfg.duration_s), round(segment)), cfg.raw_max_records),
                cfg.value_bytes,
                raw_dir,
                cfg.seed,
            )
        b.saturation_rps[plan.label] = per_s[LAKELOG] / plan.records
        b.saturation_rps[f"{NAIVE}:{plan.label}"] = per_s[NAIVE] / plan.records
        st = stats[-1]
        params: Params = {
            "format": plan.fmt,
            "records_per_request": plan.records,
            "connections": plan.connections,
            "partitions": cfg.partitions,
            "body_bytes": lake.bytes,
            "seconds": cfg.duration_s,
            "rounds": cfg.rounds,
            "request_p50_ms": percentile(lake.latencies_ms, 50) if lake.latencies_ms else None,
            "requests_per_commit": st.requests_per_commit,
            "records_per_commit": st.records_per_commit,
            "commit_ms": st.commit_ms,
            "records_per_segment": segment,
            "broker_cores": lake.server_cores,
            "broker_event_loop_cores": lake.server_loop_cores,
            "client_cores": lake.client_cores,
            "other_processes_cores": lake.other_cores,
        }
        baselines = {EMPTY: per_s[EMPTY], RAW: raw, NAIVE: per_s[NAIVE]}
        for unit, scale in (("records/s", 1.0), ("MB/s", mb)):
            results.append(
                Result(
                    PRODUCE,
                    plan.variant,
                    "throughput",
                    per_s[LAKELOG] * scale,
                    unit,
                    {k: v * scale for k, v in baselines.items()},
                    params=finite(params),
                )
            )
        b.notes.append(
            f"produce {plan.label}: {st.requests_per_commit:.1f} requests "
            f"({st.records_per_commit:,.0f} records) per commit, {st.commit_time()}, "
            f"{segment:,.0f} records/segment, request p50 "
            f"{params['request_p50_ms'] or 0:.1f} ms; {_cores(lake, per_s[LAKELOG])}"
        )
    return results


def bench_shapes(b: Bench) -> list[Result]:
    """Every body shape with the same client, rounds interleaved so drift hits all alike.

    Rounds run the shapes forwards and backwards in turn, so a machine that
    slows down over the run does not favour the shapes that come first. A
    goal's ratio is the median over rounds of the ratio within each round
    (a shape and its reference measured seconds apart), which a run of
    unequal rounds moves far less than a ratio of per-shape medians.
    """
    cfg = b.cfg
    rates: dict[str, list[float]] = {p.label: [] for p in cfg.shape_plan}
    loads: dict[str, LoadResult] = {}
    stats: dict[str, CommitStats] = {}
    segments: dict[str, float] = {}
    for round_no in range(cfg.shape_rounds):
        order = cfg.shape_plan if round_no % 2 == 0 else tuple(reversed(cfg.shape_plan))
        for plan in order:
            topic = f"shape-{plan.label}-{round_no}"
            create_topic(b.broker, topic, cfg.partitions)
            records = plan.records or (
                cfg.arrow_shape_records if plan.fmt == "arrow" else cfg.shape_records
            )
            b.progress(f"shapes round {round_no + 1}: {plan.describe()}")
            load = b.produce_load(
                b.broker,
                topic,
                plan.fmt,
                records,
                cfg.shape_connections,
                cfg.shape_duration_s,
                api=plan.api,
                placement=plan.placement,
            )
            before = broker_metrics(b.broker)
            got = b.run(run_produce, load)
            rates[plan.label].append(rate(got.records, got.seconds))
            loads[plan.label] = got
            stats[plan.label] = commit_stats(before, broker_metrics(b.broker), topic)
            segments[plan.label] = segment_records(b.broker, topic)
    per_s = {label: median(values) for label, values in rates.items()}
    fastest = max(per_s, key=lambda label: per_s[label])
    by_label = {p.label: p for p in cfg.shape_plan}
    results = []
    for plan in cfg.shape_plan:
        got = loads[plan.label]
        records = plan.records or (
            cfg.arrow_shape_records if plan.fmt == "arrow" else cfg.shape_records
        )
        baselines = {FASTEST: per_s[fastest]}
        goal = SHAPE_GOALS.get(plan.label)
        paired: list[float] = []
        if goal is not None and goal[0] in per_s:
            baselines[GOAL_SHAPE] = per_s[goal[0]]
            paired = paired_ratios(rates[plan.label], rates[goal[0]])
        params: Params = {
            "shape": plan.label,
            "format": plan.fmt,
            "request_records": records,
            "connections": cfg.shape_connections,
            "partitions": cfg.partitions,
            "body_bytes": got.bytes,
            "seconds": cfg.shape_duration_s,
            "rounds": cfg.shape_rounds,
            "fastest_shape": fastest,
            "goal_shape": goal[0] if goal is not None else None,
            "round_ratios": ", ".join(f"{x:.2f}" for x in paired) or None,
            "paired_ratio": median(paired) if paired else None,
            "broker_cores": got.server_cores,
            "broker_event_loop_cores": got.server_loop_cores,
            "client_cores": got.client_cores,
            "other_processes_cores": got.other_cores,
        }
        st = stats[plan.label]
        params["requests_per_commit"] = st.requests_per_commit
        params["records_per_segment"] = segments[plan.label]
        variant = f"{plan.describe()}, {records:,} records/request"
        results.append(
            Result(
                SHAPES,
                variant,
                "throughput",
                per_s[plan.label],
                "records/s",
                baselines,
                params=finite(params),
            )
        )
        b.notes.append(
            f"shape {plan.label}: {st.requests_per_commit:.1f} requests per commit, "
            f"{st.commit_time()}, {segments[plan.label]:,.0f} records/segment; "
            f"{_cores(got, per_s[plan.label])}"
        )
    b.notes.append(
        f"shapes: fastest is {by_label[fastest].describe()}; '{GOAL_SHAPE}' is the shape a "
        "goal compares with (keyed: the same format with an explicit partition; REST: "
        "native JSON keyed)"
    )
    return results


def paired_ratios(shape: Sequence[float], reference: Sequence[float]) -> list[float]:
    """Each round's ratio of a shape's rate to its reference's rate in the same round."""
    return [a / b for a, b in zip(shape, reference, strict=True) if b > 0]


def _latency_results(
    benchmark: str,
    variant: str,
    lake: Sequence[float],
    baselines: dict[str, Sequence[float]],
    params: Params,
) -> list[Result]:
    return [
        Result(
            benchmark,
            variant,
            f"p{q}",
            percentile(lake, q) if lake else math.nan,
            "ms",
            {k: percentile(v, q) if v else math.nan for k, v in baselines.items()},
            higher_is_better=False,
            params=finite({**params, "samples": len(lake)}),
        )
        for q in (50, 99)
    ]


def bench_latency(b: Bench) -> list[Result]:
    """Open-loop produce latency at ``latency_load`` of the measured saturation."""
    cfg = b.cfg
    plan = cfg.saturation_plan()
    floor = MIN_TIMED_REQUESTS / cfg.latency_s
    offered = max(cfg.latency_load * b.saturation_rps[plan.label], floor)
    naive_offered = min(
        offered, max(cfg.latency_load * b.saturation_rps[f"{NAIVE}:{plan.label}"], floor)
    )
    latencies: dict[str, list[float]] = {}
    lake: LoadResult | None = None
    stats: CommitStats | None = None
    for name, server, at in (
        (LAKELOG, b.broker, offered),
        (EMPTY, b.empty, offered),
        (NAIVE, b.naive, naive_offered),
    ):
        b.progress(f"latency: {name} at {at:,.0f} requests/s")
        topic = f"latency-{plan.records}"
        if name == LAKELOG:
            create_topic(b.broker, topic, cfg.partitions)
            before = broker_metrics(b.broker)
        load = b.produce_load(
            server, topic, "json", plan.records, cfg.latency_workers, cfg.latency_s, rate=at
        )
        got = b.run(run_produce, load)
        latencies[name] = got.latencies_ms
        if name == LAKELOG:
            lake = got
            stats = commit_stats(before, broker_metrics(b.broker), topic)
            if got.requests < 0.99 * got.scheduled:
                b.notes.append(
                    f"latency: only {got.requests:,} of {got.scheduled:,} scheduled requests "
                    "were answered in time: the offered load was above what the broker sustained"
                )
    assert lake is not None and stats is not None
    variant = (
        f"JSON {plan.records} records/request, {offered:,.0f} req/s "
        f"({cfg.latency_load:.0%} of saturation), acks=all, linger {cfg.linger_ms} ms"
    )
    params: Params = {
        "offered_requests_per_s": offered,
        "naive_offered_requests_per_s": naive_offered,
        "records_per_request": plan.records,
        "answered": lake.requests,
        "scheduled": lake.scheduled,
        "linger_ms": cfg.linger_ms,
        "requests_per_commit": stats.requests_per_commit,
        "commit_ms": stats.commit_ms,
        "broker_cores": lake.server_cores,
        "broker_event_loop_cores": lake.server_loop_cores,
        "other_processes_cores": lake.other_cores,
    }
    if naive_offered < offered:
        b.notes.append(
            f"latency: {NAIVE} saturates below the offered load; its figure is at "
            f"{naive_offered:,.0f} req/s ({cfg.latency_load:.0%} of its own saturation)"
        )
    b.notes.append(
        f"latency: {stats.requests_per_commit:.1f} requests per commit, {stats.commit_time()}; "
        f"{_cores(lake)}"
    )
    return _latency_results(
        LATENCY,
        variant,
        latencies[LAKELOG],
        {EMPTY: latencies[EMPTY], NAIVE: latencies[NAIVE]},
        params,
    )


def bench_e2e(b: Bench) -> list[Result]:
    """Produce -> long-poll fetch latency, one consumer process per fetch format."""
    cfg = b.cfg
    plan = cfg.saturation_plan()
    offered = max(cfg.e2e_load * b.saturation_rps[plan.label], MIN_TIMED_REQUESTS / cfg.e2e_s)
    results = []
    for fmt in cfg.e2e_formats:
        topic = f"e2e-{fmt}"
        create_topic(b.broker, topic, 1)
        b.progress(f"end-to-end: {fmt} consumer, producer at {offered:,.0f} requests/s")
        warm_up(b.produce_load(b.broker, topic, "json", plan.records, 1, 0.0, partitions=1))
        load = b.produce_load(
            b.broker,
            topic,
            "json",
            plan.records,
            cfg.latency_workers,
            cfg.e2e_s,
            rate=offered,
            stamp=True,
            partitions=1,
            lead_s=0.5,
        )
        begin = load.start_at + load.warmup_s
        consume = HeadConsume(
            target=target_of(b.broker),
            topic=topic,
            partition=0,
            fmt=fmt,
            max_records=cfg.fetch_max_records,
            max_wait_ms=cfg.e2e_max_wait_ms,
            begin_ns=int(begin * 1e9),
            end_ns=int((begin + cfg.e2e_s) * 1e9),
            deadline=begin + cfg.e2e_s + max(10.0, 2 * cfg.e2e_s),
        )
        settle_disk()
        consumer: Future[LoadResult] = b.pool.submit(consume_head, consume)
        producer = b.pool.submit(run_produce, load).result()
        check(producer, "e2e producer")
        call(target_of(b.broker), "POST", f"/v1/topics/{topic}/records?acks=all", stop_body(cfg))
        got = consumer.result()
        check(got, f"e2e {fmt} consumer")
        if not got.latencies_ms:
            b.notes.append(f"end-to-end {fmt}: the consumer received no stamped record in time")
        params: Params = {
            "fetch_format": fmt,
            "offered_requests_per_s": offered,
            "records_per_request": plan.records,
            "max_wait_ms": cfg.e2e_max_wait_ms,
            "polls": got.requests,
            "records_per_poll": got.records / max(got.requests, 1),
        }
        kind = "JSON" if fmt == "json" else "Arrow"
        variant = (
            f"{kind} long poll, producer JSON {plan.records} records/request at "
            f"{offered:,.0f} req/s ({cfg.e2e_load:.0%} of saturation)"
        )
        results += _latency_results(
            E2E, variant, got.latencies_ms, {ACK: producer.latencies_ms}, params
        )
        b.notes.append(
            f"end-to-end {fmt}: {got.records / max(got.requests, 1):,.0f} records per poll; "
            f"{_cores(got)}"
        )
    return results


def fill_topic(b: Bench, topic: str) -> None:
    """Write ``fetch_records`` records to partition 0 of ``topic`` in Arrow requests."""
    cfg = b.cfg
    rng = np.random.default_rng(cfg.seed + 7)
    written = 0
    while written < cfg.fetch_records:
        n = min(cfg.fetch_fill_records, cfg.fetch_records - written)
        body = arrow_body(random_binary(n, cfg.value_bytes, rng), 0)
        call(target_of(b.broker), "POST", f"/v1/topics/{topic}/records?acks=all", body, ARROW_TYPE)
        written += n


def bench_fetch(b: Bench, root: Path) -> list[Result]:
    """A consumer reading a partition from offset 0: cached (caught up), then from storage."""
    cfg = b.cfg
    topic = "fetch"
    create_topic(b.broker, topic, 1)
    b.progress(f"fetch: writing {cfg.fetch_records:,} records")
    fill_topic(b, topic)
    files = sorted(
        p for p in (root / "topics" / topic).rglob("*.parquet") if "_delta_log" not in p.parts
    )
    raw_seconds, raw_rows = raw_parquet_read(files, cfg.raw_read_repeats)
    if raw_rows != cfg.fetch_records:
        raise RuntimeError(f"segment files hold {raw_rows} rows, expected {cfg.fetch_records}")
    raw = rate(raw_rows, raw_seconds)
    results = []
    mb = cfg.value_bytes / 1e6
    for source in ("cache", "storage"):
        if source == "storage":
            b.progress("fetch: restarting the broker (empty recent-batch cache)")
            b.broker.stop()
            b.broker = start_broker(root, b.workdir, {"linger_ms": cfg.linger_ms})
            call(
                target_of(b.broker),
                "GET",
                f"/v1/topics/{topic}/partitions/0/records?offset=0&max_records=1&value_format=base64",
            )
        for fmt in cfg.fetch_formats:
            b.progress(f"fetch: {fmt} from {source}")
            before = broker_metrics(b.broker)
            read = RangeRead(
                target_of(b.broker), topic, 0, 0, cfg.fetch_records, fmt, cfg.fetch_max_records
            )
            settle_disk()
            got = b.pool.submit(read_range, read).result()
            check(got, f"fetch {fmt} from {source}")
            after = broker_metrics(b.broker)
            hits = after.get("lakelog_fetch_cache_hits", 0) - before.get(
                "lakelog_fetch_cache_hits", 0
            )
            static = b.pool.submit(
                read_static, StaticRead(target_of(b.empty), got.bytes // got.requests, got.requests)
            ).result()
            check(static, "static body")
            per_s = rate(got.records, got.seconds)
            static_per_s = rate(got.records, static.seconds)
            kind = "JSON base64" if fmt == "json" else "Arrow IPC"
            label = (
                "caught-up (recent-batch cache)"
                if source == "cache"
                else "from the beginning (storage)"
            )
            params: Params = {
                "format": fmt,
                "source": source,
                "records": got.records,
                "records_per_fetch": got.records / got.requests,
                "response_bytes": got.bytes // got.requests,
                "cache_hit_fraction": hits / got.requests,
                "segments": len(files),
                "broker_cores": got.server_cores,
                "broker_event_loop_cores": got.server_loop_cores,
                "client_cores": got.client_cores,
                "other_processes_cores": got.other_cores,
            }
            for unit, scale in (("records/s", 1.0), ("MB/s", mb)):
                results.append(
                    Result(
                        FETCH,
                        f"{label}, {kind}, {cfg.fetch_max_records:,} records/fetch",
                        "throughput",
                        per_s * scale,
                        unit,
                        {STATIC: static_per_s * scale, RAW_READ: raw * scale},
                        params=finite(params),
                    )
                )
            b.notes.append(
                f"fetch {fmt} from {source}: {hits / got.requests:.0%} of fetches from the cache, "
                f"{got.bytes // got.requests:,} bytes per response; {_cores(got, per_s)}"
            )
    return results


def _goal(value: float | None, goal: float, higher: bool) -> str:
    if value is None:
        return "not measured"
    met = value >= goal if higher else value <= goal
    return "meets" if met else "BELOW" if higher else "ABOVE"


def goal_notes(report: Report, cfg: BrokerBenchConfig) -> list[str]:
    notes = []
    for fmt, goal in (("json", 300_000.0), ("arrow", 1_000_000.0)):
        # Throughput is the saturated rate: the best of the connection counts tried for the
        # biggest requests of the format (1,000-record JSON, 10,000-record Arrow: the request
        # sizes the goals are set for).
        plans = [p for p in cfg.produce_plan if p.fmt == fmt]
        biggest = max((p.records for p in plans), default=0)
        found = [
            (r, p)
            for p in plans
            if p.records == biggest
            and (r := report.find(PRODUCE, p.variant, "throughput")) is not None
        ]
        if found:
            r, plan = max(found, key=lambda rp: rp[0].value)
            tried = ", ".join(str(p.connections) for _, p in found)
            notes.append(
                f"goal produce {plan.variant} (best of {tried} connections): "
                f"{r.value:,.0f} records/s ({_goal(r.value, goal, True)} goal >= {goal:,.0f})"
            )
    for r in report.results:
        shape = r.params.get("shape")
        if r.benchmark != SHAPES or not isinstance(shape, str) or shape not in SHAPE_GOALS:
            continue
        reference, floor = SHAPE_GOALS[shape]
        paired = r.params.get("paired_ratio")
        if floor and isinstance(paired, float):
            notes.append(
                f"goal {shape} >= {floor:.2f}x {reference}: {paired:.2f}x, the median of "
                f"the rounds' paired ratios {r.params.get('round_ratios')} "
                f"({_goal(paired, floor, True)}; ratio of the medians "
                f"{r.ratio(GOAL_SHAPE) or 0:.2f}x)"
            )
        elif floor and (ratio := r.ratio(GOAL_SHAPE)) is not None:  # results of one round
            notes.append(
                f"goal {shape} >= {floor:.2f}x {reference}: {ratio:.2f}x "
                f"({_goal(ratio, floor, True)})"
            )
        spread = next(
            (s for s in report.results if s.params.get("shape") == shape.replace("key", "spread")),
            None,
        )
        if spread is not None and spread.benchmark == SHAPES and spread.value > 0:
            notes.append(
                f"{shape} / {spread.params['shape']} (the same fan-out over partitions, so "
                f"the cost of partitioning by key alone): {r.value / spread.value:.2f}x"
            )
        if shape == "v1-json-key" and r.params.get("request_records") == 1_000:
            notes.append(
                f"goal produce native JSON keyed, 1,000 records/request: {r.value:,.0f} "
                f"records/s ({_goal(r.value, 300_000.0, True)} goal >= 300,000)"
            )
    for r in report.results:
        if r.benchmark == LATENCY and r.metric == "p99":
            notes.append(
                f"goal produce latency p99: {r.value:.1f} ms "
                f"({_goal(r.value, 50.0, False)} goal <= 50 ms)"
            )
    notes.append(
        f"MB/s counts value bytes ({cfg.value_bytes} B/record, 1 MB = 10^6 B). '{EMPTY}' = a "
        "FastAPI route that reads the same body and answers {} (same client and connections); "
        f"'{RAW}' = in-process pq.write_table of segment rows in files of the size the broker's "
        f"segments had, no fsync; '{NAIVE}' = a FastAPI app doing json.loads/base64 (or an IPC "
        "read) and one write_deltalake per request, serialized; it assigns no offsets. "
        f"'{ACK}' = the producer's own ack latency in the same run. '{STATIC}' = the trivial app "
        f"answering GETs with a body of the same size; '{RAW_READ}' = in-process pq.read_table "
        "of the partition's segment files. Cores: CPU seconds per wall second over the window."
    )
    return notes


def contention_note(report: Report, load_before: float, load_after: float) -> str:
    """How busy the rest of the machine was: figures taken on a shared machine mean less."""
    others = [
        float(v)
        for r in report.results
        if isinstance(v := r.params.get("other_processes_cores"), float) and math.isfinite(v)
    ]
    worst = max(others, default=math.nan)
    text = (
        f"machine: 1-min load average {load_before:.1f} at start, {load_after:.1f} at end; "
        f"other processes used up to {worst:.2f} of {os.cpu_count()} cores during timed windows"
    )
    if worst > 0.25:
        text += CONTENDED
    return text


def selected_phases(names: str | None) -> tuple[str, ...]:
    """The phases named in a comma-separated list (every phase when ``names`` is empty)."""
    if not names:
        return PHASES
    chosen = tuple(n.strip() for n in names.split(",") if n.strip())
    unknown = [n for n in chosen if n not in PHASES]
    if unknown:
        raise ValueError(
            f"unknown broker phase(s) {', '.join(unknown)}; known: {', '.join(PHASES)}"
        )
    needs_saturation = [n for n in chosen if n in ("latency", "e2e")]
    if needs_saturation and "produce" not in chosen:
        raise ValueError(
            f"phase(s) {', '.join(needs_saturation)} need the produce phase: their load is a "
            "fraction of the saturation it measures"
        )
    return chosen


def run_config(
    cfg: BrokerBenchConfig,
    workdir: Path,
    progress: Progress,
    phases: tuple[str, ...] = (),
) -> Report:
    phases = phases or PHASES
    cfg.saturation_plan()  # fail early on a config without one
    report = Report(NAME)
    start = time.perf_counter()
    load_before = os.getloadavg()[0]
    root = workdir / "broker-root"
    spawn = multiprocessing.get_context("spawn")
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(ProcessPoolExecutor(2, mp_context=spawn))
        warming = [pool.submit(ready, 0.5) for _ in range(2)]
        progress("starting the broker and the baseline apps")
        servers: list[ServerProcess] = []

        @stack.callback
        def stop_servers() -> None:
            for server in servers:
                server.stop()

        broker = start_broker(root, workdir, {"linger_ms": cfg.linger_ms})
        servers.append(broker)
        empty = start_baseline("empty", workdir)
        servers.append(empty)
        naive = start_baseline("naive", workdir, workdir / "naive-root")
        servers.append(naive)
        for f in warming:
            f.result()
        bench = Bench(cfg, pool, broker, empty, naive, workdir, progress)
        try:
            if "produce" in phases:
                report.results += bench_produce(bench)
            if "shapes" in phases:
                report.results += bench_shapes(bench)
            if "latency" in phases:
                report.results += bench_latency(bench)
            if "e2e" in phases:
                report.results += bench_e2e(bench)
            if "fetch" in phases:
                report.results += bench_fetch(bench, root)
        finally:
            servers.append(bench.broker)  # the broker may have been restarted
    report.notes = [
        contention_note(report, load_before, os.getloadavg()[0]),
        *goal_notes(report, cfg),
        *bench.notes,
    ]
    report.seconds = time.perf_counter() - start
    return report


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``broker`` suite at a named size (tiny, small, large).

    ``LAKELOG_BENCH_PHASES`` (``--phases``) narrows it to some phases, so that tuning one
    path does not wait for the others.
    """
    phases = selected_phases(os.environ.get(PHASES_ENV))
    return run_config(config_for(CONFIGS, size), workdir, progress, phases)
