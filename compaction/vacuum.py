"""Vacuum, checkpoint and log cleanup of a topic's Delta table (through delta-rs).

Files removed by compaction, retention or merging are deleted only once they
have been unreferenced for longer than the grace period, so a reader on an
older snapshot (a broker between refreshes, a running Spark query) never
finds a file gone. The grace period must also exceed the longest append, as
vacuum deletes files never committed (orphans of crashed writers) by age.
Delta counts retention in whole hours, so the grace period is rounded up.
"""

from __future__ import annotations

import math
import time

from deltalake import DeltaTable

from compaction.compact import Progress
from compaction.report import JobReport
from lakelog.catalog import Catalog
from lakelog.errors import InvalidConfigError

DEFAULT_GRACE_MS = 7 * 24 * 3600 * 1000  # Delta's own default retention


def vacuum_topic(
    catalog: Catalog,
    topic: str,
    *,
    grace_ms: int = DEFAULT_GRACE_MS,
    progress: Progress | None = None,
) -> JobReport:
    if grace_ms < 0:
        raise InvalidConfigError(f"vacuum grace period must be >= 0 ms, got {grace_ms}")
    started = time.perf_counter()
    report = JobReport("vacuum", topic)
    topic_log = catalog.topic(topic)
    topic_log.refresh()
    storage = topic_log.storage
    table = DeltaTable(
        storage.delta_uri(topic_log.table_path),
        storage_options=storage.delta_storage_options() or None,
    )
    if progress:
        progress(f"{topic}: vacuum (grace {grace_ms / 3_600_000:.2f} h), checkpoint")
    deleted = table.vacuum(
        retention_hours=math.ceil(grace_ms / 3_600_000),
        dry_run=False,
        enforce_retention_duration=False,
    )
    table.create_checkpoint()
    table.cleanup_metadata()
    report.segments_removed = len(deleted)
    report.table_version = table.version()
    report.message = f"deleted {len(deleted)} unreferenced files"
    return report.finish(started)
