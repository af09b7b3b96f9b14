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

``python -m benchmarks.bench_broker serve empty|naive --port P [--root R]``
runs one of the baseline apps (the suite starts them itself).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import http.client
import json
import math
import multiprocessing
import os
import re
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc
import pyarrow.parquet as pq
from fastapi import FastAPI, Request, Response

from benchmarks.common import (
    CONTENDED,
    CpuTimes,
    Progress,
    Report,
    Result,
    Stopwatch,
    config_for,
    cpu_times,
    free_port,
    machine_busy_seconds,
    median,
    percentile,
    random_binary,
    rate,
    scratch_dir,
    settle_disk,
)
from lakelog.records import SEGMENT_SCHEMA

NAME = "broker"
DESCRIPTION = (
    "HTTP broker: produce throughput/latency, end-to-end latency, fetch throughput "
    "vs uvicorn ceiling, raw Parquet and a naive write_deltalake app"
)

PRODUCE = "produce throughput"
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

HOST = "127.0.0.1"
JSON_TYPE = "application/json"
ARROW_TYPE = "application/vnd.apache.arrow.stream"
NEXT_OFFSET = "X-Lakelog-Next-Offset"
PROJECT = Path(__file__).resolve().parents[1]

#: A stamped value starts with 8 bytes of CLOCK_MONOTONIC nanoseconds (one clock
#: for every process of the machine) and 4 bytes of magic: 12 bytes, 16 base64 chars.
STAMP = struct.Struct(">Q4s")
STAMP_CHARS = 16
MAGIC = b"LKLG"
STOP = b"STOP"
FETCH_MAX_BYTES = 64 << 20  # never the limit: fetches are bounded by max_records
#: An open-loop window schedules at least this many requests, so that every latency
#: figure has samples even when a busy machine measured a near-zero saturation.
MIN_TIMED_REQUESTS = 10

Format = Literal["json", "arrow"]


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
    ),
}


# -- bodies ------------------------------------------------------------------


def make_values(count: int, value_bytes: int, rng: np.random.Generator, stamped: bool) -> pa.Array:
    """Random values; stamped ones start with a zero stamp and the magic, to be patched."""
    values = random_binary(count, value_bytes, rng)
    if not stamped:
        return values
    if value_bytes < STAMP.size:
        raise ValueError(f"a stamped value needs at least {STAMP.size} bytes")
    prefix = STAMP.pack(0, MAGIC)
    return pa.array([prefix + v[STAMP.size :] for v in values.to_pylist()], pa.binary())


def json_body(values: pa.Array, partition: int) -> bytes:
    """A native JSON produce body: base64 values, every record to ``partition``."""
    records = [
        {"value": base64.b64encode(v).decode("ascii"), "partition": partition}
        for v in values.to_pylist()
    ]
    doc = {"records": records, "key_format": "base64", "value_format": "base64"}
    return json.dumps(doc, separators=(",", ":")).encode()


def arrow_body(values: pa.Array, partition: int) -> bytes:
    """A native Arrow IPC stream produce body: value binary, partition int32."""
    n = len(values)
    table = pa.table({"value": values, "partition": pa.array(np.full(n, partition, np.int32))})
    sink = pa.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def stamp_positions(body: bytes) -> list[int]:
    """Where each record's base64 value starts in a JSON body (where its stamp goes)."""
    return [m.end() for m in re.finditer(rb'"value":"', body)]


def stamped(body: bytes, positions: Sequence[int], ns: int, magic: bytes = MAGIC) -> bytes:
    """``body`` with every value's first 12 bytes replaced by ``ns`` and ``magic``."""
    code = base64.b64encode(STAMP.pack(ns, magic))
    buf = bytearray(body)
    for p in positions:
        buf[p : p + STAMP_CHARS] = code
    return bytes(buf)


def stop_body(cfg: BrokerBenchConfig) -> bytes:
    """One record that tells a head consumer the producer is done."""
    body = json_body(make_values(1, cfg.value_bytes, np.random.default_rng(cfg.seed), True), 0)
    return stamped(body, stamp_positions(body), time.monotonic_ns(), STOP)


