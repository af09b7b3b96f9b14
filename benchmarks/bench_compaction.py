"""Key-based compaction on local Spark, and how its time grows with the log.

For each size, a compacted topic of N records over K distinct keys (100-byte
random values, keys drawn uniformly, round-robin over the partitions) is
written with bulk appends into a temporary local root, then compacted by the
real job (``compaction.compact.compact_topic``, forced, on the given
SparkSession, ``local[2]`` by default). Baselines, in the same run, on the
same SparkSession and the very segment files the job rewrites:

* ``spark parquet read+write`` (the ceiling): ``spark.read.parquet`` of those
  files written straight back with ``write.parquet``, no shuffle: the rate at
  which this machine's engine can move the data at all.
* ``naive spark sql``: a full rewrite the obvious way, ``row_number()`` over
  a window per (partition, key) ordered by offset descending, keep row 1,
  ``write.parquet``; no offset ranges kept, nothing committed.

Each round starts from a fresh copy of the filled root (the job rewrites the
topic), copied untimed. ``records/s`` counts the records the job read
(``records_in``), which is the data every contender processes.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

import lakelog
from benchmarks.common import (
    Progress,
    Report,
    Result,
    Stopwatch,
    config_for,
    load_note,
    median,
    random_binary,
    rate,
    scratch_dir,
)
from compaction.compact import compact_topic
from compaction.spark_session import spark_session
from lakelog.storage import join

NAME = "compaction"
DESCRIPTION = "compaction job vs Spark Parquet read+write and a naive Spark SQL rewrite"

COMPACT = "compaction throughput"
GROWTH = "compaction time"

LAKELOG = "lakelog"
CEILING = "spark parquet read+write"
NAIVE = "naive spark sql"

TOPIC = "bench"


@dataclass(frozen=True)
class CompactionBenchConfig:
    """How much to run; ``CONFIGS`` holds the named sizes."""

    #: records in the topic, one measurement per entry (the growth series)
    sizes: tuple[int, ...]
    keys: int
    #: further key counts, each measured at the largest size only
    more_keys: tuple[int, ...] = ()
    partitions: int = 2
    value_bytes: int = 100
    append_records: int = 250_000
    rounds: int = 1
    #: one untimed run of each contender on the first size (JVM JIT, Python workers)
    warmup: bool = True
    seed: int = 0


CONFIGS: dict[str, CompactionBenchConfig] = {
    "tiny": CompactionBenchConfig(
        sizes=(2_000, 6_000), keys=500, append_records=2_000, warmup=False
    ),
    "small": CompactionBenchConfig(sizes=(100_000, 300_000), keys=10_000, rounds=2),
    "large": CompactionBenchConfig(
        sizes=(1_000_000, 3_000_000, 10_000_000),
        keys=100_000,
        more_keys=(1_000_000,),
        append_records=500_000,
    ),
}


# -- data --------------------------------------------------------------------


def fill_topic(
    root: Path,
    cfg: CompactionBenchConfig,
    records: int,
    progress: Progress,
    keys: int | None = None,
) -> None:
    """A compacted topic of ``records`` keyed records, then one tiny newest segment per partition.

    The planner never cleans a partition's newest segment (Kafka's active
    segment), so a last small append per partition leaves all ``records``
    cleanable.
    """
    catalog = lakelog.connect(str(root))
    catalog.create_topic(TOPIC, cfg.partitions, {"cleanup.policy": "compact"})
    log = catalog.topic(TOPIC)
    keys = keys or cfg.keys
    rng = np.random.default_rng(cfg.seed + records + keys)
    try:
        written = 0
        while written < records:
            n = min(cfg.append_records, records - written)
            log.append(_batch(written, n, cfg, rng, keys))
            written += n
            progress(f"{records:,} records: wrote {written:,}")
        for p in range(cfg.partitions):
            log.append(
                pa.table(
                    {
                        "partition": pa.array([p], pa.int32()),
                        "key": pa.array([b"head"], pa.binary()),
                        "value": pa.array([b"x"], pa.binary()),
                    }
                )
            )
        log.wait_for_checkpoints()
    finally:
        catalog.close()  # closes the topic's log too


def _batch(
    start: int, n: int, cfg: CompactionBenchConfig, rng: np.random.Generator, keys: int
) -> pa.Table:
    key_ids = pa.array(rng.integers(0, keys, n)).cast(pa.string())
    keys = pc.binary_join_element_wise("key-", key_ids, "").cast(pa.binary())
    partition = (np.arange(start, start + n) % cfg.partitions).astype(np.int32)
    return pa.table(
        {
            "partition": pa.array(partition, pa.int32()),
            "key": keys,
            "value": random_binary(n, cfg.value_bytes, rng),
        }
    )


def input_files(root: Path) -> list[str]:
    """Paths of every segment except each partition's newest: exactly what the job rewrites."""
    catalog = lakelog.connect(str(root))
    try:
        log = catalog.topic(TOPIC)
        paths = []
        for p in range(log.num_partitions):
            for segment in log.segments(p)[:-1]:
                paths.append(log.storage.arrow_path(join(log.table_path, segment.path)))
        return paths
    finally:
        catalog.close()


