"""Delta checkpoints, written by delta-rs.

Checkpoint files are derived data (a Parquet snapshot of the log at one
version); delta-rs writes them in the exact layout every Delta reader expects,
so lakelog delegates instead of reimplementing the format.
"""

from __future__ import annotations

from deltalake import DeltaTable

from lakelog.errors import KafkaStorageError
from lakelog.storage import Storage


def write_checkpoint(storage: Storage, table_path: str, version: int) -> None:
    """Checkpoint the table at ``version`` (idempotent: rewriting gives the same file)."""
    try:
        table = DeltaTable(
            storage.delta_uri(table_path),
            version=version,
            storage_options=storage.delta_storage_options() or None,
        )
        table.create_checkpoint()
    except Exception as exc:  # delta-rs raises several unrelated types for I/O trouble
        raise KafkaStorageError(
            f"checkpoint of {table_path} at version {version} failed: {exc}"
        ) from exc
