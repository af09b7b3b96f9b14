"""Key-based compaction of a topic on Spark, with Kafka's semantics.

Per partition the planner picks the cleanable tail (never the newest segment,
nothing younger than min.compaction.lag.ms) and decides from the dirty ratio
and max.compaction.lag.ms whether cleaning is due. Spark reads that tail,
keeps for every key only its record with the highest offset, drops tombstones
older than delete.retention.ms, and writes the survivors in its executors as
new segments that keep the covered offset ranges. The driver then commits
"remove the old segments, add the new ones" as one Delta transaction, which
either lands whole or not at all; a concurrent append does not conflict with
it, and the old files stay on storage until a vacuum after a grace period,
so readers holding an older snapshot keep working.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from compaction.planner import CompactionPlan, plan_compaction
from compaction.report import JobReport
from compaction.segment_tasks import (
    ROWS_DDL,
    WRITTEN_DDL,
    SegmentRef,
    read_segments,
    write_groups,
)
from lakelog.catalog import Catalog
from lakelog.delta.actions import Action, RemoveFile, Txn
from lakelog.delta.state import TableState
from lakelog.errors import ConcurrentCommitError, InvalidConfigError
from lakelog.offset_index import Segment
from lakelog.records import SEGMENT_SCHEMA
from lakelog.segments import add_action, write_segment
from lakelog.storage import Storage, join
from lakelog.topic_log import TopicLog

log = logging.getLogger(__name__)

CLEANED_TXN_PREFIX = "lakelog.cleaned."
REF_DDL = (
    "partition int, group int, group_base long, group_last long, path string, "
    "base_offset long, last_offset long"
)

Progress = Callable[[str], None]


def cleaned_txn(partition: int) -> str:
    return f"{CLEANED_TXN_PREFIX}{partition}"


def segment_reader_task(
    storage: Storage, table_path: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A mapInArrow function turning segment descriptors into their rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            refs = [SegmentRef(**row) for row in batch.to_pylist()]
            yield from read_segments(storage, table_path, refs)

    return run


def segment_writer_task(
    storage: Storage, table_path: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from write_groups(storage, table_path, batches)

    return run


def refs_for(plans: list[CompactionPlan]) -> list[SegmentRef]:
    return [
        SegmentRef(
            partition=plan.partition,
            group=g,
            group_base=group.base_offset,
            group_last=group.last_offset,
            path=s.path,
            base_offset=s.base_offset,
            last_offset=s.last_offset,
        )
        for plan in plans
        for g, group in enumerate(plan.groups)
        for s in group.segments
    ]


def read_rows(spark: SparkSession, topic_log: TopicLog, refs: list[SegmentRef]) -> DataFrame:
    """The rows of the given segments as a DataFrame, read inside Spark tasks."""
    descriptors = spark.createDataFrame([vars(r) for r in refs], REF_DDL)
    tasks = max(1, min(len(refs), spark.sparkContext.defaultParallelism * 2))
    return descriptors.repartition(tasks).mapInArrow(
        segment_reader_task(topic_log.storage, topic_log.table_path), ROWS_DDL
    )


def latest_per_key(rows: DataFrame, tombstone_cutoff_ms: int) -> DataFrame:
    """Flag each row: kept (latest for its key, not an expired tombstone) or dropped.

    Records without a key cannot be compacted (Kafka refuses them on compacted
    topics); any left from before the topic became compacted are dropped.
    """
    latest = F.max("offset").over(Window.partitionBy("partition", "key"))
    is_latest = (F.col("offset") == latest) & F.col("key").isNotNull()
    expired_tombstone = F.col("value").isNull() & (F.col("ts_ms") < F.lit(tombstone_cutoff_ms))
    return rows.withColumn("_latest", is_latest).withColumn("_keep", is_latest & ~expired_tombstone)


def compact_topic(
    catalog: Catalog,
    topic: str,
    spark: SparkSession,
    *,
    now_ms: int | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> JobReport:
    """Compact one topic; returns the report (status "skipped" if nothing was due)."""
    started = time.perf_counter()
    say = progress or (lambda _: None)
    report = JobReport("compact", topic)
    topic_log = catalog.topic(topic)
    topic_log.refresh()
    config = topic_log.config
    if not config.compacted:
        raise InvalidConfigError(
            f"topic {topic!r} has cleanup.policy={config.get('cleanup.policy')}; "
            "compaction needs a policy containing 'compact'"
        )
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    say(f"{topic}: planning")
    plans = []
    for partition in range(topic_log.num_partitions):
        cleaned = topic_log.txn_version(cleaned_txn(partition)) or 0
        plan = plan_compaction(
            partition, topic_log.segments(partition), config, now, cleaned, force
        )
        if plan is not None:
            plans.append(plan)
    if not plans:
        report.status, report.message = "skipped", "no partition is due for cleaning"
        return report.finish(started)
    inputs = [s for plan in plans for s in plan.segments]
    report.partitions = len(plans)
    report.records_in = sum(s.num_records for s in inputs)
    report.bytes_before = sum(s.size_bytes for s in inputs)
    report.segments_removed = len(inputs)

    say(f"{topic}: reading {len(inputs)} segments of {len(plans)} partitions")
    cutoff = now - int(config.get("delete.retention.ms"))
    flagged = latest_per_key(read_rows(spark, topic_log, refs_for(plans)), cutoff)
    flagged = flagged.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stats = flagged.agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(F.when(F.col("_keep"), 1).otherwise(0)).alias("kept"),
            F.sum(F.when(F.col("_latest") & ~F.col("_keep"), 1).otherwise(0)).alias(
                "tombstones_dropped"
            ),
        ).collect()[0]
        report.records_in = int(stats["rows"] or 0)
        report.tombstones_dropped = int(stats["tombstones_dropped"] or 0)
        say(f"{topic}: writing {int(stats['kept'] or 0):,} of {report.records_in:,} records")
        kept = flagged.filter(F.col("_keep")).drop("_keep", "_latest")
        tasks = max(
            1, min(sum(len(p.groups) for p in plans), spark.sparkContext.defaultParallelism * 2)
        )
        written_rows = (
            kept.repartition(tasks, "partition", "group")
            .sortWithinPartitions("partition", "group", "offset")
            .mapInArrow(segment_writer_task(topic_log.storage, topic_log.table_path), WRITTEN_DDL)
            .collect()
        )
    finally:
        flagged.unpersist()
    written = {
        (r["partition"], r["group"]): Segment(
            base_offset=r["base_offset"],
            last_offset=r["last_offset"],
            path=r["path"],
            partition=r["partition"],
            size_bytes=r["size"],
            num_records=r["num_records"],
            min_timestamp_ms=r["min_ts"],
            max_timestamp_ms=r["max_ts"],
            modification_time=now,
        )
        for r in written_rows
    }
    # A group whose every record was superseded still keeps its offset range,
    # so the log start offset does not move (Kafka keeps cleaned segments too).
    for plan in plans:
        for g, group in enumerate(plan.groups):
            if (plan.partition, g) not in written:
                written[(plan.partition, g)] = write_segment(
                    topic_log.storage,
                    topic_log.table_path,
                    plan.partition,
                    SEGMENT_SCHEMA.empty_table(),
                    base_offset=group.base_offset,
                    last_offset=group.last_offset,
                )
    outputs = list(written.values())
    say(f"{topic}: committing {len(outputs)} new segments")
    version = commit_rewrite(
        topic_log,
        inputs,
        outputs,
        "COMPACT",
        extra=[Txn(cleaned_txn(p.partition), p.cleaned_up_to, now) for p in plans],
    )
    report.records_out = sum(s.num_records for s in outputs)
    report.bytes_after = sum(s.size_bytes for s in outputs)
    report.segments_added = len(outputs)
    report.table_version = version
    return report.finish(started)


def commit_rewrite(
    topic_log: TopicLog,
    inputs: list[Segment],
    outputs: list[Segment],
    operation: str,
    extra: list[Action] | None = None,
    data_change: bool = True,
) -> int:
    """Replace ``inputs`` by ``outputs`` in one commit, if the inputs are all still live.

    Concurrent appends only add segments, so they never invalidate a rewrite;
    another job that removed one of the inputs does, and then nothing is
    committed (the new files are deleted) and the job can simply be rerun.
    """
    input_paths = {s.path for s in inputs}
    now = int(time.time() * 1000)

    def build(state: TableState) -> list[Action]:
        gone = [p for p in input_paths if p not in state.files]
        if gone:
            raise ConcurrentCommitError(
                f"{len(gone)} segment(s) of {topic_log.name!r} were rewritten or removed by "
                "another job while this one ran; nothing was committed, run it again"
            )
        actions: list[Action] = [
            RemoveFile(
                path=s.path,
                deletion_timestamp=now,
                data_change=data_change,
                partition_values={"partition": str(s.partition)},
                size=s.size_bytes,
            )
            for s in inputs
        ]
        actions += [add_action(s, data_change=data_change) for s in outputs]
        actions += extra or []
        return actions

    try:
        return topic_log.commit(build, operation, {"segments": str(len(inputs))})
    except BaseException:
        for segment in outputs:
            topic_log.storage.delete(join(topic_log.table_path, segment.path))
        raise
