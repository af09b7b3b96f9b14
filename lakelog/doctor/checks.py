"""The doctor's rules as pure functions: facts gathered from a root in, findings out.

No I/O here, so every rule is unit-tested on hand-made facts; ``scan`` reads
the facts from a real root.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from lakelog.doctor.findings import Finding, RecordToDrop, Severity
from lakelog.errors import CorruptRecordError
from lakelog.groups.codec import decode_record
from lakelog.offset_index import Segment


@dataclass(frozen=True)
class SegmentFacts:
    """What a segment's Parquet footer says (None fields: the file could not be read)."""

    rows: int | None
    min_offset: int | None
    max_offset: int | None
    missing_columns: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class StoredFile:
    """A file or directory found by listing, with its age in seconds."""

    path: str
    age_s: float


def _leftover(
    check: str, topic: str | None, f: StoredFile, grace_s: float, message: str, tree: bool = False
) -> Finding:
    """A leftover file or directory, marked for deletion only once older than ``grace_s``."""
    old = f.age_s >= grace_s
    return Finding(
        check, Severity.WARNING, topic, f.path, message, delete=(f.path,) if old else (), tree=tree
    )


def check_log_versions(
    topic: str, log_path: str, versions: Sequence[int], checkpoint: int | None
) -> list[Finding]:
    """Commit files must be contiguous from the checkpoint (or 0) to the newest."""
    present = sorted(versions)
    if not present:
        return [Finding("delta-log", Severity.ERROR, topic, log_path, f"{log_path} has no commits")]
    start = 0 if checkpoint is None else checkpoint + 1
    missing = sorted(set(range(start, present[-1] + 1)) - set(present))
    if not missing:
        return []
    shown = ", ".join(str(v) for v in missing[:10])
    after = "the start" if checkpoint is None else f"checkpoint {checkpoint}"
    message = f"{log_path}: commit versions missing after {after}: {shown}"
    return [Finding("delta-log", Severity.ERROR, topic, log_path, message)]


def check_segment(
    topic: str, table_path: str, segment: Segment, facts: SegmentFacts
) -> list[Finding]:
    """A live segment must be readable Parquet of the segment schema holding its tagged range."""
    path = f"{table_path}/{segment.path}"
    where = f"segment {path} (partition {segment.partition})"
    if facts.error is not None:
        return [Finding("segment", Severity.ERROR, topic, path, f"{where}: {facts.error}")]
    problems = []
    if facts.missing_columns:
        problems.append(f"lacks columns {', '.join(facts.missing_columns)}")
    if facts.rows != segment.num_records:
        problems.append(f"holds {facts.rows} rows but its tags say {segment.num_records}")
    low, high = facts.min_offset, facts.max_offset
    if (
        facts.rows
        and low is not None
        and high is not None
        and (low < segment.base_offset or high > segment.last_offset)
    ):
        problems.append(
            f"holds offsets {low}..{high} outside its tagged "
            f"range {segment.base_offset}..{segment.last_offset}"
        )
    return [Finding("segment", Severity.ERROR, topic, path, f"{where} {p}") for p in problems]


def check_offsets_records(
    topic: str,
    table_path: str,
    segment: Segment,
    records: Iterable[tuple[int, bytes | None, bytes | None]],
) -> list[Finding]:
    """Every record of the committed-offsets table must decode as a group's offset or tombstone.

    Readers skip one that does not, but the repair removes it (``records``: offset, key, value).
    """
    findings = []
    path = f"{table_path}/{segment.path}"
    for offset, key, value in records:
        try:
            decode_record(key, value)
        except CorruptRecordError as exc:
            message = (
                f"partition {segment.partition} offset {offset} is not a committed offset "
                f"({exc.message}); consumer groups skip it"
            )
            drop = RecordToDrop(table_path, segment.path, segment.partition, offset)
            findings.append(
                Finding("offsets-table", Severity.ERROR, topic, path, message, drop=drop)
            )
    return findings


