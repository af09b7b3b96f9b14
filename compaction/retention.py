"""Retention: remove whole segments past retention.ms or beyond retention.bytes.

A metadata-only Delta commit (no data is read or written), so it runs on the
driver. The removed files stay on storage until a vacuum, so a fetch that
already chose one of them still completes; the log start offset moves forward
and fetches below it get OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

from compaction.compact import Progress, start_job, wall_ms
from compaction.planner import plan_retention
from compaction.report import JobReport
from lakelog.catalog import Catalog
from lakelog.segment_rewrite import commit_rewrite


def apply_retention(
    catalog: Catalog,
    topic: str,
    *,
    now_ms: int | None = None,
    progress: Progress | None = None,
) -> JobReport:
    started, report, topic_log = start_job(catalog, "retention", topic)
    config = topic_log.config
    if "delete" not in config.cleanup_policy:
        return report.skip(
            f"cleanup.policy={config.get('cleanup.policy')} has no 'delete'", started
        )
    now = now_ms if now_ms is not None else wall_ms()
    plans = [
        plan
        for p in range(topic_log.num_partitions)
        if (plan := plan_retention(p, topic_log.segments(p), config, now)) is not None
    ]
    if not plans:
        return report.skip("nothing is past retention", started)
    removed = [s for plan in plans for s in plan.remove]
    if progress:
        progress(f"{topic}: removing {len(removed)} segments of {len(plans)} partitions")
    report.count(len(plans), removed)
    report.message = ", ".join(
        f"p{plan.partition}: log start -> {plan.new_log_start} ({plan.reason})" for plan in plans
    )
    report.table_version = commit_rewrite(topic_log, removed, [], "RETENTION")
    return report.finish(started)