# -- contenders --------------------------------------------------------------


def run_compaction(spark: SparkSession, root: Path) -> int:
    """The real job on ``root``; returns the records it read."""
    catalog = lakelog.connect(str(root))
    try:
        report = compact_topic(catalog, TOPIC, spark, force=True)
    finally:
        catalog.close()
    if report.status == "skipped":
        raise RuntimeError(f"compaction skipped the benchmark topic: {report.message}")
    return report.records_in


def run_ceiling(spark: SparkSession, files: Sequence[str], out: Path) -> None:
    spark.read.parquet(*files).write.mode("overwrite").parquet(str(out))


def run_naive(spark: SparkSession, files: Sequence[str], out: Path) -> None:
    """Latest record per key by ``row_number``, written out; partition from the file path."""
    rows = spark.read.parquet(*files).withColumn(
        "partition", F.regexp_extract(F.input_file_name(), r"partition=(\d+)", 1).cast("int")
    )
    newest_first = Window.partitionBy("partition", "key").orderBy(F.col("offset").desc())
    (
        rows.withColumn("_rn", F.row_number().over(newest_first))
        .where(F.col("_rn") == 1)
        .drop("_rn")
        .write.mode("overwrite")
        .parquet(str(out))
    )


# -- the benchmark -----------------------------------------------------------


def bench_size(
    spark: SparkSession,
    cfg: CompactionBenchConfig,
    records: int,
    workdir: Path,
    progress: Progress,
    warmup: bool = False,
    keys: int | None = None,
) -> tuple[int, dict[str, list[float]]]:
    """Seconds per contender over the rounds, and the records each one processed."""
    with scratch_dir(workdir, "compaction-source") as source:
        fill_topic(source, cfg, records, progress, keys)
        files = input_files(source)
        processed = 0
        contenders: dict[str, Callable[[Path], object]] = {
            LAKELOG: lambda copy: run_compaction(spark, copy),
            CEILING: lambda copy: run_ceiling(spark, files, copy / "ceiling-out"),
            NAIVE: lambda copy: run_naive(spark, files, copy / "naive-out"),
        }
        seconds: dict[str, list[float]] = {name: [] for name in contenders}
        names = list(contenders)
        for round_no in range(-1 if warmup else 0, cfg.rounds):  # round -1: untimed warm-up
            shift = round_no % len(names)
            for name in names[shift:] + names[:shift]:
                which = "warm-up" if round_no < 0 else f"round {round_no + 1}/{cfg.rounds}"
                progress(f"{records:,} records: {name} {which}")
                with scratch_dir(workdir, "compaction-copy") as copy:
                    shutil.copytree(source, copy, dirs_exist_ok=True)
                    with Stopwatch() as sw:
                        got = contenders[name](copy)
                if round_no >= 0:
                    seconds[name].append(sw.seconds)
                if name == LAKELOG:
                    processed = int(got) if isinstance(got, int) else processed
    if processed != records:
        raise RuntimeError(f"compaction read {processed:,} records, expected {records:,}")
    return processed, seconds


