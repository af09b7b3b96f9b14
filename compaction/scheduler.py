"""``lakelog scheduler``: run retention, compaction, merging and vacuum on their intervals.

One long-lived process over one storage root, as Kafka's log manager and log
cleaner threads are inside a broker; its settings (``SchedulerSettings``, in
docs/configuration.md) come from flags > ``LAKELOG_*`` variables > a
``.properties`` or ``.json`` file > defaults. A job failing on a topic is
logged, recorded as ``failed`` in the jobs history, and runs again at its next
interval. SIGTERM (or Ctrl-C) stops after the job on the current topic
(commits are atomic, so even a SIGKILL loses nothing); a second signal also
cancels running Spark jobs.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pyspark.sql import SparkSession

from compaction.defaults import DEFAULT_GRACE_MS
from compaction.report import append_history
from compaction.runner import JobOptions, Outcome, run_job
from compaction.spark_session import spark_session
from lakelog.catalog import Catalog
from lakelog.cli.common import require_root_setting
from lakelog.settings_files import load_layered

log = logging.getLogger(__name__)

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class SchedulerSettings(BaseSettings):
    """Typed scheduler settings; field ``log_merge_interval_ms`` is ``log.merge.interval.ms``."""

    model_config = SettingsConfigDict(env_prefix="LAKELOG_", extra="forbid", frozen=True)

    root: str = Field(
        "./data/lakelog",
        description="Storage root URL (path, file://, s3://). `lakelog scheduler` needs it "
        "set (--root, config file or LAKELOG_ROOT); the default serves settings built in code.",
    )
    spark_master: str | None = Field(
        None, description="Spark master; default local[2] (or spark-submit's)."
    )
    log_retention_check_interval_ms: int = Field(
        300_000, ge=1, description="How often retention runs (Kafka's default)."
    )
    log_compaction_interval_ms: int = Field(60_000, ge=1, description="How often compaction runs.")
    log_merge_interval_ms: int = Field(600_000, ge=1, description="How often merging runs.")
    log_vacuum_interval_ms: int = Field(3_600_000, ge=1, description="How often vacuum runs.")
    log_vacuum_grace_ms: int = Field(
        DEFAULT_GRACE_MS, ge=0, description="Removed files are deleted this long after removal."
    )
    log_vacuum_orphan_grace_ms: int | None = Field(
        None,
        ge=0,
        description="Never-committed files are deleted at this age "
        "(default: the larger of the grace period and one day).",
    )
    history: bool = Field(True, description="Append job reports to the jobs-history table.")
    log_level: str = Field("info", description="debug, info, warning, error.")

    @field_validator("root")
    @classmethod
    def _root_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("root must name a storage root")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.lower() not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
        return value.lower()

    def intervals(self) -> dict[str, int]:
        """Milliseconds between runs of each job, in the order they run when due together."""
        return {
            "retention": self.log_retention_check_interval_ms,
            "compact": self.log_compaction_interval_ms,
            "merge": self.log_merge_interval_ms,
            "vacuum": self.log_vacuum_interval_ms,
        }


def load_settings(config_file: str | None = None, **overrides: Any) -> SchedulerSettings:
    """Defaults < config file < environment < explicit overrides (flags); INVALID_CONFIG if bad."""
    return load_layered(SchedulerSettings, config_file, overrides, "scheduler")


@dataclass
class Schedule:
    """Which job is due when (pure logic; times are milliseconds on any monotonic clock)."""

    intervals_ms: dict[str, int]
    next_due_ms: dict[str, int] = field(default_factory=dict)

    @classmethod
    def starting_at(cls, intervals_ms: Mapping[str, int], now_ms: int) -> Schedule:
        """Every job is due at once: a restarted scheduler catches up immediately."""
        return cls(dict(intervals_ms), {job: now_ms for job in intervals_ms})

    def due(self, now_ms: int) -> list[str]:
        """Jobs due at ``now_ms``, in run order (retention, compact, merge, vacuum)."""
        return [job for job in self.intervals_ms if self.next_due_ms[job] <= now_ms]

    def done(self, job: str, started_ms: int, finished_ms: int) -> None:
        """A run of ``job`` ended (whether it succeeded or failed): schedule the next.

        Next run: one interval after this one started, so the rate does not
        drift with the job's duration; if the job overran its interval, right
        after it ended, without piling up the missed runs.
        """
        self.next_due_ms[job] = max(started_ms + self.intervals_ms[job], finished_ms)

    def sleep_ms(self, now_ms: int) -> int:
        """How long to wait from ``now_ms`` until the next job is due (0 if one is due)."""
        return max(0, min(self.next_due_ms.values()) - now_ms)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class Scheduler:
    """Runs the maintenance jobs of one root on their intervals until stopped."""

    def __init__(
        self,
        settings: SchedulerSettings,
        *,
        spark: SparkSession | None = None,
        catalog: Catalog | None = None,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.settings = settings
        self.catalog = catalog or Catalog(settings.root)
        self._own_catalog = catalog is None
        self._spark = spark
        self._own_spark = False
        self._clock = clock
        self._stop = threading.Event()
        self.schedule = Schedule.starting_at(settings.intervals(), clock())
        self.options = JobOptions(
            grace_ms=settings.log_vacuum_grace_ms,
            orphan_grace_ms=settings.log_vacuum_orphan_grace_ms,
        )

    def spark(self) -> SparkSession:
        """The one session of this process, started by the first job that needs it."""
        if self._spark is None:
            log.info("starting Spark (master %s)", self.settings.spark_master or "default")
            self._spark = spark_session(self.settings.spark_master, app_name="lakelog-scheduler")
            self._own_spark = True
        return self._spark

    def stop(self) -> None:
        """Ask the loop to stop after the job on the current topic (thread- and signal-safe)."""
        self._stop.set()

    def cancel_running(self) -> None:
        """Cancel running Spark jobs (their commit never happens, so nothing is half done)."""
        if self._spark is not None:
            self._spark.sparkContext.cancelAllJobs()

    def close(self) -> None:
        if self._own_spark and self._spark is not None:
            self._spark.stop()
            self._spark = None
        if self._own_catalog:
            self.catalog.close()

    def run(self, once: bool = False) -> int:
        """Loop until stopped (``once``: run every job once). Returns the exit code."""
        intervals = ", ".join(
            f"{j} every {ms / 1000:g}s" for j, ms in self.schedule.intervals_ms.items()
        )
        log.info("scheduler started on %s: %s", self.catalog.url, intervals)
        failures = 0
        try:
            while not self._stop.is_set():
                failures += sum(o.failed for o in self.tick(self._clock()))
                if once:
                    break
                self._stop.wait(self.schedule.sleep_ms(self._clock()) / 1000)
        finally:
            self.close()
            log.info("scheduler stopped")
        return 1 if once and failures else 0

    def tick(self, now_ms: int) -> list[Outcome]:
        """Run every job due at ``now_ms`` (over all topics) and schedule each one's next run."""
        outcomes: list[Outcome] = []
        for job in self.schedule.due(now_ms):
            if self._stop.is_set():
                break
            started = self._clock()
            outcomes += self.run_job(job)
            self.schedule.done(job, started, self._clock())
        return outcomes

    def run_job(self, job: str) -> list[Outcome]:
        """One run of ``job`` over every topic of the root; failures are logged, not raised."""
        retry_s = self.schedule.intervals_ms[job] / 1000
        try:
            topics = self.catalog.list_topics()
        except Exception:
            log.exception(
                "%s: cannot list the topics of %s; retrying in %gs", job, self.catalog.url, retry_s
            )
            return []
        outcomes = []
        for topic in topics:
            if self._stop.is_set():
                break
            outcome = run_job(job, self.catalog, topic, self.spark, self.options, explicit=False)
            report = outcome.report
            if outcome.failed:
                log.error(
                    "%s of topic %r failed (retrying in %gs): %s",
                    job,
                    topic,
                    retry_s,
                    report.message,
                    exc_info=outcome.error,
                )
            elif report.status == "skipped":
                log.debug("%s", report.render())
            else:
                log.info("%s", report.render())
            outcomes.append(outcome)
        recorded = [o.report for o in outcomes if o.report.status != "skipped"]
        if self.settings.history and recorded:
            try:
                append_history(self.catalog.storage, recorded)
            except Exception:
                log.exception("cannot append %d report(s) to the jobs history", len(recorded))
        return outcomes


# -- command line ----------------------------------------------------------------


def run_command(args: argparse.Namespace) -> int:
    settings = load_settings(
        args.config,
        root=getattr(args, "root", None),
        spark_master=getattr(args, "master", None),
        log_level=args.log_level,
    )
    require_root_setting(settings)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("compaction").setLevel(settings.log_level.upper())
    scheduler = Scheduler(settings)
    signals = [0]

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals[0] += 1
        if signals[0] == 1:
            log.info("%s received: stopping after the current job", signal.Signals(signum).name)
            scheduler.stop()
        else:
            log.warning("second signal: cancelling running Spark jobs")
            threading.Thread(target=scheduler.cancel_running, daemon=True).start()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        return scheduler.run(once=args.once)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
