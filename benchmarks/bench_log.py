"""The partitioned log itself: append throughput, commit latency, read throughput, open cost.

Every lakelog figure is measured next to its baselines, in the same run, on
the same (local, temporary) disk:

* append: ``TopicLog.append`` of Arrow batches of 100-byte random values vs
  three ceilings and the naive way. ``raw parquet``: plain ``pq.write_table``
  of the input table (2 columns), one file per batch, no fsync.
  ``raw parquet+fsync``: the same plus fsync of file and directory.
  ``raw segment+fsync`` (the like-for-like ceiling the goal is judged
  against): the very rows lakelog stores (8 segment columns, offsets and
  timestamps filled) written with lakelog's own Parquet options
  (``encode_segment``: compression, dictionary, statistics, row groups), one
  file per partition per batch, each fsynced with its directory, i.e. as
  durable as a lakelog segment but with no commit, no validation and no
  offset assignment; a batch's files are written in parallel on as many
  threads as ``TopicLog`` uses for an append's segments. ``naive delta-rs``: one
  ``deltalake.write_deltalake(path, batch, mode="append")`` per batch into a
  fresh Delta table.
* commit latency: p50/p99 of single small appends after growing commit
  counts on one topic, vs ``write_deltalake`` of the same rows onto a copy of
  that topic's Delta log (same history, same checkpoints) and vs the bare
  Parquet write of those rows.
* read: a partition from offset 0 to its end in chunks, vs
  ``pq.read_table`` of the same segment files.
* open: ``lakelog.connect(root).topic(name)`` with fresh objects vs
  ``deltalake.DeltaTable`` on the same table, at the same commit counts.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

import lakelog
from benchmarks.common import (
    Progress,
    Report,
    Result,
    Stopwatch,
    config_for,
    fsync_path,
    median,
    percentile,
    random_binary,
    rate,
    sample,
    scratch_dir,
)
from lakelog.records import SEGMENT_SCHEMA
from lakelog.segments import encode_segment
from lakelog.storage import join
from lakelog.topic_log import SEGMENT_IO_THREADS

NAME = "log"
DESCRIPTION = "TopicLog append / commit latency / read / open vs raw Parquet and naive delta-rs"

APPEND = "append throughput"
COMMIT = "commit latency"
READ = "read throughput"
OPEN = "open cost"

LAKELOG = "lakelog"
RAW = "raw parquet"
RAW_FSYNC = "raw parquet+fsync"
SEGMENT_FSYNC = "raw segment+fsync"
NAIVE = "naive delta-rs"
DELTA_OPEN = "delta-rs open"

TOPIC = "bench"
READ_MAX_BYTES = 2**40  # never the limit: chunks are bounded by max_records


@dataclass(frozen=True)
class LogBenchConfig:
    """How much of each benchmark to run; ``CONFIGS`` holds the named sizes."""

    value_bytes: int = 100
    #: (records per batch, timed batches per round)
    append_plan: tuple[tuple[int, int], ...] = ((1_000, 60), (10_000, 20))
    #: partition layouts: 1 = every record in partition 0, n = round-robin over n
    append_partitions: tuple[int, ...] = (1, 4)
    rounds: int = 5
    #: commit counts after which latency and open cost are measured
    commit_stages: tuple[int, ...] = (10, 300, 1_000)
    commit_records: int = 10
    commit_samples: int = 100
    naive_commit_samples: int = 40
    open_repeats: int = 10
    #: (records per segment, segments) of the partition that is read back
    read_plan: tuple[tuple[int, int], ...] = ((10_000, 20), (1_000, 50))
    read_chunk: int = 10_000
    read_rounds: int = 3
    checkpoint_interval: int = 100
    seed: int = 0


CONFIGS: dict[str, LogBenchConfig] = {
    "tiny": LogBenchConfig(
        append_plan=((100, 3),),
        append_partitions=(1, 4),
        rounds=1,
        commit_stages=(3, 12),
        commit_samples=5,
        naive_commit_samples=3,
        open_repeats=2,
        read_plan=((100, 3),),
        read_chunk=120,
        read_rounds=1,
        checkpoint_interval=10,
    ),
    "small": LogBenchConfig(),
    "large": LogBenchConfig(
        append_plan=((1_000, 200), (10_000, 60)),
        commit_stages=(10, 1_000, 10_000),
        commit_samples=300,
        naive_commit_samples=60,
        open_repeats=20,
        read_plan=((10_000, 100), (1_000, 200)),
    ),
}


# -- data --------------------------------------------------------------------


def produce_batch(
    records: int, partitions: int, value_bytes: int, rng: np.random.Generator
) -> pa.Table:
    """Produce input with an explicit ``partition`` column (round-robin) and random values."""
    partition = (np.arange(records) % partitions).astype(np.int32)
    return pa.table(
        {
            "partition": pa.array(partition, pa.int32()),
            "value": random_binary(records, value_bytes, rng),
        }
    )


def with_partitions(batch: pa.Table, partitions: int) -> pa.Table:
    """The same values spread round-robin over ``partitions`` partitions."""
    column = pa.array((np.arange(batch.num_rows) % partitions).astype(np.int32), pa.int32())
    return batch.set_column(batch.schema.get_field_index("partition"), "partition", column)


def stored_rows(batch: pa.Table, base_offset: int) -> pa.Table:
    """``batch`` as rows of the topic's Delta schema (what a naive writer has to build)."""
    n = batch.num_rows
    now_ms = int(time.time() * 1000)
    columns: dict[str, pa.Array] = {
        "offset": pa.array(np.arange(base_offset, base_offset + n, dtype=np.int64)),
        "timestamp": pa.array(np.full(n, now_ms, dtype=np.int64)).cast(
            SEGMENT_SCHEMA.field("timestamp").type
        ),
        "timestamp_type": pa.array(np.zeros(n, dtype=np.int32)),
        "value": batch.column("value").combine_chunks(),
    }
    rows = pa.table(
        {
            f.name: columns[f.name] if f.name in columns else pa.nulls(n, f.type)
            for f in SEGMENT_SCHEMA
        },
        schema=SEGMENT_SCHEMA,
    )
    return rows.append_column("partition", batch.column("partition"))


