"""Running maintenance jobs over topics: the one code path the CLI and the scheduler share.

``run_job`` runs one job on one topic and never raises for a failure of that
job: it returns an ``Outcome`` whose report says ``failed`` with the error's
message, and carries the exception (with its traceback) for the caller to
print or log. One broken topic therefore never stops the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from compaction.compact import Progress, compact_topic
from compaction.defaults import DEFAULT_GRACE_MS, JOBS
from compaction.merge import merge_topic
from compaction.report import JobReport
from compaction.retention import apply_retention
from compaction.vacuum import check_grace_periods, vacuum_topic
from lakelog.catalog import Catalog
from lakelog.errors import InvalidConfigError, LakelogError

log = logging.getLogger(__name__)

__all__ = ["JOBS", "JobOptions", "Outcome", "error_message", "run_job"]


@dataclass(frozen=True)
class JobOptions:
    """Knobs of the jobs (``now_ms=None``: the wall clock)."""

    force: bool = False
    grace_ms: int = DEFAULT_GRACE_MS
    orphan_grace_ms: int | None = None
    now_ms: int | None = None

    def __post_init__(self) -> None:
        check_grace_periods(self.grace_ms, self.orphan_grace_ms)


@dataclass
class Outcome:
    report: JobReport
    error: BaseException | None = field(default=None, repr=False)

    @property
    def failed(self) -> bool:
        return self.error is not None


def error_message(exc: BaseException) -> str:
    """What an operator is told: a lakelog error's own text, else the type and message."""
    if isinstance(exc, LakelogError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def run_job(
    job: str,
    catalog: Catalog,
    topic: str,
    spark: Callable[[], SparkSession],
    options: JobOptions,
    *,
    explicit: bool = True,
    progress: Progress | None = None,
) -> Outcome:
    """Run ``job`` on ``topic``; failures become a ``failed`` report, not an exception.

    ``explicit`` is False for a topic found by listing the root: then compacting
    a topic that is not compacted is a skip, not an error. ``spark`` is only
    called by jobs that have Spark work.
    """
    started, started_ms = time.perf_counter(), int(time.time() * 1000)
    try:
        if job == "compact" and not explicit and not catalog.topic(topic).config.compacted:
            report = JobReport(job, topic, status="skipped", message="not a compacted topic")
            return Outcome(report)
        if job == "retention":
            report = apply_retention(catalog, topic, now_ms=options.now_ms, progress=progress)
        elif job == "compact":
            report = compact_topic(
                catalog,
                topic,
                spark,
                now_ms=options.now_ms,
                force=options.force,
                progress=progress,
            )
        elif job == "merge":
            report = merge_topic(catalog, topic, spark, now_ms=options.now_ms, progress=progress)
        elif job == "vacuum":
            report = vacuum_topic(
                catalog,
                topic,
                grace_ms=options.grace_ms,
                orphan_grace_ms=options.orphan_grace_ms,
                progress=progress,
            )
        else:
            raise InvalidConfigError(f"unknown job {job!r}; jobs are {', '.join(JOBS)}")
    except Exception as exc:
        report = JobReport(
            job, topic, status="failed", message=error_message(exc), started_ms=started_ms
        )
        return Outcome(report.finish(started), exc)
    return Outcome(report)
