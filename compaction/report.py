"""Job reports: what a maintenance run did, printed at the end and kept in a Delta table.

Every run appends one row per topic to ``_jobs/history`` in the storage root,
so operators (and notebooks) can see compaction and retention over time with
the same tools they use for the topics themselves.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields

import pyarrow as pa
from deltalake import write_deltalake

from lakelog.offset_index import Segment
from lakelog.storage import Storage

HISTORY_TABLE = "_jobs/history"


@dataclass
class JobReport:
    """The outcome of one job on one topic."""

    job: str
    topic: str
    status: str = "ok"
    message: str = ""
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    duration_ms: int = 0
    partitions: int = 0
    records_in: int = 0
    records_out: int = 0
    tombstones_dropped: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    segments_removed: int = 0
    segments_added: int = 0
    table_version: int = -1
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def finish(self, started: float) -> JobReport:
        self.duration_ms = int((time.perf_counter() - started) * 1000)
        return self

    def skip(self, message: str, started: float) -> JobReport:
        self.status, self.message = "skipped", message
        return self.finish(started)

    def count(
        self, partitions: int, removed: Sequence[Segment], added: Sequence[Segment] = ()
    ) -> None:
        """The partitions a job changed, and the segments it removed and added."""
        self.partitions = partitions
        self.records_in = sum(s.num_records for s in removed)
        self.records_out = sum(s.num_records for s in added)
        self.bytes_before = sum(s.size_bytes for s in removed)
        self.bytes_after = sum(s.size_bytes for s in added)
        self.segments_removed = len(removed)
        self.segments_added = len(added)

    def render(self) -> str:
        """One human line per report, as the CLI prints it."""
        if self.status != "ok":
            return f"{self.job:<10} {self.topic:<24} {self.status}: {self.message}"
        return (
            f"{self.job:<10} {self.topic:<24} partitions={self.partitions} "
            f"records {self.records_in:,} -> {self.records_out:,} "
            f"tombstones_dropped={self.tombstones_dropped:,} "
            f"bytes {self.bytes_before:,} -> {self.bytes_after:,} "
            f"segments -{self.segments_removed}/+{self.segments_added} "
            f"in {self.duration_ms / 1000:.2f}s (version {self.table_version})"
            + (f"; {self.message}" if self.message else "")
        )


#: A column per ``JobReport`` field, ``run_id`` first.
HISTORY_SCHEMA = pa.schema(
    [
        pa.field(f.name, pa.string() if f.type == "str" else pa.int64())
        for f in sorted(fields(JobReport), key=lambda f: f.name != "run_id")
    ]
)


def append_history(storage: Storage, reports: list[JobReport]) -> None:
    """Append report rows to the jobs-history Delta table (created on first use)."""
    if not reports:
        return
    rows = pa.Table.from_pylist([asdict(r) for r in reports], schema=HISTORY_SCHEMA)
    write_deltalake(
        storage.delta_uri(HISTORY_TABLE),
        rows,
        mode="append",
        storage_options=storage.delta_storage_options() or None,
    )


def read_history(storage: Storage) -> pa.Table:
    """All report rows so far (empty if no job ever ran)."""
    from deltalake import DeltaTable

    uri = storage.delta_uri(HISTORY_TABLE)
    options = storage.delta_storage_options() or None
    if not DeltaTable.is_deltatable(uri, storage_options=options):
        return HISTORY_SCHEMA.empty_table()
    return DeltaTable(uri, storage_options=options).to_pyarrow_table()
