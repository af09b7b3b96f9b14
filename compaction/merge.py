"""Segment merging: many small broker segments become few large ones, offsets unchanged.

Brokers write one segment per partition per group commit, so a busy topic
accumulates many small files. Spark reads runs of consecutive small segments
(up to segment.bytes and segment.ms per run; never a partition's active
segment, see ``planner.active_segment``) and writes each run as one segment;
the commit swaps them atomically with ``dataChange=false``, since no record
changes. Each task owns whole runs, so merging needs no shuffle.
"""

from __future__ import annotations

import functools

from compaction.compact import (
    Progress,
    SparkLike,
    complete_groups,
    map_indexed,
    refs_for_groups,
    segment_of,
    session_of,
    start_job,
    wall_ms,
)
from compaction.planner import SegmentGroup, plan_merge
from compaction.report import JobReport
from compaction.segment_tasks import WRITTEN_ROW, SegmentRef, rewrite_groups
from compaction.task_errors import spark_action
from lakelog.catalog import Catalog
from lakelog.errors import CorruptRecordError
from lakelog.offset_index import Segment
from lakelog.segment_rewrite import commit_rewrite
from lakelog.storage import join
from lakelog.topic_log import TopicLog


def merge_topic(
    catalog: Catalog,
    topic: str,
    spark: SparkLike,
    *,
    now_ms: int | None = None,
    progress: Progress | None = None,
) -> JobReport:
    """Merge the runs of small rolled segments of every partition (never the active one).

    ``now_ms`` decides whether the newest segment is still active (wall clock by default).
    """
    started, report, topic_log = start_job(catalog, "merge", topic)
    config = topic_log.config
    now = now_ms if now_ms is not None else wall_ms()
    by_partition: list[tuple[int, list[SegmentGroup]]] = []
    for p in range(topic_log.num_partitions):
        groups = plan_merge(p, topic_log.segments(p), config, now)
        if groups:
            by_partition.append((p, groups))
    if not by_partition:
        return report.skip("no run of small segments to merge", started)
    runs: list[list[SegmentRef]] = []
    for p, groups in by_partition:
        refs = refs_for_groups(p, groups)
        runs += [[r for r in refs if r.group == g] for g in range(len(groups))]
    inputs = [s for _, groups in by_partition for g in groups for s in g.segments]
    if progress:
        progress(f"{topic}: merging {len(inputs)} segments into {len(runs)}")
    session = session_of(spark)
    rewrite = functools.partial(
        rewrite_groups, topic_log.storage, topic_log.table_path, typed=topic_log.typed_fields
    )
    written_rows = spark_action(lambda: map_indexed(session, runs, rewrite, WRITTEN_ROW).collect())
    wall = wall_ms()
    written = {(r["partition"], r["group"]): segment_of(r, wall) for r in written_rows}
    outputs = complete_groups(topic_log, by_partition, written)
    check_counts(topic_log, by_partition, written, outputs)
    report.count(len(by_partition), inputs, outputs)
    report.table_version = commit_rewrite(
        topic_log, inputs, outputs, "MERGE SEGMENTS", data_change=False
    )
    return report.finish(started)


def check_counts(
    topic_log: TopicLog,
    by_partition: list[tuple[int, list[SegmentGroup]]],
    written: dict[tuple[int, int], Segment],
    outputs: list[Segment],
) -> None:
    """Refuse to commit a merge whose output does not hold exactly the records of its inputs."""
    for partition, groups in by_partition:
        for g, group in enumerate(groups):
            got = written[(partition, g)].num_records if (partition, g) in written else 0
            if got != group.num_records:
                for segment in outputs:
                    topic_log.storage.delete(join(topic_log.table_path, segment.path))
                raise CorruptRecordError(
                    f"merging segments {group.base_offset}..{group.last_offset} of partition "
                    f"{partition} of {topic_log.name!r} read {got} records but the Delta log "
                    f"lists {group.num_records}; nothing was committed"
                )
