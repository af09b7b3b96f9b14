"""Vacuum, checkpoint and log cleanup of a topic's Delta table (through delta-rs).

Two kinds of files are deleted, with two grace periods:

- files *removed* by compaction, retention or merging, once unreferenced for
  longer than ``grace_ms``, so a reader on an older snapshot never finds a
  file gone (delta-rs' "lite" vacuum);
- files *never committed* (orphans of crashed appends or jobs), once older
  than ``orphan_grace_ms`` (delta-rs' "full" vacuum). A file being written is
  unreferenced until its commit lands, so this is never below ``grace_ms`` and
  at least a day by default: ``--grace-ms 0`` cannot race a mid-append broker.

Delta counts retention in whole hours, so both periods are rounded up.
"""

from __future__ import annotations

import math

from deltalake import DeltaTable

from compaction.compact import Progress, start_job
from compaction.defaults import DEFAULT_GRACE_MS, DEFAULT_ORPHAN_GRACE_MS
from compaction.report import JobReport
from lakelog.catalog import Catalog
from lakelog.errors import InvalidConfigError

HOUR_MS = 3_600_000


def check_grace_periods(grace_ms: int, orphan_grace_ms: int | None) -> None:
    """Negative grace periods are refused before any file is touched."""
    if grace_ms < 0:
        raise InvalidConfigError(f"vacuum grace period must be >= 0 ms, got {grace_ms}")
    if orphan_grace_ms is not None and orphan_grace_ms < 0:
        raise InvalidConfigError(f"orphan grace period must be >= 0 ms, got {orphan_grace_ms}")


def vacuum_topic(
    catalog: Catalog,
    topic: str,
    *,
    grace_ms: int = DEFAULT_GRACE_MS,
    orphan_grace_ms: int | None = None,
    progress: Progress | None = None,
) -> JobReport:
    """Delete one topic's unreferenced files past their grace periods, then checkpoint."""
    check_grace_periods(grace_ms, orphan_grace_ms)
    if orphan_grace_ms is None:
        orphan_grace_ms = max(grace_ms, DEFAULT_ORPHAN_GRACE_MS)
    started, report, topic_log = start_job(catalog, "vacuum", topic)
    storage = topic_log.storage
    table = DeltaTable(
        storage.delta_uri(topic_log.table_path),
        storage_options=storage.delta_storage_options() or None,
    )
    if progress:
        progress(f"{topic}: vacuum (grace {grace_ms / HOUR_MS:.2f} h), checkpoint")
    removed, orphans = (  # "lite" vacuum of removed files, then "full" of never-committed ones
        table.vacuum(
            retention_hours=math.ceil(ms / HOUR_MS),
            dry_run=False,
            enforce_retention_duration=False,
            full=full,
        )
        for ms, full in ((grace_ms, False), (orphan_grace_ms, True))
    )
    table.create_checkpoint()
    table.cleanup_metadata()
    report.segments_removed = len(removed) + len(orphans)
    report.table_version = table.version()
    report.message = (
        f"deleted {len(removed)} removed and {len(orphans)} never-committed files; checkpointed"
    )
    return report.finish(started)
