"""Delta checkpoints, written from the state a writer already holds in memory.

delta-rs can write one, but first rebuilds the whole snapshot from storage, and
in a broker that rebuild held the GIL long enough, once a second under load, to
set the produce tail latency; the writer's ``TableState`` already is that
snapshot. The columns are delta-rs's (one non-null action per row), every field
nullable as Spark writes them (a field cannot be required inside the null action
columns of the other rows).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.delta.actions import AddFile, Metadata, Protocol, RemoveFile
from lakelog.delta.state import TableState
from lakelog.errors import KafkaStorageError
from lakelog.storage import Storage, join

log = logging.getLogger(__name__)

LAST_CHECKPOINT = "_last_checkpoint"
#: Delta's default ``delta.deletedFileRetentionDuration``.
DEFAULT_TOMBSTONE_RETENTION_MS = 7 * 24 * 3600 * 1000
TOMBSTONE_RETENTION_KEY = "delta.deletedFileRetentionDuration"

_UNIT_MS = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 7 * 86_400_000,
}
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+)\s+([a-z]+?)s?\s*$", re.IGNORECASE)


def _fields(**types: pa.DataType) -> list[pa.Field]:
    """Struct fields in keyword order (all nullable, as explained above)."""
    return [pa.field(name, kind) for name, kind in types.items()]


_STR = pa.string()
_MAP = pa.map_(pa.string(), pa.string())
_STRINGS = pa.list_(pa.field("element", pa.string()))
_DV = pa.struct(
    _fields(
        storageType=_STR,
        pathOrInlineDv=_STR,
        offset=pa.int32(),
        sizeInBytes=pa.int32(),
        cardinality=pa.int64(),
    )
)
#: The fields add and remove actions end with, in delta-rs's column order.
_FILE_TAIL: dict[str, pa.DataType] = {
    "stats": _STR,
    "tags": _MAP,
    "deletionVector": _DV,
    "baseRowId": pa.int64(),
    "defaultRowCommitVersion": pa.int64(),
}
_ADD = _fields(
    path=_STR,
    partitionValues=_MAP,
    size=pa.int64(),
    modificationTime=pa.int64(),
    dataChange=pa.bool_(),
    **_FILE_TAIL,
    clusteringProvider=_STR,
)
_REMOVE = _fields(
    path=_STR,
    deletionTimestamp=pa.int64(),
    dataChange=pa.bool_(),
    extendedFileMetadata=pa.bool_(),
    partitionValues=_MAP,
    size=pa.int64(),
    **_FILE_TAIL,
)
_FORMAT = pa.struct(_fields(provider=_STR, options=_MAP))
_METADATA = _fields(
    id=_STR,
    name=_STR,
    description=_STR,
    format=_FORMAT,
    schemaString=_STR,
    partitionColumns=_STRINGS,
    createdTime=pa.int64(),
    configuration=_MAP,
)
_PROTOCOL = _fields(
    minReaderVersion=pa.int32(),
    minWriterVersion=pa.int32(),
    readerFeatures=_STRINGS,
    writerFeatures=_STRINGS,
)
_TXN = _fields(
    appId=_STR,
    version=pa.int64(),
    lastUpdated=pa.int64(),
)
_DOMAIN = _fields(
    domain=_STR,
    configuration=_STR,
    removed=pa.bool_(),
)
_SIDECAR = _fields(
    path=_STR,
    sizeInBytes=pa.int64(),
    modificationTime=pa.int64(),
    tags=_MAP,
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        pa.field("add", pa.struct(_ADD)),
        pa.field("remove", pa.struct(_REMOVE)),
        pa.field("metaData", pa.struct(_METADATA)),
        pa.field("protocol", pa.struct(_PROTOCOL)),
        pa.field("txn", pa.struct(_TXN)),
        pa.field("domainMetadata", pa.struct(_DOMAIN)),
        pa.field("sidecar", pa.struct(_SIDECAR)),
    ]
)


@dataclass(frozen=True)
class CheckpointSnapshot:
    """What a checkpoint of one version holds; immutable, so it can be written off-thread."""

    version: int
    protocol: Protocol
    metadata: Metadata
    files: tuple[AddFile, ...]
    txns: tuple[tuple[str, int], ...]
    tombstones: tuple[RemoveFile, ...]


def tombstone_retention_ms(metadata: Metadata) -> int:
    """The table's ``delta.deletedFileRetentionDuration`` ("interval 1 week") in ms."""
    text = metadata.configuration.get(TOMBSTONE_RETENTION_KEY)
    if text is None:
        return DEFAULT_TOMBSTONE_RETENTION_MS
    match = _INTERVAL.match(text)
    unit = match and _UNIT_MS.get(match.group(2).lower())
    if not match or unit is None:
        log.warning(
            "%s=%r is not an interval lakelog understands; keeping tombstones for 1 week",
            TOMBSTONE_RETENTION_KEY,
            text,
        )
        return DEFAULT_TOMBSTONE_RETENTION_MS
    return int(match.group(1)) * unit