def read_stamps(data: bytes, fmt: Format) -> list[tuple[int, bytes]]:
    """(nanoseconds, magic) of every record of a fetch response."""
    if fmt == "json":
        records = json.loads(data)["records"]
        heads = [base64.b64decode(r["value"][:STAMP_CHARS]) for r in records]
    else:
        table = pyarrow.ipc.open_stream(pa.py_buffer(data)).read_all()
        heads = pc.binary_slice(table.column("value"), 0, STAMP.size).to_pylist()
    out = []
    for head in heads:
        if head is not None and len(head) == STAMP.size:
            ns, magic = STAMP.unpack(head)
            out.append((int(ns), bytes(magic)))
    return out


# -- the load generator (runs in the client processes) ---------------------


@dataclass(frozen=True)
class Target:
    """A server to load: its loopback port and its pid (for CPU accounting)."""

    port: int
    pid: int


@dataclass(frozen=True)
class ProduceLoad:
    """Produce requests from ``connections`` threads, closed loop or at ``rate`` requests/s."""

    target: Target
    path: str
    fmt: Format
    records: int
    partitions: int
    value_bytes: int
    connections: int
    distinct_bodies: int
    seed: int
    start_at: float  # time.monotonic() of the first request
    warmup_s: float
    duration_s: float
    rate: float | None = None
    stamp: bool = False


@dataclass(frozen=True)
class HeadConsume:
    """Long polls at the head of a partition, timing every stamped value received."""

    target: Target
    topic: str
    partition: int
    fmt: Format
    max_records: int
    max_wait_ms: int
    begin_ns: int
    end_ns: int
    deadline: float


@dataclass(frozen=True)
class RangeRead:
    """Fetch a partition from ``start`` to ``end`` as fast as one connection can."""

    target: Target
    topic: str
    partition: int
    start: int
    end: int
    fmt: Format
    max_records: int


@dataclass(frozen=True)
class StaticRead:
    """GET a body of ``size`` bytes ``requests`` times (the HTTP ceiling of a fetch)."""

    target: Target
    size: int
    requests: int


@dataclass
class LoadResult:
    """What one client process measured, and the CPU both sides used meanwhile."""

    requests: int = 0
    records: int = 0
    seconds: float = 0.0
    bytes: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    scheduled: int = 0
    server_cores: float = math.nan
    server_loop_cores: float = math.nan
    client_cores: float = math.nan
    other_cores: float = math.nan  # the rest of the machine (other processes)

    def merge(self, other: LoadResult) -> None:
        self.requests += other.requests
        self.records += other.records
        self.bytes += other.bytes
        self.latencies_ms += other.latencies_ms
        self.errors += other.errors