def _open_topic(root: Path, cfg: LogBenchConfig, partitions: int) -> lakelog.TopicLog:
    catalog = lakelog.connect(str(root), checkpoint_interval=cfg.checkpoint_interval)
    catalog.create_topic(TOPIC, partitions)
    return catalog.topic(TOPIC)


def _rotated(items: Sequence[str], shift: int) -> list[str]:
    """``items`` rotated by ``shift``: each round runs the contenders in another order."""
    k = shift % len(items)
    return [*items[k:], *items[:k]]


# -- append throughput -------------------------------------------------------


def _append_lakelog(
    batches: Sequence[pa.Table], root: Path, cfg: LogBenchConfig, partitions: int
) -> float:
    log = _open_topic(root, cfg, partitions)
    try:
        log.append(batches[0])  # warm-up (thread pools, first commit), not timed
        log.wait_for_checkpoints()
        with Stopwatch() as sw:
            for batch in batches:
                log.append(batch)
            log.wait_for_checkpoints()  # checkpoints are part of the sustained cost
    finally:
        log.close()
    return sw.seconds


def _append_raw(batches: Sequence[pa.Table], root: Path, durable: bool) -> float:
    pq.write_table(batches[0], root / "warmup.parquet")
    with Stopwatch() as sw:
        for i, batch in enumerate(batches):
            path = root / f"{i:06d}.parquet"
            pq.write_table(batch, path)
            if durable:
                fsync_path(path)
                fsync_path(root)
    return sw.seconds


def segment_files(batch: pa.Table, base_offset: int) -> list[tuple[int, pa.Table]]:
    """``batch`` as lakelog stores it: per partition, the 8 segment columns with offsets."""
    rows = stored_rows(batch, base_offset)
    partition = rows.column("partition").to_numpy()
    segments = rows.drop_columns(["partition"])
    return [
        (int(p), segments.filter(pa.array(partition == p))) for p in np.unique(partition).tolist()
    ]


def _write_segment_durably(rows: pa.Table, path: Path) -> None:
    """One segment file as durable as lakelog makes it: fsync of the file, then its directory."""
    encode_segment(rows, str(path))
    fsync_path(path)
    fsync_path(path.parent)


