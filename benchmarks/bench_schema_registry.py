"""Schema Registry look-ups: ``GET /schemas/ids/{id}`` latency at a fixed request rate.

Every Confluent deserializer asks the registry for a schema id it has not seen
yet, so a broker answers these look-ups for whole fleets of consumers starting
at once. One broker subprocess over a temporary local root has ``schemas``
Avro schemas registered; a client process (spawned, so its CPU is not the
broker's) sends GETs open loop at ``rate`` requests/s over ``connections``
persistent connections, each request due at a fixed time and timed from then
(a late answer delays the requests behind it, and they count as late). After a
warm-up, p50 and p99 over the measured window.

Baselines, same broker, same load, same run: ``GET /healthz`` (the broker's
health check, a storage listing on a worker thread) and ``GET /schemas/types``
(an answer from memory through the same router, middleware and ACL
dependency: the floor of any routed registry request). Look-ups by id after
the first are answered from memory before routing (``fast_path.py``), as they
are in production without authentication.
"""

from __future__ import annotations

import http.client
import json
import logging
import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import Progress, Report, Result, config_for, percentile, rate, scratch_dir
from benchmarks.servers import start_broker
from lakelog.testing.brokers import LOOPBACK, ServerProcess

NAME = "schema-registry"
DESCRIPTION = "Schema Registry: GET /schemas/ids/{id} p50/p99 at a fixed rate, beside /healthz"
LOOKUP = "registry look-up"
HEALTHZ = "GET /healthz"
TYPES = "GET /schemas/types"
V1_JSON = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True)
class RegistryBenchConfig:
    rate: float  # requests/s offered
    seconds: float  # measured window
    warmup_s: float
    connections: int
    schemas: int


CONFIGS = {
    "tiny": RegistryBenchConfig(100.0, 1.0, 0.3, 4, 3),
    "small": RegistryBenchConfig(500.0, 10.0, 2.0, 8, 20),
    "large": RegistryBenchConfig(500.0, 30.0, 3.0, 8, 100),
}


@dataclass(frozen=True)
class OpenLoop:
    """GETs of ``paths`` (in turn) at ``rate``/s, the first ``start_in_s`` after the client
    process receives the load (its connections are open by then)."""

    port: int
    paths: tuple[str, ...]
    rate: float
    connections: int
    start_in_s: float
    warmup_s: float
    seconds: float


@dataclass
class Timings:
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sent: int = 0


def run_open_loop(load: OpenLoop) -> Timings:
    """Runs in the client process: one thread per connection, request k due at k/rate."""
    total = int((load.warmup_s + load.seconds) * load.rate)
    start_at = time.monotonic() + load.start_in_s
    measured_from = start_at + load.warmup_s
    out = Timings()
    lock = threading.Lock()

    def worker(first: int) -> None:
        conn = http.client.HTTPConnection(LOOPBACK, load.port, timeout=30)
        mine: list[float] = []
        errors: list[str] = []
        sent = 0
        try:
            for k in range(first, total, load.connections):
                due = start_at + k / load.rate
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                conn.request("GET", load.paths[k % len(load.paths)], headers={"Accept": V1_JSON})
                response = conn.getresponse()
                body = response.read()
                done = time.monotonic()
                if response.status != 200:
                    errors.append(f"HTTP {response.status}: {body[:200]!r}")
                    continue
                if due >= measured_from:
                    mine.append((done - due) * 1000)
                    sent += 1
        finally:
            conn.close()
        with lock:
            out.latencies_ms += mine
            out.errors += errors
            out.sent += sent

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(load.connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def register_schemas(server: ServerProcess, count: int) -> list[int]:
    conn = http.client.HTTPConnection(LOOPBACK, server.port, timeout=60)
    ids = []
    try:
        for n in range(count):
            fields = [{"name": f"f{i}", "type": "string"} for i in range(8)]
            schema = {"type": "record", "name": f"Order{n}", "fields": fields}
            body = json.dumps({"schema": json.dumps(schema)})
            conn.request(
                "POST", f"/subjects/bench{n}-value/versions", body, {"Content-Type": V1_JSON}
            )
            response = conn.getresponse()
            data = response.read()
            if response.status != 200:
                raise RuntimeError(f"register answered {response.status}: {data[:300]!r}")
            ids.append(int(json.loads(data)["id"]))
    finally:
        conn.close()
    return ids


def measure(
    pool: ProcessPoolExecutor, cfg: RegistryBenchConfig, port: int, paths: list[str]
) -> Timings:
    load = OpenLoop(
        port,
        tuple(paths),
        cfg.rate,
        cfg.connections,
        0.2,
        cfg.warmup_s,
        cfg.seconds,
    )
    timings = pool.submit(run_open_loop, load).result()
    if timings.errors:
        raise RuntimeError(f"{len(timings.errors)} failed requests, e.g. {timings.errors[0]}")
    return timings


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``schema-registry`` suite at a named size (tiny, small, large)."""
    cfg = config_for(CONFIGS, size)
    logging.getLogger("lakelog").setLevel(logging.WARNING)
    report = Report(NAME)
    spawn = multiprocessing.get_context("spawn")
    with scratch_dir(workdir, "schema-registry") as scratch:
        server = start_broker(scratch / "root", scratch)
        try:
            with ProcessPoolExecutor(1, mp_context=spawn) as pool:
                pool.submit(time.sleep, 0.1).result()  # spawned before anything is timed
                ids = register_schemas(server, cfg.schemas)
                contenders = {
                    LOOKUP: [f"/schemas/ids/{i}" for i in ids],
                    HEALTHZ: ["/healthz"],
                    TYPES: ["/schemas/types"],
                }
                found: dict[str, Timings] = {}
                for label, paths in contenders.items():
                    progress(f"{label}: {cfg.rate:.0f} requests/s for {cfg.seconds:.0f} s")
                    found[label] = measure(pool, cfg, server.port, paths)
        finally:
            server.stop()
    variant = f"{cfg.rate:.0f} requests/s, {cfg.schemas} schemas"
    params = {"rate": cfg.rate, "seconds": cfg.seconds, "connections": cfg.connections}
    ours = found[LOOKUP]
    for metric, q in (("p50 latency", 50.0), ("p99 latency", 99.0)):
        report.add(
            Result(
                LOOKUP,
                variant,
                metric,
                percentile(ours.latencies_ms, q),
                "ms",
                {k: percentile(found[k].latencies_ms, q) for k in (HEALTHZ, TYPES)},
                higher_is_better=False,
                params=params,
            )
        )
    report.add(
        Result(
            LOOKUP,
            variant,
            "answered",
            rate(ours.sent, cfg.seconds),
            "requests/s",
            {k: rate(found[k].sent, cfg.seconds) for k in (HEALTHZ, TYPES)},
            params=params,
        )
    )
    p99 = percentile(ours.latencies_ms, 99.0)
    report.notes.append(
        f"GET /schemas/ids/{{id}} at {cfg.rate:.0f} requests/s: p99 {p99:.2f} ms "
        f"(target: at most 10 ms at 500 requests/s); open loop over {cfg.connections} "
        "connections from a separate client process, latency from each request's due time"
    )
    return report
