"""lakelog's own Delta checkpoints: other Delta readers start from them, and so does lakelog."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from deltalake import DeltaTable

from lakelog import Catalog, Record
from lakelog.delta.actions import AddFile, Metadata, Protocol, RemoveFile
from lakelog.delta.checkpoint import (
    CHECKPOINT_SCHEMA,
    DEFAULT_TOMBSTONE_RETENTION_MS,
    TOMBSTONE_RETENTION_KEY,
    AddRowCache,
    checkpoint_table,
    snapshot_of,
    tombstone_retention_ms,
)
from lakelog.delta.log import DeltaLog, commit_file
from lakelog.delta.state import TableState
from lakelog.storage import Storage, join
from lakelog.topic_log import TopicLog

HOUR_MS = 3_600_000


def _delta_table(storage: Storage, log: TopicLog, version: int | None = None) -> DeltaTable:
    return DeltaTable(
        storage.delta_uri(log.table_path),
        version=version,
        storage_options=storage.delta_storage_options() or None,
    )


def _retire_first_segment(log: TopicLog, partition: int) -> str:
    """Remove the oldest segment of a partition (what retention does); returns its path."""
    path = log.segments(partition)[0].path
    log.committer.commit(
        lambda state: [state.files[path].remove(int(time.time() * 1000))], "DELETE"
    )
    return path


def _drop_commits_up_to(storage: Storage, log: TopicLog, version: int) -> None:
    """Delete the JSON commits a checkpoint covers, so a reader can only start from it."""
    for v in range(version + 1):
        storage.delete(join(log.table_path, "_delta_log", commit_file(v)))


def test_delta_rs_opens_the_table_from_a_lakelog_checkpoint(
    make_catalog: Callable[..., Catalog],
) -> None:
    catalog = make_catalog(checkpoint_interval=6)
    catalog.create_topic("t", 3, {"cleanup.policy": "compact"})
    log = catalog.topic("t")
    for i in range(8):
        log.append([Record(f"v{i}-{j}".encode(), key=f"k{j}".encode()) for j in range(9)])
    log.wait_for_checkpoints()
    storage = catalog.storage
    _drop_commits_up_to(storage, log, 6)

    table = _delta_table(storage, log)
    assert table.version() == log.version
    assert table.metadata().partition_columns == ["partition"]
    assert table.metadata().configuration["lakelog.partitions"] == "3"
    assert table.to_pyarrow_table().num_rows == 72
    for p in range(3):
        assert table.transaction_version(f"lakelog.partition.{p}") == log.high_watermark(p)
    expected = sorted(storage.delta_uri(join(log.table_path, path)) for path in log.live_paths())
    assert sorted(table.file_uris()) == expected


def test_lakelog_reopens_from_its_checkpoint_with_tombstones(
    make_catalog: Callable[..., Catalog],
) -> None:
    catalog = make_catalog(checkpoint_interval=5)
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    for i in range(3):
        log.append([Record(f"{i}".encode(), partition=p) for p in range(2)])
    retired = _retire_first_segment(log, 1)  # version 4
    log.append([Record(b"last", partition=0)])  # version 5: checkpointed
    log.wait_for_checkpoints()
    _drop_commits_up_to(catalog.storage, log, 5)

    reopened = DeltaLog(catalog.storage, log.table_path).load()
    assert reopened.version == 5
    assert set(reopened.files) == log.live_paths()
    assert set(reopened.tombstones) == {retired}
    assert reopened.txns == {"lakelog.partition.0": 4, "lakelog.partition.1": 3}
    fresh = make_catalog().topic("t")
    assert fresh.log_start_offset(1) == 1
    assert [r.value for r in fresh.read(0, 0).to_records("t")] == [b"0", b"1", b"2", b"last"]


def test_a_tombstone_in_the_checkpoint_lets_delta_rs_vacuum_the_file(
    make_catalog: Callable[..., Catalog],
) -> None:
    catalog = make_catalog(checkpoint_interval=4)
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    for i in range(2):
        log.append([Record(f"{i}".encode())])
    retired = _retire_first_segment(log, 0)  # version 3
    log.append([Record(b"2")])  # version 4: checkpointed
    log.wait_for_checkpoints()
    _drop_commits_up_to(catalog.storage, log, 4)

    table = _delta_table(catalog.storage, log)
    stale = table.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False)
    assert [s.rsplit("/", 1)[-1] for s in stale] == [retired.rsplit("/", 1)[-1]]


def _state(files: int, tombstones: list[tuple[str, int]], config: dict[str, str]) -> TableState:
    state = TableState()
    actions: list[object] = [
        Protocol(),
        Metadata("id-1", "t", "{}", ("partition",), {"lakelog.partitions": "1", **config}),
    ]
    actions += [
        AddFile(f"partition=0/{i}.parquet", {"partition": "0"}, 10 + i, 1_000 + i, True, "{}")
        for i in range(files)
    ]
    state.apply(0, actions)  # type: ignore[arg-type]
    state.apply(1, [RemoveFile(path, at) for path, at in tombstones])
    return state


def test_expired_tombstones_are_left_out_of_the_checkpoint() -> None:
    now = 10 * DEFAULT_TOMBSTONE_RETENTION_MS
    old, young = now - DEFAULT_TOMBSTONE_RETENTION_MS - 1, now - 1
    state = _state(3, [("partition=0/0.parquet", old), ("partition=0/1.parquet", young)], {})
    snapshot = snapshot_of(state, now_ms=now)
    assert [t.path for t in snapshot.tombstones] == ["partition=0/1.parquet"]
    assert list(state.tombstones) == ["partition=0/1.parquet"]  # forgotten in memory too
    assert [f.path for f in snapshot.files] == ["partition=0/2.parquet"]


def test_the_table_can_shorten_tombstone_retention() -> None:
    now = 100 * HOUR_MS
    state = _state(
        2,
        [("partition=0/0.parquet", now - 2 * HOUR_MS)],
        {TOMBSTONE_RETENTION_KEY: "interval 1 hour"},
    )
    assert snapshot_of(state, now_ms=now).tombstones == ()


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("interval 1 week", DEFAULT_TOMBSTONE_RETENTION_MS),
        ("interval 2 days", 2 * 24 * HOUR_MS),
        ("INTERVAL 36 HOURS", 36 * HOUR_MS),
        ("90 minutes", 90 * 60_000),
        ("a fortnight", DEFAULT_TOMBSTONE_RETENTION_MS),  # not understood: the safe default
    ],
)
def test_tombstone_retention_is_read_from_the_table_config(text: str, expected_ms: int) -> None:
    metadata = Metadata("id", "t", "{}", (), {TOMBSTONE_RETENTION_KEY: text})
    assert tombstone_retention_ms(metadata) == expected_ms


def test_each_checkpoint_row_holds_exactly_one_action() -> None:
    state = _state(4, [("partition=0/0.parquet", 5)], {})
    state.txns["lakelog.partition.0"] = 7
    table = checkpoint_table(snapshot_of(state, now_ms=6))
    assert table.schema == CHECKPOINT_SCHEMA
    rows = table.to_pylist()
    assert [[k for k, v in row.items() if v is not None] for row in rows] == [
        ["protocol"],
        ["metaData"],
        ["txn"],
        ["add"],
        ["add"],
        ["add"],
        ["remove"],
    ]
    assert rows[2]["txn"]["version"] == 7
    assert dict(rows[3]["add"]["partitionValues"]) == {"partition": "0"}
    assert rows[6]["remove"]["deletionTimestamp"] == 5


def _add(i: int, size: int = 10) -> AddFile:
    return AddFile(f"partition=0/{i}.parquet", {"partition": "0"}, size, 1_000 + i, True, "{}")


def test_cached_add_rows_match_a_fresh_conversion() -> None:
    cache = AddRowCache()
    first = [_add(i) for i in range(5)]
    assert cache.rows(first).to_pylist() == checkpoint_rows(first)
    # Two files retired, two added, one replaced by a new action for the same path.
    second = [first[0], _add(2, size=99), first[4], _add(5), _add(6)]
    assert sorted(cache.rows(second).to_pylist(), key=str) == sorted(
        checkpoint_rows(second), key=str
    )
    assert cache.rows([]).to_pylist() == []


def checkpoint_rows(files: list[AddFile]) -> list[object]:
    state = _state(0, [], {})
    state.files = {f.path: f for f in files}
    rows = checkpoint_table(snapshot_of(state)).column("add").to_pylist()
    return [row for row in rows if row is not None]


def test_lakelog_opens_from_a_checkpoint_delta_rs_wrote(
    make_catalog: Callable[..., Catalog],
) -> None:
    catalog = make_catalog(checkpoint_interval=0)
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    for i in range(4):
        log.append([Record(f"{i}".encode(), key=b"k", partition=i % 2)])
    retired = _retire_first_segment(log, 0)
    _delta_table(catalog.storage, log).create_checkpoint()
    _drop_commits_up_to(catalog.storage, log, log.version)

    state = DeltaLog(catalog.storage, log.table_path).load()
    assert set(state.files) == log.live_paths()
    assert set(state.tombstones) == {retired}
    fresh = make_catalog().topic("t")
    assert [fresh.segments(p) for p in range(2)] == [log.segments(p) for p in range(2)]
    assert [fresh.high_watermark(p) for p in range(2)] == [2, 2]
    assert [r.value for r in fresh.read(1, 0).to_records("t")] == [b"1", b"3"]