def _append_segments(batches: Sequence[pa.Table], root: Path) -> float:
    """The like-for-like ceiling: lakelog's segment rows and Parquet options, durably written.

    A batch's files are written the way ``TopicLog`` writes an append's
    segments: one partition in the calling thread, several in parallel on a
    pool of ``SEGMENT_IO_THREADS``; the next batch starts once all are durable.
    """
    files, offset = [], 0
    for batch in batches:  # building the rows is lakelog's work, not the ceiling's: untimed
        files.append(segment_files(batch, offset))
        offset += batch.num_rows
    dirs = {p: root / f"partition={p}" for per_batch in files for p, _ in per_batch}
    for d in dirs.values():
        d.mkdir()
    with ThreadPoolExecutor(SEGMENT_IO_THREADS, thread_name_prefix="ceiling") as pool:

        def write_batch(per_batch: list[tuple[int, pa.Table]], name: str) -> None:
            if len(per_batch) == 1:
                ((p, rows),) = per_batch
                _write_segment_durably(rows, dirs[p] / name)
                return
            running = [
                pool.submit(_write_segment_durably, rows, dirs[p] / name) for p, rows in per_batch
            ]
            for future in running:
                future.result()

        write_batch(files[0], "warmup.parquet")  # warm-up (pool threads started), not timed
        with Stopwatch() as sw:
            for i, per_batch in enumerate(files):
                write_batch(per_batch, f"{i:06d}.parquet")
    return sw.seconds


def _append_naive(batches: Sequence[pa.Table], root: Path) -> float:
    uri = str(root / "table")
    write_deltalake(uri, batches[0], mode="append", partition_by=["partition"])  # creates it
    with Stopwatch() as sw:
        for batch in batches:
            write_deltalake(uri, batch, mode="append", partition_by=["partition"])
    return sw.seconds


def bench_append(cfg: LogBenchConfig, workdir: Path, progress: Progress) -> list[Result]:
    """records/s and MB/s (value bytes, 10^6) per batch size and partition layout."""
    rng = np.random.default_rng(cfg.seed)
    results = []
    for batch_records, count in cfg.append_plan:
        base = [produce_batch(batch_records, 1, cfg.value_bytes, rng) for _ in range(count)]
        for partitions in cfg.append_partitions:
            batches = [with_partitions(b, partitions) for b in base]
            contenders: dict[str, Callable[[Sequence[pa.Table], Path], float]] = {
                LAKELOG: partial(_append_lakelog, cfg=cfg, partitions=partitions),
                RAW: lambda b, root: _append_raw(b, root, durable=False),
                RAW_FSYNC: lambda b, root: _append_raw(b, root, durable=True),
                SEGMENT_FSYNC: _append_segments,
                NAIVE: _append_naive,
            }
            records = batch_records * count
            seconds: dict[str, list[float]] = {name: [] for name in contenders}
            for round_no in range(cfg.rounds):
                for name in _rotated(list(contenders), round_no):
                    progress(
                        f"append {batch_records:,} x {count} ({partitions}p) {name} "
                        f"round {round_no + 1}/{cfg.rounds}"
                    )
                    with scratch_dir(workdir, "append") as root:
                        seconds[name].append(contenders[name](batches, root))
            per_s = {name: rate(records, median(s)) for name, s in seconds.items()}
            variant = f"batch {batch_records:,}, {partitions} partition" + (
                "s" if partitions > 1 else ""
            )
            params = {
                "batch_records": batch_records,
                "batches": count,
                "partitions": partitions,
                "rounds": cfg.rounds,
                "value_bytes": cfg.value_bytes,
            }
            baselines = [n for n in contenders if n != LAKELOG]
            results.append(
                Result(
                    APPEND,
                    variant,
                    "throughput",
                    per_s[LAKELOG],
                    "records/s",
                    {n: per_s[n] for n in baselines},
                    params=params,
                )
            )
            mb = cfg.value_bytes / 1e6
            results.append(
                Result(
                    APPEND,
                    variant,
                    "throughput",
                    per_s[LAKELOG] * mb,
                    "MB/s",
                    {n: per_s[n] * mb for n in baselines},
                    params=params,
                )
            )
    return results


# -- commit latency and open cost ---------------------------------------------


def _ms(seconds: Sequence[float]) -> list[float]:
    return [s * 1000 for s in seconds]


def _floor_latencies(
    batch: pa.Table, workdir: Path, samples: int
) -> tuple[list[float], list[float]]:
    """ms of bare Parquet writes of the commit batch: without and with the fsyncs."""
    with scratch_dir(workdir, "floor") as root:
        counter = iter(range(10**9))

        def write(durable: bool) -> None:
            path = root / f"{next(counter):08d}.parquet"
            pq.write_table(batch, path)
            if durable:
                fsync_path(path)
                fsync_path(root)

        write(True)  # warm-up
        plain = _ms(sample(lambda: write(False), samples))
        durable = _ms(sample(lambda: write(True), samples))
    return plain, durable


