"""The Spark connector: full scans, selective reads and streaming, on local Spark.

One topic of N records (100-byte random values, round-robin over the
partitions, written with bulk appends) in a temporary local root; every
figure next to its baselines from the same run and the same SparkSession:

* full scan: ``spark_connector.read_topic`` (Spark's native Parquet scan of
  the snapshot's files) of the whole topic into Spark's ``noop`` sink (every
  column materialised) vs ``spark.read.parquet`` of the same segment files
  (the list from delta-rs ``DeltaTable.file_uris()``, ``partition`` from the
  path), also into ``noop``, and vs ``spark.read.format("lakelog")`` (the
  Python data source). Goal: native/parquet >= 0.95.
* Spark SQL: ``SELECT * FROM`` a view of ``register_topics(...,
  snapshot=True)`` into ``noop``, vs the same parquet read. Goal: >= 0.95.
* selective read: one partition's offset range, as ``assign`` +
  ``startingOffsets``/``endingOffsets`` options of ``read_topic`` (only the
  overlapping files are listed; their count is printed), vs the full native
  scan, vs ``spark.read.parquet`` with the equivalent filter (partition +
  row-group pruning) and vs the Python data source with the filter pushed.
* stream throughput: a query from the earliest offset with
  ``Trigger.AvailableNow`` into ``noop``, vs the batch full scan.
* caught-up latency: a running query (default trigger) over the topic's head
  while small appends arrive every ``append_interval_s``; end-to-end latency
  (append committed -> rows seen in ``foreachBatch``) and the duration of the
  triggers that carried data, each vs the same percentile of Spark's built-in
  ``rate`` source at the same records/s (the engine's own floor). The rate
  source releases its rows one second at a time (rows stamped within a second
  are readable once it ends), so its end-to-end latency runs from the end of
  that second to ``foreachBatch`` seeing the rows: one sample per second, as
  many as there are appends. Each query's first (start-up) trigger is left
  out on both sides.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import lakelog
import spark_connector
from benchmarks.common import (
    Progress,
    Report,
    Result,
    Stopwatch,
    config_for,
    load_note,
    median,
    percentile,
    random_binary,
    rate,
    scratch_dir,
)
from compaction.spark_session import spark_session

NAME = "connector"
DESCRIPTION = "Spark connector: full scan vs spark.read.parquet, selective read, streaming"

SCAN = "full scan"
SELECTIVE = "selective read"
SQL_SCAN = "Spark SQL full scan"
STREAM = "stream throughput"
LATENCY = "caught-up stream latency"

PARQUET = "spark.read.parquet"
FULL = "native full scan"
SQL = "Spark SQL view"
DATA_SOURCE = "format lakelog (Python data source)"
BATCH = "connector batch scan"
RATE = "rate source"
SCAN_GOAL = 0.95
STREAM_GOAL = 1.5

TOPIC = "bench"


@dataclass(frozen=True)
class ConnectorBenchConfig:
    """How much of each benchmark to run; ``CONFIGS`` holds the named sizes."""

    records: int
    partitions: int = 4
    append_records: int = 250_000
    value_bytes: int = 100
    #: timed runs of each scan contender (median): the native scan, a snapshot view and
    #: spark.read.parquet run the same Parquet reader, so a few rounds' spread decides
    #: their order
    rounds: int = 3
    #: one untimed run of each contender first (JIT, caches); off only for smoke tests
    warmup: bool = True
    #: the selective read covers this fraction of partition 0
    selective_fraction: float = 0.01
    #: samples of the caught-up stream's e2e latency: a p99 of a few dozen is the
    #: largest sample or next to it, one stall of the machine decides it
    latency_appends: int = 20
    latency_records: int = 100
    append_interval_s: float = 0.5
    seed: int = 0


CONFIGS: dict[str, ConnectorBenchConfig] = {
    "tiny": ConnectorBenchConfig(
        records=20_000,
        append_records=5_000,
        rounds=1,
        warmup=False,
        selective_fraction=0.1,
        latency_appends=3,
        latency_records=10,
        append_interval_s=0.3,
    ),
    "small": ConnectorBenchConfig(records=2_000_000, rounds=9, latency_appends=40),
    "large": ConnectorBenchConfig(records=10_000_000, rounds=5, latency_appends=120),
}


# -- data --------------------------------------------------------------------


def fill_topic(root: Path, cfg: ConnectorBenchConfig, progress: Progress) -> lakelog.TopicLog:
    catalog = lakelog.connect(str(root))
    catalog.create_topic(TOPIC, cfg.partitions)
    log = catalog.topic(TOPIC)
    rng = np.random.default_rng(cfg.seed)
    written = 0
    while written < cfg.records:
        n = min(cfg.append_records, cfg.records - written)
        partition = (np.arange(written, written + n) % cfg.partitions).astype(np.int32)
        log.append(
            pa.table(
                {
                    "partition": pa.array(partition, pa.int32()),
                    "value": random_binary(n, cfg.value_bytes, rng),
                }
            )
        )
        written += n
        progress(f"wrote {written:,} of {cfg.records:,} records")
    log.wait_for_checkpoints()
    return log


def connector_df(spark: SparkSession, root: Path) -> DataFrame:
    """The Python data source's scan of the topic."""
    return spark.read.format("lakelog").option("root", str(root)).option("subscribe", TOPIC).load()