class CpuMeter:
    """Cores used by a server process (all threads, and its event-loop thread) and by us."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._server: CpuTimes | None = None
        self._client = 0.0
        self._machine: float | None = None
        self._wall = 0.0

    def start(self) -> None:
        self._server = cpu_times(self.pid)
        self._client = time.process_time()
        self._machine = machine_busy_seconds()
        self._wall = time.monotonic()

    def stop(self, result: LoadResult) -> None:
        wall = time.monotonic() - self._wall
        if wall <= 0:
            return
        result.client_cores = (time.process_time() - self._client) / wall
        end = cpu_times(self.pid)
        if self._server is not None and end is not None:
            result.server_cores = (end.total - self._server.total) / wall
            result.server_loop_cores = (end.main_thread - self._server.main_thread) / wall
        machine = machine_busy_seconds()
        if self._machine is not None and machine is not None:
            busy = (machine - self._machine) / wall
            result.other_cores = max(busy - result.server_cores - result.client_cores, 0.0)


def _sleep_until(moment: float) -> None:
    delay = moment - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _connect(target: Target) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(HOST, target.port, timeout=120)


def _exchange(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: bytes | None = None,
    content_type: str | None = None,
) -> tuple[int, bytes, http.client.HTTPResponse]:
    headers = {"Content-Type": content_type} if content_type else {}
    conn.request(method, path, body, headers)
    response = conn.getresponse()
    data = response.read()
    return response.status, data, response


def _bodies(load: ProduceLoad) -> list[bytes]:
    rng = np.random.default_rng(load.seed)
    encode = json_body if load.fmt == "json" else arrow_body
    return [
        encode(make_values(load.records, load.value_bytes, rng, load.stamp), i % load.partitions)
        for i in range(load.distinct_bodies)
    ]


def run_produce(load: ProduceLoad) -> LoadResult:
    """Closed loop (``rate`` None) or open loop; only the window after warm-up counts."""
    bodies = _bodies(load)
    positions = [stamp_positions(b) for b in bodies] if load.stamp else []
    content_type = JSON_TYPE if load.fmt == "json" else ARROW_TYPE
    begin = load.start_at + load.warmup_s
    end = begin + load.duration_s
    total = LoadResult(seconds=load.duration_s, bytes=sum(map(len, bodies)) // len(bodies))
    meter = CpuMeter(load.target.pid)
    lock = threading.Lock()
    counter = iter(range(2**62))

    def account(
        part: LoadResult, status: int, data: bytes, counted: bool, ms: float | None
    ) -> None:
        if status != 200:
            part.errors.append(f"HTTP {status}: {data[:300]!r}")
            return
        if counted:
            part.requests += 1
            part.records += load.records
        if ms is not None:
            part.latencies_ms.append(ms)

    def closed(worker: int, part: LoadResult) -> None:
        conn = _connect(load.target)
        i = worker
        try:
            _sleep_until(load.start_at)
            while (started := time.monotonic()) < end and len(part.errors) < 3:
                status, data, _ = _exchange(
                    conn, "POST", load.path, bodies[i % len(bodies)], content_type
                )
                i += 1
                done = time.monotonic()
                # throughput: every answer within the window; latency: requests sent in it too
                counted = begin <= done <= end
                ms = (done - started) * 1e3 if counted and started >= begin else None
                account(part, status, data, counted, ms)
        finally:
            conn.close()

    def opened(worker: int, part: LoadResult) -> None:
        assert load.rate is not None
        give_up = end + max(2.0, load.duration_s)  # saturated: stop sending late requests
        conn = _connect(load.target)
        try:
            while len(part.errors) < 3:
                with lock:
                    k = next(counter)
                due = load.start_at + k / load.rate
                if due >= end or time.monotonic() > give_up:
                    return
                _sleep_until(due)
                body = bodies[k % len(bodies)]
                if load.stamp:
                    body = stamped(body, positions[k % len(bodies)], int(due * 1e9))
                status, data, _ = _exchange(conn, "POST", load.path, body, content_type)
                # every request due within the window, timed from when it was due
                ms = (time.monotonic() - due) * 1e3 if due >= begin else None
                account(part, status, data, due >= begin, ms)
        finally:
            conn.close()

    def cpu_window() -> None:
        _sleep_until(begin)
        meter.start()
        _sleep_until(end)
        meter.stop(total)

    parts = [LoadResult() for _ in range(load.connections)]
    work = closed if load.rate is None else opened
    threads = [threading.Thread(target=work, args=(i, p)) for i, p in enumerate(parts)]
    threads.append(threading.Thread(target=cpu_window))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for part in parts:
        total.merge(part)
    if load.rate is not None:
        first = math.ceil((begin - load.start_at) * load.rate)
        last = math.ceil((end - load.start_at) * load.rate)
        total.scheduled = last - first
    return total


def consume_head(load: HeadConsume) -> LoadResult:
    """Long-poll from offset 0 until the STOP record (or the deadline); e2e ms per record."""
    result = LoadResult()
    conn = _connect(load.target)
    offset = 0
    meter = CpuMeter(load.target.pid)
    meter.start()
    started = time.monotonic()
    try:
        while (left := load.deadline - time.monotonic()) > 0:
            wait = max(0, min(load.max_wait_ms, int(left * 1000)))
            path = (
                f"/v1/topics/{load.topic}/partitions/{load.partition}/records?offset={offset}"
                f"&max_records={load.max_records}&max_wait_ms={wait}"
                f"&format={load.fmt}&value_format=base64"
            )
            status, data, response = _exchange(conn, "GET", path)
            now = time.monotonic_ns()
            if status != 200:
                result.errors.append(f"HTTP {status}: {data[:300]!r}")
                break
            offset = int(response.getheader(NEXT_OFFSET, str(offset)))
            result.requests += 1
            result.bytes += len(data)
            stop = False
            for ns, magic in read_stamps(data, load.fmt):
                result.records += 1
                if magic == STOP:
                    stop = True
                elif magic == MAGIC and load.begin_ns <= ns < load.end_ns:
                    result.latencies_ms.append((now - ns) / 1e6)
            if stop:
                break
    finally:
        conn.close()
    result.seconds = time.monotonic() - started
    meter.stop(result)
    return result


def read_range(load: RangeRead) -> LoadResult:
    """Fetch [start, end) following next_offset (from the header: the body is not parsed)."""
    result = LoadResult()
    conn = _connect(load.target)
    offset = load.start
    meter = CpuMeter(load.target.pid)
    try:
        meter.start()
        with Stopwatch() as sw:
            while offset < load.end:
                path = (
                    f"/v1/topics/{load.topic}/partitions/{load.partition}/records"
                    f"?offset={offset}&max_records={load.max_records}"
                    f"&max_bytes={FETCH_MAX_BYTES}&format={load.fmt}&value_format=base64"
                )
                status, data, response = _exchange(conn, "GET", path)
                if status != 200:
                    result.errors.append(f"HTTP {status}: {data[:300]!r}")
                    break
                following = int(response.getheader(NEXT_OFFSET, str(offset)))
                if following <= offset:
                    result.errors.append(f"fetch at offset {offset} made no progress")
                    break
                result.requests += 1
                result.records += following - offset
                result.bytes += len(data)
                offset = following
        meter.stop(result)
    finally:
        conn.close()
    result.seconds = sw.seconds
    return result


def read_static(load: StaticRead) -> LoadResult:
    result = LoadResult()
    conn = _connect(load.target)
    meter = CpuMeter(load.target.pid)
    try:
        meter.start()
        with Stopwatch() as sw:
            for _ in range(load.requests):
                status, data, _ = _exchange(conn, "GET", f"/blob/{load.size}")
                if status != 200:
                    result.errors.append(f"HTTP {status}: {data[:300]!r}")
                    break
                result.requests += 1
                result.bytes += len(data)
        meter.stop(result)
    finally:
        conn.close()
    result.seconds = sw.seconds
    return result


def ready(seconds: float) -> int:
    """Occupies a pool worker briefly, so that both are spawned before anything is timed."""
    time.sleep(seconds)
    return os.getpid()


# -- servers -----------------------------------------------------------------


@dataclass
class Server:
    """A server subprocess on a loopback port; its output goes to ``log_path``."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def target(self) -> Target:
        return Target(self.port, self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def start_server(
    name: str, args: Sequence[str], log_dir: Path, env: dict[str, str] | None = None
) -> Server:
    """Start ``python args... --port P`` and wait until ``/healthz`` answers 200."""
    port = free_port(HOST)
    log_path = log_dir / f"{name}-{port}.log"
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, *args, "--port", str(port)],
            env=_env(env or {}),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=PROJECT,
        )
    server = Server(name, process, port, log_path)
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited early:\n{server.log_tail()}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection(HOST, port, timeout=2)
            try:
                if _exchange(conn, "GET", "/healthz")[0] == 200:
                    return server
            finally:
                conn.close()
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"{name} did not become healthy:\n{server.log_tail()}")
        time.sleep(0.05)