def bench_commits(cfg: LogBenchConfig, workdir: Path, progress: Progress) -> list[Result]:
    """Commit latency p50/p99 and open cost of one topic after each commit-count stage."""
    rng = np.random.default_rng(cfg.seed + 1)
    batch = produce_batch(cfg.commit_records, 1, cfg.value_bytes, rng)
    floor_plain, floor_durable = _floor_latencies(batch, workdir, cfg.commit_samples)
    root = workdir / "commits"
    log = _open_topic(root, cfg, 1)
    table_dir = Path(log.storage.arrow_path(log.table_path))
    table_uri = log.storage.delta_uri(log.table_path)
    results = []
    try:
        for stage in cfg.commit_stages:
            progress(f"commit latency: filling to {stage:,} commits (now {log.version:,})")
            while log.version < stage:
                log.append(batch)
            log.wait_for_checkpoints()
            version = log.version
            variant = f"after {version:,} commits"
            with scratch_dir(workdir, "naive-copy") as copy:
                # The naive writer gets the very same history: a copy of this Delta log.
                shutil.copytree(table_dir / "_delta_log", copy / "_delta_log")
                naive_rows = stored_rows(batch, version * cfg.commit_records)
                progress(f"commit latency {variant}: {cfg.commit_samples} lakelog appends")
                lake = _ms(sample(lambda: log.append(batch), cfg.commit_samples))
                progress(f"commit latency {variant}: {cfg.naive_commit_samples} naive appends")
                naive = _ms(
                    sample(
                        partial(write_deltalake, str(copy), naive_rows, mode="append"),
                        cfg.naive_commit_samples,
                    )
                )
            params = {
                "commits": version,
                "records_per_commit": cfg.commit_records,
                "samples": cfg.commit_samples,
                "naive_samples": cfg.naive_commit_samples,
                "checkpoint_interval": cfg.checkpoint_interval,
            }
            for q in (50, 99):
                results.append(
                    Result(
                        COMMIT,
                        variant,
                        f"p{q}",
                        percentile(lake, q),
                        "ms",
                        {
                            NAIVE: percentile(naive, q),
                            RAW: percentile(floor_plain, q),
                            RAW_FSYNC: percentile(floor_durable, q),
                        },
                        higher_is_better=False,
                        params=params,
                    )
                )
            # Open half-way between checkpoints: the typical replay, not the best case.
            interval = cfg.checkpoint_interval
            if interval > 0:
                while log.version % interval != interval // 2:
                    log.append(batch)
            log.wait_for_checkpoints()
            opened_at = log.version
            since = opened_at % interval if interval > 0 else opened_at
            progress(f"open cost at version {opened_at:,}")

            def open_fresh() -> None:
                catalog = lakelog.connect(str(root), checkpoint_interval=cfg.checkpoint_interval)
                catalog.topic(TOPIC)
                catalog.close()

            open_fresh()  # warm-up
            lake_open = _ms(sample(open_fresh, cfg.open_repeats))
            delta_open = _ms(sample(lambda: DeltaTable(table_uri), cfg.open_repeats))
            results.append(
                Result(
                    OPEN,
                    f"after {opened_at:,} commits ({since} since checkpoint)",
                    "median",
                    median(lake_open),
                    "ms",
                    {DELTA_OPEN: median(delta_open)},
                    higher_is_better=False,
                    params={
                        "commits": opened_at,
                        "commits_since_checkpoint": since,
                        "repeats": cfg.open_repeats,
                    },
                )
            )
    finally:
        log.close()
    return results


# -- read throughput ---------------------------------------------------------


def _read_lakelog(log: lakelog.TopicLog, end: int, chunk: int) -> int:
    offset = rows = 0
    while offset < end:
        fetched = log.read(0, offset, max_records=chunk, max_bytes=READ_MAX_BYTES)
        if fetched.next_offset <= offset:
            raise RuntimeError(f"read made no progress at offset {offset}")
        rows += fetched.records.num_rows
        offset = fetched.next_offset
    return rows


def _read_raw(paths: Sequence[str]) -> int:
    return sum(pq.read_table(p).num_rows for p in paths)