def snapshot_of(state: TableState, now_ms: int | None = None) -> CheckpointSnapshot:
    """Freeze ``state`` for a checkpoint, forgetting tombstones past their retention.

    The caller holds whatever lock guards ``state``; this only copies references.
    """
    if state.protocol is None or state.metadata is None:
        raise ValueError(f"state at version {state.version} has no protocol or metadata")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    state.drop_tombstones_before(now - tombstone_retention_ms(state.metadata))
    return CheckpointSnapshot(
        version=state.version,
        protocol=state.protocol,
        metadata=state.metadata,
        files=tuple(state.files.values()),
        txns=tuple(state.txns.items()),
        tombstones=tuple(state.tombstones.values()),
    )


class AddRowCache:
    """The Arrow add rows of the files in the last checkpoint, kept for the next one.

    Only the last interval's files are new; converting all of them each time held the
    GIL about 13 ms per 8,000 files, delaying the event loop by tens of ms once a second.
    Not thread-safe: one per table, used by its checkpoint thread.
    """

    def __init__(self) -> None:
        self._rows: pa.StructArray = _add_rows(())
        self._row_of: dict[str, tuple[int, AddFile]] = {}

    def rows(self, files: Sequence[AddFile]) -> pa.StructArray:
        """Add rows for ``files``: cached rows of unchanged files, then the new ones."""
        kept: list[int] = []
        kept_files: list[AddFile] = []
        new: list[AddFile] = []
        row_of = self._row_of
        for f in files:
            hit = row_of.get(f.path)
            if hit is not None and hit[1] is f:  # the very same action: same row
                kept.append(hit[0])
                kept_files.append(f)
            else:
                new.append(f)
        old = self._rows.take(pa.array(kept, pa.int64()))
        rows = pa.concat_arrays([old, _add_rows(new)]) if new else old
        self._rows = rows
        self._row_of = {f.path: (i, f) for i, f in enumerate(kept_files + new)}
        return rows


def checkpoint_table(
    snapshot: CheckpointSnapshot, add_rows: pa.StructArray | None = None
) -> pa.Table:
    """The checkpoint's rows: protocol, metadata, app transactions, files, tombstones.

    ``add_rows`` are the files' rows when the caller already has them (``AddRowCache``).
    """
    blocks = [
        ("protocol", _protocol_rows(snapshot.protocol)),
        ("metaData", _metadata_rows(snapshot.metadata)),
        ("txn", _txn_rows(snapshot.txns)),
        ("add", _add_rows(snapshot.files) if add_rows is None else add_rows),
        ("remove", _remove_rows(snapshot.tombstones)),
    ]
    total = sum(len(rows) for _, rows in blocks)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    start = 0
    for name, rows in blocks:
        kind = CHECKPOINT_SCHEMA.field(name).type
        chunks = [pa.nulls(start, kind), rows, pa.nulls(total - start - len(rows), kind)]
        columns[name] = pa.chunked_array([c for c in chunks if len(c)], kind)
        start += len(rows)
    for name in ("domainMetadata", "sidecar"):
        columns[name] = pa.nulls(total, CHECKPOINT_SCHEMA.field(name).type)
    return pa.table([columns[f.name] for f in CHECKPOINT_SCHEMA], schema=CHECKPOINT_SCHEMA)