def start_broker(root: Path, cfg: BrokerBenchConfig, log_dir: Path) -> Server:
    args = ["-m", "server", "--root", str(root), "--host", HOST]
    args += ["--linger-ms", str(cfg.linger_ms), "--log-level", "warning"]
    return start_server("broker", args, log_dir)


def start_baseline(kind: str, log_dir: Path, root: Path | None = None) -> Server:
    args = ["-m", "benchmarks.bench_broker", "serve", kind]
    if root is not None:
        args += ["--root", str(root)]
    return start_server(kind, args, log_dir)


def call(
    target: Target, method: str, path: str, body: object = None, content_type: str = JSON_TYPE
) -> bytes:
    """One request from the orchestrator (setup, metrics), failing on any non-2xx answer."""
    conn = _connect(target)
    try:
        payload = (
            body
            if isinstance(body, bytes)
            else (json.dumps(body).encode() if body is not None else None)
        )
        status, data, _ = _exchange(conn, method, path, payload, content_type)
    finally:
        conn.close()
    if not 200 <= status < 300:
        raise RuntimeError(f"{method} {path} answered {status}: {data[:500]!r}")
    return data


def create_topic(broker: Server, name: str, partitions: int) -> None:
    call(broker.target, "POST", "/v1/topics", {"name": name, "partitions": partitions})