def bench_compaction(
    spark: SparkSession, cfg: CompactionBenchConfig, workdir: Path, progress: Progress
) -> list[Result]:
    results = []
    runs = [(records, cfg.keys) for records in cfg.sizes]
    runs += [(max(cfg.sizes), keys) for keys in cfg.more_keys]
    for i, (records, keys) in enumerate(runs):
        warmup = cfg.warmup and i == 0
        processed, seconds = bench_size(spark, cfg, records, workdir, progress, warmup, keys)
        med = {name: median(s) for name, s in seconds.items()}
        params = {
            "records": processed,
            "keys": keys,
            "partitions": cfg.partitions,
            "value_bytes": cfg.value_bytes,
            "rounds": cfg.rounds,
            "seconds": med[LAKELOG],
            "records_per_s": rate(processed, med[LAKELOG]),
            "spark_master": spark.sparkContext.master,
        }
        variant = f"{processed:,} records, {keys:,} keys"
        baselines = [n for n in med if n != LAKELOG]
        results.append(
            Result(
                COMPACT,
                variant,
                "throughput",
                rate(processed, med[LAKELOG]),
                "records/s",
                {n: rate(processed, med[n]) for n in baselines},
                params=params,
            )
        )
        results.append(
            Result(
                GROWTH,
                variant,
                "median",
                med[LAKELOG],
                "s",
                {n: med[n] for n in baselines},
                higher_is_better=False,
                params=params,
            )
        )
    return results


# -- the suite ---------------------------------------------------------------


def _notes(report: Report, load: tuple[float, float]) -> list[str]:
    notes = []
    for r in report.results:
        if r.benchmark == COMPACT:
            notes.append(
                f"{r.variant}: lakelog/{CEILING} = {_x(r.ratio(CEILING))}, "
                f"lakelog/{NAIVE} = {_x(r.ratio(NAIVE))}"
            )
    times = [r for r in report.results if r.benchmark == GROWTH]
    for small, big in itertools.pairwise(times):
        if small.params["keys"] != big.params["keys"]:
            continue
        grew = int(big.params["records"] or 0) / max(1, int(small.params["records"] or 0))
        took = big.value / small.value
        notes.append(
            f"time growth {small.variant} -> {big.variant}: records x{grew:.1f}, "
            f"lakelog x{took:.2f} ({took / grew:.2f} of linear), {CEILING} "
            f"x{big.baselines[CEILING] / small.baselines[CEILING]:.2f}, {NAIVE} "
            f"x{big.baselines[NAIVE] / small.baselines[NAIVE]:.2f}"
        )
    notes.append(
        f"'{LAKELOG}' = compact_topic (forced): plan, footer checks, Spark's Parquet read of the "
        "segments, latest per key (max offset per key, broadcast semi-join), survivors encoded "
        "as segments keeping offset ranges, one Delta commit. "
        f"'{CEILING}' = spark.read.parquet of the same segment files -> write.parquet (no "
        f"shuffle). '{NAIVE}' = row_number() over (partition, key) by offset desc = 1 -> "
        "write.parquet. Same SparkSession, medians over the rounds."
    )
    notes.append(load_note(*load))
    return notes


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def run_config(
    cfg: CompactionBenchConfig,
    workdir: Path,
    progress: Progress,
    spark: SparkSession | None = None,
) -> Report:
    report = Report(NAME)
    start = time.perf_counter()
    load_before = os.getloadavg()[0]
    session = spark or spark_session()
    report.results += bench_compaction(session, cfg, workdir, progress)
    report.notes = _notes(report, (load_before, os.getloadavg()[0]))
    report.seconds = time.perf_counter() - start
    return report


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``compaction`` suite at a named size (tiny, small, large)."""
    return run_config(config_for(CONFIGS, size), workdir, progress)