def check_partition_offsets(
    topic: str,
    partition: int,
    segments: Sequence[Segment],
    high_watermark: int | None,
) -> list[Finding]:
    """Segments of a partition cover a dense range ending at the high watermark's predecessor."""
    where = f"partition {partition}"
    ordered = sorted(segments, key=lambda s: s.base_offset)
    if ordered and high_watermark is None:
        messages = [f"{where} has segments but no high-watermark app transaction"]
    else:
        messages = [
            f"{where}: {'overlap' if after.base_offset <= before.last_offset else 'gap'} "
            f"between offsets {before.last_offset} and {after.base_offset} "
            f"({before.path}, {after.path})"
            for before, after in itertools.pairwise(ordered)
            if after.base_offset != before.last_offset + 1
        ]
        if ordered and ordered[-1].last_offset + 1 != high_watermark:
            messages.append(
                f"{where}: the high watermark is {high_watermark} but the last segment "
                f"ends at offset {ordered[-1].last_offset}"
            )
    return [Finding("offsets", Severity.ERROR, topic, where, m) for m in messages]


def check_watermark_txns(
    topic: str, partitions: int, watermarks: Mapping[int, int]
) -> list[Finding]:
    """High-watermark transactions exist only for existing partitions and are never negative."""
    findings = []
    for partition, hwm in sorted(watermarks.items()):
        if partition >= partitions:
            message = (
                f"a high watermark ({hwm}) exists for partition {partition}, "
                f"but the topic has {partitions} partitions"
            )
        elif hwm < 0:
            message = f"partition {partition} has a negative high watermark {hwm}"
        else:
            continue
        findings.append(
            Finding("watermarks", Severity.ERROR, topic, f"partition {partition}", message)
        )
    return findings


def check_orphans(
    topic: str,
    files: Iterable[StoredFile],
    live: set[str],
    grace_s: float,
    what: str = "segment",
    removed: Collection[str] = (),
) -> list[Finding]:
    """Files of a table that no live add action references.

    Young orphans are normal (an append's segments exist before its commit), so only
    files older than the grace period are marked for deletion. A file a commit
    ``removed`` (its age counted from the removal) is not reported within it: vacuum's.
    """
    return [
        _leftover(
            "orphans",
            topic,
            f,
            grace_s,
            f"{what} {f.path} is not in the Delta log ({f.age_s:.0f} s old"
            + (")" if f.age_s >= grace_s else f", within the {grace_s:.0f} s grace period)"),
        )
        for f in files
        if f.path not in live and (f.path not in removed or f.age_s >= grace_s)
    ]


def check_staging(entries: Iterable[StoredFile], grace_s: float) -> list[Finding]:
    """``_staging/<write-id>/`` directories left by Spark writers that never committed."""
    return [
        _leftover(
            "staging",
            None,
            e,
            grace_s,
            f"staging directory {e.path} is {e.age_s:.0f} s old"
            + ("" if e.age_s >= grace_s else f" (within the {grace_s:.0f} s grace period)"),
            tree=True,
        )
        for e in entries
    ]


@dataclass(frozen=True)
class RegistryEntry:
    path: str
    #: Milliseconds since the broker's last heartbeat; None if the entry is unreadable.
    silent_ms: int | None


def check_registry(entries: Iterable[RegistryEntry], stale_ms: int) -> list[Finding]:
    """Broker entries nobody refreshes any more (the broker died without deregistering)."""
    findings = []
    for e in entries:
        if e.silent_ms is None:
            message = f"broker entry {e.path} is unreadable"
        elif e.silent_ms > stale_ms:
            message = f"broker entry {e.path} has not been refreshed for {e.silent_ms / 1000:.0f} s"
        else:
            continue
        findings.append(Finding("registry", Severity.WARNING, None, e.path, message, (e.path,)))
    return findings


def check_pointer(
    name: str, path: str, table_path: str | None, table_exists: bool, error: str | None
) -> list[Finding]:
    """``_meta/topics/<name>.json`` must parse and name an existing Delta table."""
    if error is not None:
        return [Finding("pointers", Severity.ERROR, name, path, f"topic pointer {path}: {error}")]
    if not table_exists:
        message = f"topic pointer {path} names table {table_path}, which has no Delta log"
        return [Finding("pointers", Severity.ERROR, name, path, message)]
    return []


def check_unreferenced_tables(
    tables: Iterable[StoredFile], referenced: set[str], grace_s: float
) -> list[Finding]:
    """Table directories no pointer names: a deleted topic whose delete did not finish (young
    ones are left alone: a topic being created writes its table before its pointer)."""
    return [
        _leftover(
            "orphans",
            None,
            t,
            grace_s,
            f"table {t.path} belongs to no topic ({t.age_s:.0f} s old)",
            tree=True,
        )
        for t in tables
        if t.path not in referenced
    ]