def bench_read(cfg: LogBenchConfig, workdir: Path, progress: Progress) -> list[Result]:
    """records/s reading partition 0 from offset 0 to its end, per segment size."""
    rng = np.random.default_rng(cfg.seed + 2)
    results = []
    for segment_records, segments in cfg.read_plan:
        with scratch_dir(workdir, "read") as root:
            log = _open_topic(root, cfg, 1)
            try:
                progress(f"read: writing {segments} segments of {segment_records:,} records")
                for _ in range(segments):
                    log.append(produce_batch(segment_records, 1, cfg.value_bytes, rng))
                log.wait_for_checkpoints()
                end = log.high_watermark(0)
                paths = [
                    log.storage.arrow_path(join(log.table_path, s.path)) for s in log.segments(0)
                ]
                contenders: dict[str, Callable[[], int]] = {
                    LAKELOG: partial(_read_lakelog, log, end, cfg.read_chunk),
                    RAW: partial(_read_raw, paths),
                }
                seconds: dict[str, list[float]] = {name: [] for name in contenders}
                for name, read in contenders.items():  # warm-up, and a check of the count
                    if (got := read()) != end:
                        raise RuntimeError(f"{name} read {got} records, expected {end}")
                for round_no in range(cfg.read_rounds):
                    progress(f"read {segment_records:,}-record segments round {round_no + 1}")
                    for name in _rotated(list(contenders), round_no):
                        with Stopwatch() as sw:
                            contenders[name]()
                        seconds[name].append(sw.seconds)
            finally:
                log.close()
        per_s = {name: rate(end, median(s)) for name, s in seconds.items()}
        results.append(
            Result(
                READ,
                f"{segments} segments of {segment_records:,}, chunks of {cfg.read_chunk:,}",
                "throughput",
                per_s[LAKELOG],
                "records/s",
                {RAW: per_s[RAW]},
                params={
                    "records": end,
                    "segment_records": segment_records,
                    "segments": segments,
                    "chunk": cfg.read_chunk,
                    "rounds": cfg.read_rounds,
                    "value_bytes": cfg.value_bytes,
                },
            )
        )
    return results


# -- the suite ---------------------------------------------------------------


def _notes(report: Report, cfg: LogBenchConfig) -> list[str]:
    notes = []
    for r in report.results:
        if r.benchmark == APPEND and r.unit == "records/s":
            fair, raw, naive = r.ratio(SEGMENT_FSYNC), r.ratio(RAW), r.ratio(NAIVE)
            line = f"append {r.variant}: lakelog/{SEGMENT_FSYNC} = {_x(fair)}"
            if r.params.get("batch_records") == 10_000:
                verdict = "meets" if fair is not None and fair >= 0.6 else "BELOW"
                line += f" ({verdict} goal >= 0.6 of the like-for-like ceiling)"
            notes.append(
                f"{line}; lakelog/{RAW} = {_x(raw)}; lakelog/{RAW_FSYNC} = "
                f"{_x(r.ratio(RAW_FSYNC))}; lakelog/{NAIVE} = {_x(naive)}"
            )
    for benchmark, metrics in ((COMMIT, ("p50", "p99")), (OPEN, ("median",))):
        for metric in metrics:
            series = [r for r in report.results if r.benchmark == benchmark and r.metric == metric]
            if len(series) >= 2:
                first, last = series[0], series[-1]
                notes.append(
                    f"{benchmark} {metric}: {_num(first.value)} ms {first.variant} -> "
                    f"{_num(last.value)} ms {last.variant} ({_x(last.value / first.value)})"
                )
    notes.append(
        f"MB/s counts value bytes ({cfg.value_bytes} B/record, 1 MB = 10^6 B). "
        f"'{RAW}' = pq.write_table/read_table of the same Arrow data (append: the 2 input "
        f"columns), one file per batch, no fsync; '{RAW_FSYNC}' adds fsync of file and "
        f"directory; '{SEGMENT_FSYNC}' (append only, the like-for-like ceiling) writes the "
        "8-column rows lakelog stores with lakelog's Parquet options, one file per partition "
        f"per batch (several partitions in parallel on {SEGMENT_IO_THREADS} threads, as lakelog "
        "writes them), each fsynced with its directory, with no commit; lakelog "
        f"also fsyncs a Delta commit per append (4 fsyncs in all for 1 partition); '{NAIVE}' "
        "= write_deltalake per batch (commit latency: onto a copy of the topic's Delta log)."
    )
    return notes


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _num(value: float) -> str:
    return f"{value:.2f}"


def run_config(cfg: LogBenchConfig, workdir: Path, progress: Progress) -> Report:
    report = Report(NAME)
    start = time.perf_counter()
    report.results += bench_append(cfg, workdir, progress)
    report.results += bench_commits(cfg, workdir, progress)
    report.results += bench_read(cfg, workdir, progress)
    report.notes = _notes(report, cfg)
    report.seconds = time.perf_counter() - start
    return report


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``log`` suite at a named size (tiny, small, large)."""
    return run_config(config_for(CONFIGS, size), workdir, progress)