def segment_records(broker: Server, topic: str) -> float:
    """Mean records per segment the broker wrote for ``topic``."""
    described = json.loads(call(broker.target, "GET", f"/v1/topics/{topic}"))
    parts = described["partitions"]
    segments = sum(int(p["num_segments"]) for p in parts)
    return sum(int(p["num_records"]) for p in parts) / max(segments, 1)


_METRIC = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$")


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as ``name{labels}`` -> value (sums over nothing; labels kept)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _METRIC.match(line.strip())
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def broker_metrics(broker: Server) -> dict[str, float]:
    return parse_metrics(call(broker.target, "GET", "/metrics").decode())


@dataclass(frozen=True)
class CommitStats:
    """Group commits between two metric snapshots of one topic."""

    commits: float
    requests_per_commit: float
    records_per_commit: float
    commit_ms: float


def commit_stats(before: dict[str, float], after: dict[str, float], topic: str) -> CommitStats:
    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    commits = delta("lakelog_batch_requests_count")
    per = max(commits, 1.0)
    label = f'{{topic="{topic}"}}'
    return CommitStats(
        commits,
        delta("lakelog_batch_requests_sum") / per,
        delta("lakelog_batch_records_sum") / per,
        1000
        * delta(f"lakelog_commit_seconds_sum{label}")
        / max(delta(f"lakelog_commit_seconds_count{label}"), 1.0),
    )


# -- the baseline apps (run as ``python -m benchmarks.bench_broker serve ...``) --


def empty_app() -> FastAPI:
    """The HTTP ceiling: a produce route that reads the body and answers ``{}``."""
    app = FastAPI()
    blobs: dict[int, bytes] = {}

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON_TYPE)

    @app.post("/v1/topics/{topic}/records")
    async def produce(topic: str, request: Request) -> Response:
        await request.body()
        return Response(b"{}", media_type=JSON_TYPE)

    @app.get("/blob/{size}")
    async def blob(size: int) -> Response:
        data = blobs.get(size)
        if data is None:
            data = blobs[size] = b"x" * size
        return Response(data, media_type="application/octet-stream")

    return app


def naive_rows(raw: bytes, content_type: str) -> pa.Table:
    """The naive broker's decoding: json.loads and base64 per value, or an IPC read."""
    if content_type.startswith(ARROW_TYPE):
        table = pyarrow.ipc.open_stream(pa.py_buffer(raw)).read_all()
        values, partitions = table.column("value"), table.column("partition")
    else:
        records = json.loads(raw)["records"]
        values = pa.array([base64.b64decode(r["value"]) for r in records], pa.binary())
        partitions = pa.array([r.get("partition") or 0 for r in records], pa.int32())
    now = np.full(len(values), int(time.time() * 1000), np.int64)
    return pa.table(
        {
            "timestamp": pa.array(now).cast(pa.timestamp("ms", tz="UTC")),
            "value": values,
            "partition": partitions,
        }
    )


