"""Load generation against an HTTP server: produce, long-poll, range and static reads.

These run in the benchmark's client processes (a spawned pool), so the
client's CPU is never the broker's: persistent ``http.client`` connections,
one per thread, and bodies encoded before the clock starts. Each load is a
frozen dataclass (picklable for the pool) and each run returns a
:class:`LoadResult` with the CPU both sides used over the timed window.

Produced values may carry a stamp (their due time on ``CLOCK_MONOTONIC``,
one clock for every process of the machine), so a consumer can time each
record from send to receipt.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import re
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc

from benchmarks.common import (
    CpuTimes,
    Stopwatch,
    cpu_times,
    machine_busy_seconds,
    random_binary,
)
from lakelog.testing.brokers import LOOPBACK, ServerProcess

JSON_TYPE = "application/json"
ARROW_TYPE = "application/vnd.apache.arrow.stream"
NEXT_OFFSET = "X-Lakelog-Next-Offset"

#: A stamped value starts with 8 bytes of CLOCK_MONOTONIC nanoseconds (one clock
#: for every process of the machine) and 4 bytes of magic: 12 bytes, 16 base64 chars.
STAMP = struct.Struct(">Q4s")
STAMP_CHARS = 16
MAGIC = b"LKLG"
STOP = b"STOP"
FETCH_MAX_BYTES = 64 << 20  # never the limit: fetches are bounded by max_records

Format = Literal["json", "arrow"]
#: Which API a produce body is for: the native ``/v1`` (JSON or Arrow, by ``Format``), REST
#: Proxy v2 with the binary or json embedded format, v3 one record per request or streamed.
Api = Literal["v1", "v2-binary", "v2-json", "v3", "v3-stream"]
#: How a record finds its partition: named in the body (one partition per request, or
#: ``spread`` over every partition in each request, as keyed records are), by its key, or
#: neither (sticky).
Placement = Literal["partition", "spread", "key", "none"]
BINARY_V2_TYPE = "application/vnd.kafka.binary.v2+json"
JSON_V2_TYPE = "application/vnd.kafka.json.v2+json"
#: The REST Proxy v3 cluster id the benchmark's broker reports (its default).
CLUSTER_ID = "lakelog"


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
    return ipc_bytes(
        pa.table({"value": values, "partition": pa.array(np.full(n, partition, np.int32))})
    )


def ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def make_keys(count: int, rng: np.random.Generator) -> list[bytes]:
    """Keys as applications send them: short ids out of a large space (``user-0001234``)."""
    return [f"user-{n:07d}".encode() for n in rng.integers(0, 10_000_000, count)]


def shaped_body(
    api: Api,
    fmt: Format,
    values: pa.Array,
    partitions: Sequence[int] | None,
    keys: Sequence[bytes] | None,
) -> bytes:
    """One produce body of ``values`` for ``api``: record ``i`` names ``partitions[i]`` and
    carries ``keys[i]``, each when given (with neither, the broker chooses)."""
    raw = values.to_pylist()
    b64 = [base64.b64encode(v).decode("ascii") for v in raw]
    if api == "v1" and fmt == "arrow":
        columns: dict[str, pa.Array] = {"value": values}
        if keys is not None:
            columns["key"] = pa.array(keys, pa.binary())
        if partitions is not None:
            columns["partition"] = pa.array(partitions, pa.int32())
        return ipc_bytes(pa.table(columns))
    field = "partition_id" if api in ("v3", "v3-stream") else "partition"
    records: list[dict[str, object]]
    sent_keys: list[object] | None
    if api == "v2-json":
        # Embedded JSON: the value is a JSON object holding the same bytes, hex-encoded.
        records = [{"value": {"data": v.hex()}} for v in raw]
        sent_keys = [k.decode("ascii") for k in keys] if keys is not None else None
    elif field == "partition_id":
        records = [{"value": {"type": "BINARY", "data": v}} for v in b64]
        sent_keys = (
            [{"type": "BINARY", "data": base64.b64encode(k).decode("ascii")} for k in keys]
            if keys is not None
            else None
        )
    else:
        records = [{"value": v} for v in b64]
        sent_keys = (
            [base64.b64encode(k).decode("ascii") for k in keys] if keys is not None else None
        )
    for i, record in enumerate(records):
        if sent_keys is not None:
            record["key"] = sent_keys[i]
        if partitions is not None:
            record[field] = partitions[i]
    if field == "partition_id":  # v3: concatenated JSON objects, one per record
        return "\n".join(json.dumps(r, separators=(",", ":")) for r in records).encode()
    formats = {"key_format": "base64", "value_format": "base64"} if api == "v1" else {}
    return json.dumps({"records": records, **formats}, separators=(",", ":")).encode()


def content_type_of(api: Api, fmt: Format) -> str:
    if api == "v1":
        return JSON_TYPE if fmt == "json" else ARROW_TYPE
    return {"v2-binary": BINARY_V2_TYPE, "v2-json": JSON_V2_TYPE}.get(api, JSON_TYPE)


def produce_path(api: Api, topic: str) -> str:
    """Where ``api`` takes produce requests for ``topic`` (all wait for the durable commit)."""
    if api == "v1":
        return f"/v1/topics/{topic}/records?acks=all"
    if api in ("v2-binary", "v2-json"):
        return f"/topics/{topic}"
    return f"/v3/clusters/{CLUSTER_ID}/topics/{topic}/records"


def refused_records(api: Api, answer: bytes, records: int) -> str | None:
    """What a REST Proxy answer (HTTP 200 even when records fail) says went wrong, if anything."""
    if api in ("v2-binary", "v2-json"):
        ok = answer.count(b'"error_code":null')
    elif api in ("v3", "v3-stream"):
        ok = answer.count(b'"error_code":200')
    else:
        return None
    return None if ok == records else f"{records - ok} records refused: {answer[:300]!r}"


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
    api: Api = "v1"
    placement: Placement = "partition"
    #: keep what every acknowledgement said (``LoadResult.acknowledged``), to check the log later
    keep_offsets: bool = False


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
    #: With ``keep_offsets``: every acknowledged request, warm-up included, as
    #: (body index, partition, first offset, records); its offsets are consecutive.
    acknowledged: list[tuple[int, int, int, int]] = field(default_factory=list)

    def merge(self, other: LoadResult) -> None:
        self.acknowledged += other.acknowledged
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


def target_of(server: ServerProcess) -> Target:
    """What a load needs of a started server (picklable, unlike the process handle)."""
    return Target(server.port, server.pid)


def connect(target: Target) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(LOOPBACK, target.port, timeout=120)


def exchange(
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


def body_values(load: ProduceLoad) -> list[pa.Array]:
    """The values of each distinct body of ``load`` (the same in every process: seeded)."""
    rng = np.random.default_rng(load.seed)
    return [
        make_values(load.records, load.value_bytes, rng, load.stamp)
        for _ in range(load.distinct_bodies)
    ]


def produce_bodies(load: ProduceLoad) -> list[bytes]:
    """Body ``i`` sends ``body_values(load)[i]``, every record to partition ``i % partitions``
    (or, by ``placement``, with keys, or with neither)."""
    values = body_values(load)
    if load.api == "v1" and load.placement == "partition":
        encode = json_body if load.fmt == "json" else arrow_body
        return [encode(v, i % load.partitions) for i, v in enumerate(values)]
    rng = np.random.default_rng(load.seed + 1)
    bodies = []
    for i, v in enumerate(values):
        n = len(v)
        partitions = {
            "partition": [i % load.partitions] * n,
            "spread": [j % load.partitions for j in range(n)],
        }.get(load.placement)
        keys = make_keys(n, rng) if load.placement == "key" else None
        bodies.append(shaped_body(load.api, load.fmt, v, partitions, keys))
    return bodies


def in_window(started: float, done: float, begin: float, end: float) -> tuple[bool, float | None]:
    """Whether a closed-loop answer counts toward throughput, and its latency sample in ms.

    Throughput counts every answer that arrives inside ``[begin, end]``. Latency
    times every request sent inside the window, however late its answer:
    dropping answers after ``end`` would keep only the fast requests, and a
    window shorter than one request would have no sample at all.
    """
    counted = begin <= done <= end
    return counted, (done - started) * 1e3 if begin <= started < end else None


def run_produce(load: ProduceLoad) -> LoadResult:
    """Closed loop (``rate`` None) or open loop; only the window after warm-up counts."""
    bodies = produce_bodies(load)
    positions = [stamp_positions(b) for b in bodies] if load.stamp else []
    content_type = content_type_of(load.api, load.fmt)
    begin = load.start_at + load.warmup_s
    end = begin + load.duration_s
    total = LoadResult(seconds=load.duration_s, bytes=sum(map(len, bodies)) // len(bodies))
    meter = CpuMeter(load.target.pid)
    lock = threading.Lock()
    counter = iter(range(2**62))

    def account(
        part: LoadResult, status: int, data: bytes, counted: bool, ms: float | None, body: int
    ) -> None:
        if status != 200:
            part.errors.append(f"HTTP {status}: {data[:300]!r}")
            return
        if (refused := refused_records(load.api, data, load.records)) is not None:
            part.errors.append(refused)
            return
        if load.keep_offsets:
            try:
                part.acknowledged.append(acknowledged_range(body, data))
            except (ValueError, KeyError, IndexError) as exc:
                part.errors.append(f"unusable acknowledgement: {exc}")
                return
        if counted:
            part.requests += 1
            part.records += load.records
        if ms is not None:
            part.latencies_ms.append(ms)

    def closed(worker: int, part: LoadResult) -> None:
        conn = connect(load.target)
        i = worker
        try:
            _sleep_until(load.start_at)
            while (started := time.monotonic()) < end and len(part.errors) < 3:
                body = i % len(bodies)
                status, data, _ = exchange(conn, "POST", load.path, bodies[body], content_type)
                i += 1
                done = time.monotonic()
                counted, ms = in_window(started, done, begin, end)
                account(part, status, data, counted, ms, body)
        finally:
            conn.close()

    def opened(worker: int, part: LoadResult) -> None:
        assert load.rate is not None
        give_up = end + max(2.0, load.duration_s)  # saturated: stop sending late requests
        conn = connect(load.target)
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
                status, data, _ = exchange(conn, "POST", load.path, body, content_type)
                # every request due within the window, timed from when it was due
                ms = (time.monotonic() - due) * 1e3 if due >= begin else None
                account(part, status, data, due >= begin, ms, k % len(bodies))
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


def acknowledged_range(body: int, answer: bytes) -> tuple[int, int, int, int]:
    """(body, partition, first offset, records) of a produce answer whose offsets are consecutive.

    Every body sends all its records to one partition, so one commit gives them
    consecutive offsets; anything else is a broken acknowledgement.
    """
    records = json.loads(answer)["records"]
    partitions = {r["partition"] for r in records}
    offsets = [r["offset"] for r in records]
    first = offsets[0]
    if len(partitions) != 1 or offsets != list(range(first, first + len(offsets))):
        raise ValueError(f"acknowledged offsets are not one consecutive run: {answer[:300]!r}")
    return body, partitions.pop(), first, len(offsets)


def consume_head(load: HeadConsume) -> LoadResult:
    """Long-poll from offset 0 until the STOP record (or the deadline); e2e ms per record."""
    result = LoadResult()
    conn = connect(load.target)
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
            status, data, response = exchange(conn, "GET", path)
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
    conn = connect(load.target)
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
                status, data, response = exchange(conn, "GET", path)
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
    conn = connect(load.target)
    meter = CpuMeter(load.target.pid)
    try:
        meter.start()
        with Stopwatch() as sw:
            for _ in range(load.requests):
                status, data, _ = exchange(conn, "GET", f"/blob/{load.size}")
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


# -- requests from the orchestrator ----------------------------------------------


def call(
    target: Target, method: str, path: str, body: object = None, content_type: str = JSON_TYPE
) -> bytes:
    """One request from the orchestrator (setup, metrics), failing on any non-2xx answer."""
    conn = connect(target)
    try:
        payload = (
            body
            if isinstance(body, bytes)
            else (json.dumps(body).encode() if body is not None else None)
        )
        status, data, _ = exchange(conn, method, path, payload, content_type)
    finally:
        conn.close()
    if not 200 <= status < 300:
        raise RuntimeError(f"{method} {path} answered {status}: {data[:500]!r}")
    return data


def warm_up(load: ProduceLoad) -> None:
    """One untimed request: the first one opens the topic (or creates the naive app's table)."""
    body = produce_bodies(replace(load, distinct_bodies=1))[0]
    if load.stamp:  # stamped before every timed window, so a consumer ignores it
        body = stamped(body, stamp_positions(body), 0)
    call(load.target, "POST", load.path, body, content_type_of(load.api, load.fmt))