def checkpoint_file(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def write_checkpoint(
    storage: Storage,
    log_path: str,
    snapshot: CheckpointSnapshot,
    cache: AddRowCache | None = None,
) -> None:
    """Write ``<version>.checkpoint.parquet``, then point ``_last_checkpoint`` at it, as plain
    overwrites: two writers of one version write equivalent files."""
    table = checkpoint_table(snapshot, cache.rows(snapshot.files) if cache else None)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    data = sink.getvalue().to_pybytes()
    pointer = {
        "version": snapshot.version,
        "size": table.num_rows,
        "sizeInBytes": len(data),
        "numOfAddFiles": len(snapshot.files),
    }
    try:
        storage.put(join(log_path, checkpoint_file(snapshot.version)), data)
        storage.put(join(log_path, LAST_CHECKPOINT), json.dumps(pointer).encode())
    except OSError as exc:
        raise KafkaStorageError(
            f"checkpoint of {log_path} at version {snapshot.version} failed: {exc}"
        ) from exc


# -- one block of rows per action kind ----------------------------------------


def _struct(fields: list[pa.Field], n: int, **columns: pa.Array) -> pa.StructArray:
    """``n`` rows of a struct of ``fields``; the fields not given are null."""
    arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in fields]
    return pa.StructArray.from_arrays(arrays, fields=fields)


def _maps(dicts: Iterable[Mapping[str, str | None] | None]) -> pa.MapArray:
    """A map column from dicts (None becomes an empty map) without per-row conversion."""
    offsets = [0]
    keys: list[str] = []
    values: list[str | None] = []
    for d in dicts:
        if d:
            keys.extend(d)
            values.extend(d.values())
        offsets.append(len(keys))
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.array(keys, _STR), pa.array(values, _STR)
    )


def _add_rows(files: Sequence[AddFile]) -> pa.StructArray:
    return _struct(
        _ADD,
        len(files),
        path=pa.array([f.path for f in files], _STR),
        partitionValues=_maps(f.partition_values for f in files),
        size=pa.array([f.size for f in files], pa.int64()),
        modificationTime=pa.array([f.modification_time for f in files], pa.int64()),
        dataChange=pa.array([f.data_change for f in files], pa.bool_()),
        stats=pa.array([f.stats for f in files], _STR),
        tags=_maps(f.tags for f in files),
    )


def _remove_rows(tombstones: Sequence[RemoveFile]) -> pa.StructArray:
    return _struct(
        _REMOVE,
        len(tombstones),
        path=pa.array([r.path for r in tombstones], _STR),
        deletionTimestamp=pa.array([r.deletion_timestamp for r in tombstones], pa.int64()),
        dataChange=pa.array([r.data_change for r in tombstones], pa.bool_()),
        extendedFileMetadata=pa.array(
            [r.partition_values is not None for r in tombstones], pa.bool_()
        ),
        partitionValues=_maps(r.partition_values for r in tombstones),
        size=pa.array([r.size for r in tombstones], pa.int64()),
        tags=_maps(r.tags for r in tombstones),
    )


def _metadata_rows(metadata: Metadata) -> pa.StructArray:
    return _struct(
        _METADATA,
        1,
        id=pa.array([metadata.table_id], _STR),
        name=pa.array([metadata.name], _STR),
        description=pa.array([metadata.description], _STR),
        format=_struct(list(_FORMAT), 1, provider=pa.array(["parquet"], _STR), options=_maps([{}])),
        schemaString=pa.array([metadata.schema_string], _STR),
        partitionColumns=pa.array([list(metadata.partition_columns)], _STRINGS),
        createdTime=pa.array([metadata.created_time], pa.int64()),
        configuration=_maps([metadata.configuration]),
    )


def _protocol_rows(protocol: Protocol) -> pa.StructArray:
    def features(values: tuple[str, ...] | None) -> pa.Array:
        return pa.array([None if values is None else list(values)], _STRINGS)

    return _struct(
        _PROTOCOL,
        1,
        minReaderVersion=pa.array([protocol.min_reader_version], pa.int32()),
        minWriterVersion=pa.array([protocol.min_writer_version], pa.int32()),
        readerFeatures=features(protocol.reader_features),
        writerFeatures=features(protocol.writer_features),
    )


def _txn_rows(txns: Sequence[tuple[str, int]]) -> pa.StructArray:
    return _struct(
        _TXN,
        len(txns),
        appId=pa.array([app for app, _ in txns], _STR),
        version=pa.array([version for _, version in txns], pa.int64()),
    )
