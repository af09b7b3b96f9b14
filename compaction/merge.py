"""Segment merging: many small broker segments become few large ones, offsets unchanged.

Brokers write one segment per partition per group commit, so a busy topic
accumulates many small files. Spark reads runs of consecutive small segments
(up to segment.bytes and segment.ms per run) and writes each run as one
segment; the commit swaps them atomically with ``dataChange=false``, since no
record changes.
"""

from __future__ import annotations

import time

from pyspark.sql import SparkSession

from compaction.compact import Progress, commit_rewrite, read_rows, segment_writer_task
from compaction.planner import SegmentGroup, plan_merge
from compaction.report import JobReport
from compaction.segment_tasks import WRITTEN_DDL, SegmentRef
from lakelog.catalog import Catalog
from lakelog.offset_index import Segment


def merge_topic(
    catalog: Catalog,
    topic: str,
    spark: SparkSession,
    *,
    progress: Progress | None = None,
) -> JobReport:
    started = time.perf_counter()
    report = JobReport("merge", topic)
    topic_log = catalog.topic(topic)
    topic_log.refresh()
    config = topic_log.config
    groups: list[SegmentGroup] = []
    for p in range(topic_log.num_partitions):
        groups += plan_merge(p, topic_log.segments(p), config)
    if not groups:
        report.status, report.message = "skipped", "no run of small segments to merge"
        return report.finish(started)
    ids: dict[int, int] = {}
    refs = []
    for group in groups:
        gid = ids.setdefault(group.partition, 0)
        ids[group.partition] = gid + 1
        refs += [
            SegmentRef(
                group.partition,
                gid,
                group.base_offset,
                group.last_offset,
                s.path,
                s.base_offset,
                s.last_offset,
            )
            for s in group.segments
        ]
    inputs = [s for g in groups for s in g.segments]
    if progress:
        progress(f"{topic}: merging {len(inputs)} segments into {len(groups)}")
    tasks = max(1, min(len(groups), spark.sparkContext.defaultParallelism * 2))
    written = (
        read_rows(spark, topic_log, refs)
        .repartition(tasks, "partition", "group")
        .sortWithinPartitions("partition", "group", "offset")
        .mapInArrow(segment_writer_task(topic_log.storage, topic_log.table_path), WRITTEN_DDL)
        .collect()
    )
    now = int(time.time() * 1000)
    outputs = [
        Segment(
            r["base_offset"],
            r["last_offset"],
            r["path"],
            r["partition"],
            r["size"],
            r["num_records"],
            r["min_ts"],
            r["max_ts"],
            now,
        )
        for r in written
    ]
    report.partitions = len({g.partition for g in groups})
    report.records_in = sum(s.num_records for s in inputs)
    report.records_out = sum(s.num_records for s in outputs)
    report.bytes_before = sum(s.size_bytes for s in inputs)
    report.bytes_after = sum(s.size_bytes for s in outputs)
    report.segments_removed = len(inputs)
    report.segments_added = len(outputs)
    report.table_version = commit_rewrite(
        topic_log, inputs, outputs, "MERGE SEGMENTS", data_change=False
    )
    return report.finish(started)
