"""Gather the facts of a storage root and run the doctor's checks on them (the I/O half)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs
import pyarrow.parquet as pq

from lakelog.catalog import META_TOPICS, TOPICS_DIR, TopicPointer
from lakelog.delta.log import LOG_DIR, DeltaLog
from lakelog.delta.state import TableState
from lakelog.doctor.checks import (
    RegistryEntry,
    SegmentFacts,
    StoredFile,
    check_log_versions,
    check_offsets_records,
    check_orphans,
    check_partition_offsets,
    check_pointer,
    check_registry,
    check_segment,
    check_staging,
    check_unreferenced_tables,
    check_watermark_txns,
)
from lakelog.doctor.findings import Finding, Severity
from lakelog.errors import LakelogError
from lakelog.numerals import is_unsigned_int
from lakelog.offset_index import Segment, segment_from_add
from lakelog.records import SEGMENT_SCHEMA
from lakelog.storage import Storage, join
from lakelog.topic_config import CONSUMER_OFFSETS_TOPIC
from lakelog.topic_table import CONFIG_PARTITIONS, PARTITION_TXN_PREFIX

BROKERS_DIR = "_meta/brokers"
STAGING_DIR = "_staging"
COMMIT_NAME = re.compile(r"^(\d{20})\.json$")
#: Delta's default deletedFileRetentionDuration: files removed from the log stay this long.
DEFAULT_GRACE_S = 7 * 24 * 3600.0
DEFAULT_BROKER_STALE_S = 3600.0

Progress = Callable[[Iterable[Segment], int, str], Iterable[Segment]]


def no_progress(items: Iterable[Segment], total: int, label: str) -> Iterable[Segment]:
    return items


@dataclass(frozen=True)
class ScanOptions:
    topic: str | None = None
    grace_s: float = DEFAULT_GRACE_S
    broker_stale_s: float = DEFAULT_BROKER_STALE_S
    progress: Progress = no_progress


class _Ages:
    """File ages from the pyarrow filesystem (the Storage interface has no mtimes)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.fs = storage.arrow_filesystem()
        self.now = time.time()

    def of(self, paths: list[str]) -> dict[str, float]:
        if not paths:
            return {}
        infos = self.fs.get_file_info([self.storage.arrow_path(p) for p in paths])
        ages = {}
        for path, info in zip(paths, infos, strict=True):
            mtime = info.mtime.timestamp() if info.mtime is not None else self.now
            ages[path] = max(0.0, self.now - mtime)
        return ages

    def newest(self, directory: str) -> float:
        """Age of the youngest file under ``directory`` (a directory is as young as its content)."""
        files = [f.path for f in self.storage.walk_files(directory)]
        ages = self.of(files)
        return min(ages.values()) if ages else 0.0

    def dirs(self, parents: Iterable[str]) -> list[StoredFile]:
        """The directories in ``parents``, each as young as its content."""
        return [
            StoredFile(d.path, self.newest(d.path))
            for parent in parents
            for d in self.storage.list_dir(parent)
            if d.is_dir
        ]


def scan_root(storage: Storage, options: ScanOptions | None = None) -> list[Finding]:
    """Every finding for the root (or one topic of it)."""
    options = options or ScanOptions()
    ages = _Ages(storage)
    findings: list[Finding] = []
    referenced: set[str] = set()
    for info in storage.list_dir(META_TOPICS):
        name = info.path.rsplit("/", 1)[-1].removesuffix(".json")
        if info.is_dir or not info.path.endswith(".json"):
            continue
        if options.topic is not None and name != options.topic:
            continue
        findings.extend(_scan_topic(storage, name, info.path, options, ages, referenced))
    if options.topic is None:
        tables = ages.dirs(d.path for d in storage.list_dir(TOPICS_DIR) if d.is_dir)
        findings.extend(check_unreferenced_tables(tables, referenced, options.grace_s))
        findings.extend(check_staging(ages.dirs([STAGING_DIR]), options.grace_s))
        findings.extend(check_registry(_registry(storage), int(options.broker_stale_s * 1000)))
    return findings


def _scan_topic(
    storage: Storage,
    name: str,
    pointer_path: str,
    options: ScanOptions,
    ages: _Ages,
    referenced: set[str],
) -> list[Finding]:
    try:
        pointer = TopicPointer.from_bytes(storage.read_bytes(pointer_path))
    except (ValueError, KeyError, TypeError) as exc:
        return check_pointer(name, pointer_path, None, False, f"unreadable ({exc})")
    referenced.add(pointer.table_path)
    delta = DeltaLog(storage, pointer.table_path)
    log_path = delta.log_path
    versions = [
        int(m.group(1))
        for f in storage.list_dir(log_path)
        if (m := COMMIT_NAME.match(f.path.rsplit("/", 1)[-1])) is not None
    ]
    last = delta.last_checkpoint()
    checkpoint = None if last is None else last[0]
    if not versions and checkpoint is None:
        return check_pointer(name, pointer_path, pointer.table_path, False, None)
    findings = check_log_versions(name, log_path, versions, checkpoint)
    try:
        state = delta.load()
    except LakelogError as exc:
        findings.append(Finding("delta-log", Severity.ERROR, name, log_path, exc.message))
        return findings
    findings.extend(_check_table(storage, name, pointer.table_path, state, options, ages))
    return findings


