"""Job reports: what a maintenance run did, printed at the end and kept in a Delta table.

Every run appends one row per topic to ``_jobs/history`` in the storage root,
so operators (and notebooks) can see compaction and retention over time with
the same tools they use for the topics themselves.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field

import pyarrow as pa
from deltalake import write_deltalake

from lakelog.storage import Storage

HISTORY_TABLE = "_jobs/history"

HISTORY_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("job", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("status", pa.string()),
        pa.field("message", pa.string()),
        pa.field("started_ms", pa.int64()),
        pa.field("duration_ms", pa.int64()),
        pa.field("partitions", pa.int64()),
        pa.field("records_in", pa.int64()),
        pa.field("records_out", pa.int64()),
        pa.field("tombstones_dropped", pa.int64()),
        pa.field("bytes_before", pa.int64()),
        pa.field("bytes_after", pa.int64()),
        pa.field("segments_removed", pa.int64()),
        pa.field("segments_added", pa.int64()),
        pa.field("table_version", pa.int64()),
    ]
)


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
