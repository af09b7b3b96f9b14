"""The baselines of the broker suite: what its figures are compared with.

* ``empty``: a FastAPI/uvicorn app whose produce route reads the body and
  answers ``{}``, and which serves GETs of a body of any size: the HTTP
  ceiling of a produce and of a fetch.
* ``naive``: a FastAPI app doing ``json.loads``/base64 (or an Arrow IPC read)
  and one ``write_deltalake`` per request, serialized: the durable write a
  broker without group commit would make.
* in-process ``pq.write_table`` and ``pq.read_table`` of rows in the broker's
  segment schema: the storage ceilings, no HTTP and no fsync.

``python -m benchmarks.broker_baselines serve empty|naive --port P [--root R]``
runs one of the apps (the suite starts them itself).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
from fastapi import FastAPI, Request, Response

from benchmarks.broker_load import ARROW_TYPE, JSON_TYPE
from benchmarks.common import Stopwatch, random_binary, rate
from lakelog.records import SEGMENT_SCHEMA
from lakelog.testing.brokers import LOOPBACK

# -- the apps (run as ``python -m benchmarks.broker_baselines serve ...``) -----------


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

    parser = argparse.ArgumentParser(prog="python -m benchmarks.broker_baselines")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("serve", help="run a baseline app")
    cmd.add_argument("kind", choices=["empty", "naive"])
    cmd.add_argument("--port", type=int, required=True)
    cmd.add_argument("--root", type=Path, help="table directory of the naive app")
    args = parser.parse_args(argv)
    if args.kind == "naive" and args.root is None:
        parser.error("the naive app needs --root")
    app = empty_app() if args.kind == "empty" else naive_app(args.root)
    uvicorn.run(app, host=LOOPBACK, port=args.port, log_level="warning", access_log=False)
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


if __name__ == "__main__":
    sys.exit(serve())