def native_df(spark: SparkSession, root: Path, **options: str) -> DataFrame:
    """Spark's native Parquet scan of the topic's files (planned when called)."""
    topic = None if "assign" in options else TOPIC
    return spark_connector.read_topic(spark, topic, root=str(root), options=options)


def sql_df(spark: SparkSession, root: Path) -> DataFrame:
    """``SELECT *`` from a snapshot view of the topic (registered when called)."""
    views = spark_connector.register_topics(spark, str(root), [TOPIC], snapshot=True)
    return spark.sql(f"SELECT * FROM {views[TOPIC]}")


def parquet_df(spark: SparkSession, table_uri: str) -> DataFrame:
    files = DeltaTable(table_uri).file_uris()
    return spark.read.option("basePath", table_uri).parquet(*files)


def noop(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def timed_rounds(
    contenders: dict[str, Callable[[], object]],
    rounds: int,
    progress: Progress,
    what: str,
    warmup: bool = True,
) -> dict[str, list[float]]:
    """Median-ready timings: one untimed warm-up each, then rounds in rotating order."""
    for fn in contenders.values() if warmup else ():
        fn()
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for round_no in range(rounds):
        progress(f"{what}: round {round_no + 1} of {rounds}")
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            with Stopwatch() as sw:
                contenders[name]()
            seconds[name].append(sw.seconds)
    return seconds


# -- benchmarks --------------------------------------------------------------


def bench_scans(
    spark: SparkSession,
    root: Path,
    log: lakelog.TopicLog,
    cfg: ConnectorBenchConfig,
    progress: Progress,
) -> list[Result]:
    table_uri = log.storage.delta_uri(log.table_path)
    n = cfg.records
    first_end = log.high_watermark(0)
    width = max(1, int(first_end * cfg.selective_fraction))
    lo = (first_end - width) // 2
    selective = (F.col("partition") == 0) & (F.col("offset") >= lo) & (F.col("offset") < lo + width)
    range_options = {
        "assign": json.dumps({TOPIC: [0]}),
        "startingOffsets": json.dumps({TOPIC: {"0": lo}}),
        "endingOffsets": json.dumps({TOPIC: {"0": lo + width}}),
    }
    checks = {
        "native": native_df(spark, root, **range_options).count(),
        "data source": connector_df(spark, root).where(selective).count(),
    }
    if set(checks.values()) != {width}:
        raise RuntimeError(f"selective reads returned {checks}, expected {width} rows each")
    if native_df(spark, root).count() != n or sql_df(spark, root).count() != n:
        raise RuntimeError(f"a native full scan did not return {n} rows")
    segments = sum(len(log.segments(p)) for p in range(cfg.partitions))
    listed = len(native_df(spark, root, **range_options).inputFiles())
    contenders: dict[str, Callable[[], object]] = {
        FULL: lambda: noop(native_df(spark, root)),
        SQL: lambda: noop(sql_df(spark, root)),
        PARQUET: lambda: noop(parquet_df(spark, table_uri)),
        DATA_SOURCE: lambda: noop(connector_df(spark, root)),
        "selective": lambda: noop(native_df(spark, root, **range_options)),
        "selective parquet": lambda: noop(parquet_df(spark, table_uri).where(selective)),
        "selective data source": lambda: noop(connector_df(spark, root).where(selective)),
    }
    seconds = timed_rounds(contenders, cfg.rounds, progress, "scans", cfg.warmup)
    med = {name: median(s) for name, s in seconds.items()}
    mb = cfg.value_bytes / 1e6
    params = {
        "records": n,
        "partitions": cfg.partitions,
        "segments": segments,
        "rounds": cfg.rounds,
        "value_bytes": cfg.value_bytes,
    }
    variant = f"{n:,} records, {cfg.partitions} partitions, into noop"
    results = [
        Result(
            SCAN,
            variant,
            "throughput",
            rate(n, med[FULL]),
            "records/s",
            {PARQUET: rate(n, med[PARQUET]), DATA_SOURCE: rate(n, med[DATA_SOURCE])},
            params=params,
        ),
        Result(
            SCAN,
            variant,
            "throughput",
            rate(n, med[FULL]) * mb,
            "MB/s",
            {PARQUET: rate(n, med[PARQUET]) * mb, DATA_SOURCE: rate(n, med[DATA_SOURCE]) * mb},
            params=params,
        ),
        Result(
            SQL_SCAN,
            f"SELECT * FROM a snapshot view, {variant}",
            "throughput",
            rate(n, med[SQL]),
            "records/s",
            {PARQUET: rate(n, med[PARQUET])},
            params=params,
        ),
        Result(
            SELECTIVE,
            f"partition 0, {width:,} offsets of {first_end:,}",
            "duration",
            med["selective"] * 1000,
            "ms",
            {
                FULL: med[FULL] * 1000,
                PARQUET: med["selective parquet"] * 1000,
                DATA_SOURCE: med["selective data source"] * 1000,
            },
            higher_is_better=False,
            params={**params, "selected": width, "files_listed": listed},
        ),
    ]
    return results


def bench_stream(
    spark: SparkSession, root: Path, workdir: Path, cfg: ConnectorBenchConfig, scan_rate: float
) -> Result:
    """Median of ``rounds`` runs, each a fresh query (new checkpoint) from the earliest offset."""
    seconds, batches = [], 0
    for _ in range(cfg.rounds):
        with scratch_dir(workdir, "stream-checkpoint") as checkpoint:
            query = (
                spark.readStream.format("lakelog")
                .option("root", str(root))
                .option("subscribe", TOPIC)
                .option("startingOffsets", "earliest")
                .load()
                .writeStream.format("noop")
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
            )
            with Stopwatch() as sw:
                running = query.start()
                running.awaitTermination()
            rows = sum(p["numInputRows"] for p in running.recentProgress)
            batches = len(running.recentProgress)
        if rows != cfg.records:
            raise RuntimeError(f"the stream read {rows} records, expected {cfg.records}")
        seconds.append(sw.seconds)
    return Result(
        STREAM,
        "from earliest, Trigger.AvailableNow, into noop",
        "throughput",
        rate(cfg.records, median(seconds)),
        "records/s",
        {BATCH: scan_rate},
        params={"records": cfg.records, "rounds": cfg.rounds, "batches": batches},
    )


class _Seen:
    """What ``foreachBatch`` saw: (wall time, highest offset of partition 0) per batch."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: list[tuple[float, int]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        top = df.where(F.col("partition") == 0).agg(F.max("offset")).collect()[0][0]
        with self.lock:
            self.batches.append((time.time(), -1 if top is None else int(top)))

    def first_at_or_after(self, offset: int) -> float | None:
        with self.lock:
            return next((t for t, top in self.batches if top >= offset), None)


def _trigger_ms(progress: Sequence[Mapping[str, Any]]) -> list[float]:
    """Durations of the triggers that carried data, the query's first (start-up) one left out."""
    return [
        float(p["durationMs"]["triggerExecution"])
        for p in progress
        if p.get("numInputRows", 0) > 0 and int(p.get("batchId", 0)) > 0
    ]


def _percentile_or_nan(values: Sequence[float], q: float) -> float:
    return percentile(values, q) if values else math.nan


class _RateSeen:
    """What ``foreachBatch`` saw of the rate source: per batch, when, and which seconds.

    The rate source counts whole seconds since its query started and releases
    a second's rows once it has ended; the rows of second ``k`` are values
    ``k * rows_per_second`` onwards, stamped from the second's start. A batch
    therefore carries whole seconds, and the smallest stamp of a batch is the
    start of its first second.
    """

    def __init__(self, rows_per_second: int) -> None:
        self.rows_per_second = rows_per_second
        self.lock = threading.Lock()
        #: (seen at, start of the batch's first second, seconds carried), times in epoch s
        self.batches: list[tuple[float, float, int]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        low, high, first_ms = df.agg(
            F.min("value"), F.max("value"), F.unix_millis(F.min("timestamp"))
        ).collect()[0]
        seen = time.time()
        if low is None:
            return
        seconds = int(high) // self.rows_per_second - int(low) // self.rows_per_second + 1
        with self.lock:
            self.batches.append((seen, int(first_ms) / 1000, seconds))

    def latencies_ms(self, since: float) -> list[float]:
        """ms from each second's release to its rows being seen, for seconds released since."""
        with self.lock:
            released = [
                (start + k + 1, seen)
                for seen, start, seconds in self.batches
                for k in range(seconds)
                if start + k + 1 >= since
            ]
        return [(seen - at) * 1000 for at, seen in sorted(released)]


def bench_latency(
    spark: SparkSession,
    root: Path,
    workdir: Path,
    log: lakelog.TopicLog,
    cfg: ConnectorBenchConfig,
    progress: Progress,
) -> list[Result]:
    seen = _Seen()
    rng = np.random.default_rng(cfg.seed + 1)
    with scratch_dir(workdir, "latency-checkpoint") as checkpoint:
        query = (
            spark.readStream.format("lakelog")
            .option("root", str(root))
            .option("subscribe", TOPIC)
            .load()  # from the latest offset: caught up from the start
            .writeStream.foreachBatch(seen)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        try:
            deadline = time.monotonic() + 120
            while not query.recentProgress and time.monotonic() < deadline:
                time.sleep(0.1)  # the first (empty) trigger has run: the query is caught up
            appended: list[tuple[float, int]] = []
            for i in range(cfg.latency_appends):
                progress(f"latency: append {i + 1} of {cfg.latency_appends}")
                result = log.append(
                    pa.table(
                        {
                            "partition": pa.array([0] * cfg.latency_records, pa.int32()),
                            "value": random_binary(cfg.latency_records, cfg.value_bytes, rng),
                        }
                    )
                )
                appended.append((time.time(), max(result.offsets)))
                time.sleep(cfg.append_interval_s)
            last = appended[-1][1]
            deadline = time.monotonic() + 120
            while seen.first_at_or_after(last) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            triggers = _trigger_ms(query.recentProgress)
        finally:
            query.stop()
    e2e = []
    for at, offset in appended:
        got = seen.first_at_or_after(offset)
        if got is None:
            raise RuntimeError(f"the stream never delivered offset {offset}")
        e2e.append((got - at) * 1000)
    progress("latency: Spark's rate source")
    rate_e2e, rate_triggers, rate_rows = _rate_latency(spark, workdir, cfg)
    params = {
        "appends": cfg.latency_appends,
        "records_per_append": cfg.latency_records,
        "interval_s": cfg.append_interval_s,
        "triggers_with_data": len(triggers),
        "rate_rows_per_second": rate_rows,
        "rate_seconds": len(rate_e2e),
        "rate_triggers_with_data": len(rate_triggers),
    }
    variant = f"{cfg.latency_records} records every {cfg.append_interval_s:g} s"
    return [
        Result(
            LATENCY,
            variant,
            f"{name} p{q}",
            _percentile_or_nan(ours, q),
            "ms",
            {RATE: _percentile_or_nan(theirs, q)},
            False,
            params,
        )
        for name, q, ours, theirs in (
            ("e2e", 50, e2e, rate_e2e),
            ("e2e", 99, e2e, rate_e2e),
            ("trigger", 50, triggers, rate_triggers),
        )
    ]


def _rate_latency(
    spark: SparkSession, workdir: Path, cfg: ConnectorBenchConfig
) -> tuple[list[float], list[float], int]:
    """Spark's rate source through ``foreachBatch``: e2e ms per second, trigger ms, rows/s.

    The same records/s as the appends; measured like the lakelog query: from
    the moment its first trigger has run (caught up), for as many seconds of
    rows as there are appends.
    """
    rows = max(1, round(cfg.latency_records / cfg.append_interval_s))
    seen = _RateSeen(rows)
    with scratch_dir(workdir, "rate-checkpoint") as checkpoint:
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", rows)
            .load()
            .writeStream.foreachBatch(seen)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        try:
            deadline = time.monotonic() + 120
            while not query.recentProgress and time.monotonic() < deadline:
                time.sleep(0.1)  # the first trigger has run: the query is caught up
            caught_up = time.time()
            deadline = time.monotonic() + 120 + cfg.latency_appends
            while (
                len(seen.latencies_ms(caught_up)) < cfg.latency_appends
                and time.monotonic() < deadline
            ):
                time.sleep(0.05)
            triggers = _trigger_ms(query.recentProgress)
        finally:
            query.stop()
    return seen.latencies_ms(caught_up)[: cfg.latency_appends], triggers, rows


# -- the suite ---------------------------------------------------------------


def _notes(report: Report, load: tuple[float, float]) -> list[str]:
    notes = []
    for r in report.results:
        if r.benchmark in (SCAN, SQL_SCAN) and r.unit == "records/s":
            ratio = r.ratio(PARQUET)
            verdict = "meets" if ratio is not None and ratio >= SCAN_GOAL else "BELOW"
            shown = "-" if ratio is None else f"{ratio:.2f}x"
            what = "full scan native" if r.benchmark == SCAN else "Spark SQL view"
            notes.append(f"{what}/spark.read.parquet = {shown} ({verdict} goal >= {SCAN_GOAL})")
        if r.benchmark == SELECTIVE:
            full = r.baselines.get(FULL)
            if full:
                notes.append(
                    f"selective read takes {r.value / full:.1%} of a full scan's time and "
                    f"lists {r.params.get('files_listed')} of {r.params.get('segments')} "
                    "segment files"
                )
        if r.benchmark == LATENCY and r.metric == "e2e p99":
            ratio = r.ratio(RATE)
            verdict = "meets" if ratio is not None and ratio <= STREAM_GOAL else "ABOVE"
            shown = "-" if ratio is None else f"{ratio:.2f}x"
            notes.append(
                f"caught-up stream e2e p99 / rate source = {shown} "
                f"({verdict} goal <= {STREAM_GOAL})"
            )
    notes.append(
        f"'{PARQUET}' = Spark's own Parquet reader over the same files (delta-rs file list, "
        "partition from the path); both into the noop sink, so every column is materialised. "
        f"'{RATE}' = Spark's rate source at the same records/s through foreachBatch, the "
        "engine's floor: its e2e runs from the end of the second whose rows it releases to "
        "foreachBatch seeing them (one sample per second, as many as appends), its trigger "
        "p50 over its data-carrying triggers; each percentile is compared with the same "
        "percentile of the rate source. MB/s counts value bytes (1 MB = 10^6 B)."
    )
    notes.append(load_note(*load))
    return notes


def run_config(
    cfg: ConnectorBenchConfig,
    workdir: Path,
    progress: Progress,
    spark: SparkSession | None = None,
) -> Report:
    report = Report(NAME)
    start = time.perf_counter()
    load_before = os.getloadavg()[0]
    session = spark or spark_session()
    spark_connector.register(session)
    with scratch_dir(workdir, "connector-root") as root:
        progress(f"writing {cfg.records:,} records")
        log = fill_topic(root, cfg, progress)
        try:
            report.results += bench_scans(session, root, log, cfg, progress)
            scan_rate = report.results[0].value
            progress("stream throughput")
            report.results.append(bench_stream(session, root, workdir, cfg, scan_rate))
            report.results += bench_latency(session, root, workdir, log, cfg, progress)
        finally:
            log.close()
    report.notes = _notes(report, (load_before, os.getloadavg()[0]))
    report.seconds = time.perf_counter() - start
    return report


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``connector`` suite at a named size (tiny, small, large)."""
    return run_config(config_for(CONFIGS, size), workdir, progress)