def naive_app(root: Path) -> FastAPI:
    """The naive broker: one ``write_deltalake`` per request, one request at a time."""
    from deltalake import write_deltalake

    app = FastAPI()
    lock = asyncio.Lock()

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON_TYPE)

    @app.post("/v1/topics/{topic}/records")
    async def produce(topic: str, request: Request) -> Response:
        rows = naive_rows(await request.body(), request.headers.get("content-type", ""))
        async with lock:
            await asyncio.to_thread(
                write_deltalake,
                str(root / topic),
                rows,
                mode="append",
                partition_by=["partition"],
            )
        return Response(json.dumps({"records": rows.num_rows}).encode(), media_type=JSON_TYPE)

    return app


def serve(argv: Sequence[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_broker")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("serve", help="run a baseline app")
    cmd.add_argument("kind", choices=["empty", "naive"])
    cmd.add_argument("--port", type=int, required=True)
    cmd.add_argument("--root", type=Path, help="table directory of the naive app")
    args = parser.parse_args(argv)
    if args.kind == "naive" and args.root is None:
        parser.error("the naive app needs --root")
    app = empty_app() if args.kind == "empty" else naive_app(args.root)
    uvicorn.run(app, host=HOST, port=args.port, log_level="warning", access_log=False)
    return 0


# -- ceilings measured in-process ----------------------------------------------


def segment_table(count: int, base: int, value_bytes: int, rng: np.random.Generator) -> pa.Table:
    """Rows as the broker stores them (its segment schema), offsets from ``base``."""
    now_ms = int(time.time() * 1000)
    columns: dict[str, pa.Array] = {
        "offset": pa.array(np.arange(base, base + count, dtype=np.int64)),
        "timestamp": pa.array(np.full(count, now_ms, np.int64)).cast(
            SEGMENT_SCHEMA.field("timestamp").type
        ),
        "timestamp_type": pa.array(np.zeros(count, np.int32)),
        "value": random_binary(count, value_bytes, rng),
    }
    return pa.table(
        [columns[f.name] if f.name in columns else pa.nulls(count, f.type) for f in SEGMENT_SCHEMA],
        schema=SEGMENT_SCHEMA,
    )


def raw_parquet_write(
    file_records: int, total_records: int, value_bytes: int, directory: Path, seed: int
) -> float:
    """records/s of ``pq.write_table`` of segment rows in files of ``file_records`` each."""
    rng = np.random.default_rng(seed)
    file_records = max(file_records, 1)
    files = max(total_records // file_records, 1)
    tables = [segment_table(file_records, i * file_records, value_bytes, rng) for i in range(4)]
    pq.write_table(tables[0], directory / "warmup.parquet")
    with Stopwatch() as sw:
        for i in range(files):
            pq.write_table(tables[i % len(tables)], directory / f"{i:06d}.parquet")
    return rate(files * file_records, sw.seconds)


def raw_parquet_read(paths: Sequence[Path], repeats: int) -> tuple[float, int]:
    """(seconds, rows) of the fastest full ``pq.read_table`` pass over ``paths``."""
    best, rows = math.inf, 0
    for _ in range(max(repeats, 1)):
        with Stopwatch() as sw:
            rows = sum(pq.read_table(p).num_rows for p in paths)
        best = min(best, sw.seconds)
    return best, rows


# -- the suite ---------------------------------------------------------------


@dataclass
class Bench:
    """What the phases share: config, client pool, servers, progress, work directory."""

    cfg: BrokerBenchConfig
    pool: ProcessPoolExecutor
    broker: Server
    empty: Server
    naive: Server
    workdir: Path
    progress: Progress
    notes: list[str] = field(default_factory=list)
    saturation_rps: dict[str, float] = field(default_factory=dict)

    def produce_load(
        self,
        server: Server,
        topic: str,
        fmt: Format,
        records: int,
        connections: int,
        duration_s: float,
        rate: float | None = None,
        stamp: bool = False,
        partitions: int | None = None,
        lead_s: float = 0.3,
    ) -> ProduceLoad:
        cfg = self.cfg
        return ProduceLoad(
            target=server.target,
            path=f"/v1/topics/{topic}/records?acks=all",
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
        )

    def run(self, fn: Callable[[ProduceLoad], LoadResult], load: ProduceLoad) -> LoadResult:
        warm_up(load)
        load = replace(load, start_at=max(load.start_at, time.monotonic() + 0.1))
        settle_disk()
        result = self.pool.submit(fn, load).result()
        check(result, load.path)
        return result


def warm_up(load: ProduceLoad) -> None:
    """One untimed request: the first one opens the topic (or creates the naive app's table)."""
    body = _bodies(replace(load, distinct_bodies=1))[0]
    if load.stamp:  # stamped before every timed window, so a consumer ignores it
        body = stamped(body, stamp_positions(body), 0)
    call(load.target, "POST", load.path, body, JSON_TYPE if load.fmt == "json" else ARROW_TYPE)


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
            f"({st.records_per_commit:,.0f} records) per commit, {st.commit_ms:.1f} ms per "
            f"commit, {segment:,.0f} records/segment, request p50 "
            f"{params['request_p50_ms'] or 0:.1f} ms; {_cores(lake, per_s[LAKELOG])}"
        )
    return results


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
        f"latency: {stats.requests_per_commit:.1f} requests per commit, {stats.commit_ms:.1f} ms "
        f"per commit; {_cores(lake)}"
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
            target=b.broker.target,
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
        call(b.broker.target, "POST", f"/v1/topics/{topic}/records?acks=all", stop_body(cfg))
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
        call(b.broker.target, "POST", f"/v1/topics/{topic}/records?acks=all", body, ARROW_TYPE)
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
            b.broker = start_broker(root, cfg, b.workdir)
            call(
                b.broker.target,
                "GET",
                f"/v1/topics/{topic}/partitions/0/records?offset=0&max_records=1&value_format=base64",
            )
        for fmt in cfg.fetch_formats:
            b.progress(f"fetch: {fmt} from {source}")
            before = broker_metrics(b.broker)
            read = RangeRead(
                b.broker.target, topic, 0, 0, cfg.fetch_records, fmt, cfg.fetch_max_records
            )
            settle_disk()
            got = b.pool.submit(read_range, read).result()
            check(got, f"fetch {fmt} from {source}")
            after = broker_metrics(b.broker)
            hits = after.get("lakelog_fetch_cache_hits", 0) - before.get(
                "lakelog_fetch_cache_hits", 0
            )
            static = b.pool.submit(
                read_static, StaticRead(b.empty.target, got.bytes // got.requests, got.requests)
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


def run_config(cfg: BrokerBenchConfig, workdir: Path, progress: Progress) -> Report:
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
        servers: list[Server] = []

        @stack.callback
        def stop_servers() -> None:
            for server in servers:
                server.stop()

        broker = start_broker(root, cfg, workdir)
        servers.append(broker)
        empty = start_baseline("empty", workdir)
        servers.append(empty)
        naive = start_baseline("naive", workdir, workdir / "naive-root")
        servers.append(naive)
        for f in warming:
            f.result()
        bench = Bench(cfg, pool, broker, empty, naive, workdir, progress)
        try:
            report.results += bench_produce(bench)
            report.results += bench_latency(bench)
            report.results += bench_e2e(bench)
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
    """The ``broker`` suite at a named size (tiny, small, large)."""
    return run_config(config_for(CONFIGS, size), workdir, progress)


if __name__ == "__main__":
    sys.exit(serve())