def _check_table(
    storage: Storage,
    name: str,
    table_path: str,
    state: TableState,
    options: ScanOptions,
    ages: _Ages,
) -> list[Finding]:
    findings: list[Finding] = []
    segments = [segment_from_add(add) for add in state.files.values()]
    fs = ages.fs
    for segment in options.progress(segments, len(segments), name):
        path = storage.arrow_path(join(table_path, segment.path))
        facts = _segment_facts(fs, path)
        findings.extend(check_segment(name, table_path, segment, facts))
        if name == CONSUMER_OFFSETS_TOPIC and facts.error is None and not facts.missing_columns:
            try:
                records = _records(fs, path)
            except (OSError, pa.ArrowInvalid) as exc:
                unreadable = SegmentFacts(None, None, None, error=f"has unreadable data ({exc})")
                findings.extend(check_segment(name, table_path, segment, unreadable))
            else:
                findings.extend(check_offsets_records(name, table_path, segment, records))
    assert state.metadata is not None
    partitions = int(state.metadata.configuration.get(CONFIG_PARTITIONS, "1"))
    watermarks = {
        int(app[len(PARTITION_TXN_PREFIX) :]): version
        for app, version in state.txns.items()
        if app.startswith(PARTITION_TXN_PREFIX)
        and is_unsigned_int(app[len(PARTITION_TXN_PREFIX) :])
    }
    findings.extend(check_watermark_txns(name, partitions, watermarks))
    for partition in range(partitions):
        mine = [s for s in segments if s.partition == partition]
        findings.extend(check_partition_offsets(name, partition, mine, watermarks.get(partition)))
    stored = [
        f.path
        for f in storage.walk_files(table_path)
        if not f.path.startswith(join(table_path, LOG_DIR) + "/")
    ]
    file_ages = ages.of(stored)
    live = {join(table_path, path) for path in state.files}
    # A removed file's grace period runs from its removal, as vacuum counts it, not from
    # when it was written: an old segment a compaction just replaced is still being read.
    removed = {join(table_path, path): remove for path, remove in state.tombstones.items()}
    for path, remove in removed.items():
        if path in file_ages:
            since_removal = max(0.0, ages.now - remove.deletion_timestamp / 1000)
            file_ages[path] = min(file_ages[path], since_removal)
    findings.extend(
        check_orphans(
            name,
            [StoredFile(p, a) for p, a in file_ages.items()],
            live,
            options.grace_s,
            removed=set(removed),
        )
    )
    return findings


def _segment_facts(fs: pyarrow.fs.FileSystem, path: str) -> SegmentFacts:
    """Row count, offset range and schema from the footer alone (no data pages are read)."""
    try:
        with fs.open_input_file(path) as source:
            parquet = pq.ParquetFile(source)
            schema = parquet.schema_arrow
            metadata = parquet.metadata
            missing = tuple(n for n in SEGMENT_SCHEMA.names if n not in schema.names)
            low: int | None = None
            high: int | None = None
            if "offset" in schema.names:
                column = schema.get_field_index("offset")
                for i in range(metadata.num_row_groups):
                    stats = metadata.row_group(i).column(column).statistics
                    if stats is None or not stats.has_min_max:
                        continue
                    low = stats.min if low is None else min(low, stats.min)
                    high = stats.max if high is None else max(high, stats.max)
            return SegmentFacts(metadata.num_rows, low, high, missing)
    except FileNotFoundError:
        return SegmentFacts(None, None, None, error="is missing")
    except (OSError, pa.ArrowInvalid) as exc:
        return SegmentFacts(None, None, None, error=f"is not readable Parquet ({exc})")


def _records(fs: pyarrow.fs.FileSystem, path: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """A segment's (offset, key, value) rows: the offsets table's records must each decode."""
    columns = ["offset", "key", "value"]
    with fs.open_input_file(path) as source:
        rows = pq.ParquetFile(source).read(columns=columns)
    return list(zip(*(rows.column(c).to_pylist() for c in columns), strict=True))


def _registry(storage: Storage) -> list[RegistryEntry]:
    now_ms = int(time.time() * 1000)
    entries = []
    for info in storage.list_dir(BROKERS_DIR):
        if info.is_dir or not info.path.endswith(".json"):
            continue
        try:
            beat = int(json.loads(storage.read_bytes(info.path))["heartbeat_ms"])
        except FileNotFoundError:
            continue  # deregistered between listing and reading
        except (ValueError, KeyError, TypeError):
            entries.append(RegistryEntry(info.path, None))
            continue
        entries.append(RegistryEntry(info.path, now_ms - beat))
    return entries
