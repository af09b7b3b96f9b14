"""Append and read by offset on a real root (local directory and the S3-protocol server)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakelog import Catalog, Record
from lakelog.errors import (
    InvalidRecordError,
    InvalidRequestError,
    InvalidTimestampError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from lakelog.partitioner import partition_for_key
from lakelog.records import CREATE_TIME, LOG_APPEND_TIME
from tests.fixtures.roots import RootSpec


def test_batch_is_one_commit_with_one_segment_per_partition(catalog: Catalog) -> None:
    catalog.create_topic("t", 3)
    log = catalog.topic("t")
    records = [Record(f"v{i}".encode(), partition=i % 3) for i in range(30)]
    version = log.version
    result = log.append(records)
    assert result.version == version + 1
    assert result.partitions == [i % 3 for i in range(30)]
    assert result.offsets == [i // 3 for i in range(30)]
    assert sorted((b.partition, b.base_offset, b.count) for b in result.batches) == [
        (0, 0, 10),
        (1, 0, 10),
        (2, 0, 10),
    ]
    assert [len(log.segments(p)) for p in range(3)] == [1, 1, 1]
    second = log.append(records[:3])
    assert second.offsets == [10, 10, 10]


def test_round_trip_of_every_field(catalog: Catalog) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    sent = [
        Record(b"plain"),
        Record(None, key=b"deleted-key"),
        Record(b"", key=b""),
        Record(b"h", headers=[("trace", b"abc"), ("empty", None)], timestamp_ms=1_600_000_000_123),
        Record(bytes(range(256)) * 10, key=b"\x00\xff"),
    ]
    log.append(sent)
    got = log.read(0, 0).to_records("t")
    assert [r.offset for r in got] == [0, 1, 2, 3, 4]
    assert [(r.key, r.value) for r in got] == [(s.key, s.value) for s in sent]
    assert got[3].headers == [("trace", b"abc"), ("empty", None)]
    assert got[3].timestamp_ms == 1_600_000_000_123
    assert all(r.timestamp_type == CREATE_TIME for r in got)
    assert abs(got[0].timestamp_ms - time.time() * 1000) < 60_000


def test_log_append_time_overrides_producer_timestamp(catalog: Catalog) -> None:
    catalog.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"})
    log = catalog.topic("t")
    before = int(time.time() * 1000)
    result = log.append([Record(b"x", timestamp_ms=5)])
    got = log.read(0, 0).to_records("t")[0]
    assert got.timestamp_type == LOG_APPEND_TIME
    assert got.timestamp_ms >= before
    assert result.timestamps_ms == [got.timestamp_ms]


def test_keyed_records_use_kafkas_partitioner(catalog: Catalog) -> None:
    catalog.create_topic("t", 6)
    log = catalog.topic("t")
    keys = [f"user-{i}".encode() for i in range(50)]
    result = log.append([Record(b"v", key=k) for k in keys])
    assert result.partitions == [partition_for_key(k, 6) for k in keys]


def test_keyless_records_stick_to_one_partition_per_batch(catalog: Catalog) -> None:
    catalog.create_topic("t", 4)
    log = catalog.topic("t")
    chosen = set()
    for _ in range(12):
        result = log.append([Record(b"v") for _ in range(5)])
        assert len(set(result.partitions)) == 1
        chosen.add(result.partitions[0])
    assert len(chosen) > 1


def test_arrow_bulk_append(catalog: Catalog) -> None:
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    table = pa.table(
        {
            "partition": pa.array([0, 1, 0], pa.int32()),
            "value": pa.array([b"a", b"b", b"c"]),
        }
    )
    result = log.append(table)
    assert result.offsets == [0, 0, 1]
    assert [r.value for r in log.read(0, 0).to_records("t")] == [b"a", b"c"]


def test_read_limits_and_positions(catalog: Catalog) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    for batch in range(5):
        log.append([Record(f"{batch}-{i}".encode().ljust(100, b".")) for i in range(20)])
    assert log.high_watermark(0) == 100
    assert log.log_start_offset(0) == 0
    fetched = log.read(0, 17, max_records=30)
    assert fetched.records.column("offset").to_pylist() == list(range(17, 47))
    assert fetched.next_offset == 47
    by_bytes = log.read(0, 0, max_bytes=350)
    assert by_bytes.records.num_rows == 3
    assert log.read(0, 0, max_bytes=1).records.num_rows == 1  # always at least one record
    at_end = log.read(0, 100)
    assert at_end.records.num_rows == 0 and at_end.next_offset == 100
    whole = log.read(0, 0, max_records=1000).records.column("offset").to_pylist()
    assert whole == list(range(100))


@pytest.mark.parametrize("offset", [-1, 101, 10**12])
def test_out_of_range(catalog: Catalog, offset: int) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    log.append([Record(b"v") for _ in range(101)])
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(0, offset + (1 if offset == 101 else 0))
    assert info.value.code == 1
    assert "0..101" in info.value.message


def test_offset_for_timestamp(catalog: Catalog) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    log.append([Record(b"a", timestamp_ms=1000), Record(b"b", timestamp_ms=2000)])
    log.append([Record(b"c", timestamp_ms=1500), Record(b"d", timestamp_ms=3000)])
    assert log.offset_for_timestamp(0, 0) == (0, 1000)
    assert log.offset_for_timestamp(0, 1001) == (1, 2000)
    assert log.offset_for_timestamp(0, 2500) == (3, 3000)
    assert log.offset_for_timestamp(0, 3001) is None


@pytest.mark.parametrize(
    ("configs", "records", "error"),
    [
        ({}, [Record(b"x", partition=1)], UnknownTopicOrPartitionError),
        ({}, [Record(b"x", partition=-1)], UnknownTopicOrPartitionError),
        ({"max.message.bytes": "10"}, [Record(b"ok"), Record(b"y" * 11)], MessageTooLargeError),
        (
            {"max.message.bytes": "10"},
            [Record(b"", headers=[("hhhhh", b"123456")])],
            MessageTooLargeError,
        ),
        ({"cleanup.policy": "compact"}, [Record(b"v", key=b"k"), Record(b"v")], InvalidRecordError),
        ({}, [Record(b"v", timestamp_ms=-5)], InvalidTimestampError),
        ({}, [], InvalidRequestError),
    ],
)
def test_bad_appends_change_nothing(
    catalog: Catalog,
    root: RootSpec,
    configs: dict[str, str],
    records: list[Record],
    error: type[Exception],
) -> None:
    catalog.create_topic("t", 1, configs)
    log = catalog.topic("t")
    files_before = sorted(i.path for i in root.open().walk_files("topics"))
    with pytest.raises(error) as info:
        log.append(records)
    assert sorted(i.path for i in root.open().walk_files("topics")) == files_before
    assert log.high_watermark(0) == 0
    if records:  # the error names the record at fault: the last one in every case here
        assert getattr(info.value, "details", {}).get("record_index") == len(records) - 1


def test_arrow_with_wrong_columns_is_refused(catalog: Catalog) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    with pytest.raises(InvalidRecordError, match="unknown record columns: colour"):
        log.append(pa.table({"value": [b"x"], "colour": ["red"]}))
    with pytest.raises(InvalidRecordError, match="schema"):
        log.append(pa.table({"value": [b"x"], "partition": ["zero"]}))


def test_other_writer_commits_are_seen_after_refresh(make_catalog: Callable[..., Catalog]) -> None:
    writer, reader = make_catalog(), make_catalog()
    writer.create_topic("t", 1)
    reader_log = reader.topic("t")
    writer.topic("t").append([Record(b"a")])
    assert reader_log.high_watermark(0) == 0
    assert reader_log.refresh()
    assert reader_log.high_watermark(0) == 1
    assert not reader_log.refresh()


def test_two_writers_in_one_process_interleave_densely(
    make_catalog: Callable[..., Catalog],
) -> None:
    a, b = make_catalog(), make_catalog()
    a.create_topic("t", 2)
    log_a, log_b = a.topic("t"), b.topic("t")
    offsets = []
    for i in range(6):
        log = log_a if i % 2 else log_b
        offsets += log.append([Record(b"x", partition=0), Record(b"y", partition=1)]).offsets
    assert sorted(offsets[0::2]) == list(range(6))
    assert sorted(offsets[1::2]) == list(range(6))


def test_tables_are_standard_delta(catalog: Catalog, root: RootSpec) -> None:
    """delta-rs reads exactly what the log returns: the tables are plain Delta."""
    catalog.create_topic("t", 2, {"retention.ms": "123"})
    log = catalog.topic("t")
    log.append([Record(f"{i}".encode(), key=b"k", partition=i % 2) for i in range(10)])
    catalog.alter_topic_configs("t", {"segment.ms": "1000"})
    log.append([Record(b"last", partition=1)])
    storage = root.open()
    table = DeltaTable(
        storage.delta_uri(log.table_path), storage_options=storage.delta_storage_options() or None
    )
    assert table.version() == log.version
    assert table.metadata().partition_columns == ["partition"]
    rows = sorted(
        (r["partition"], r["offset"], r["value"]) for r in table.to_pyarrow_table().to_pylist()
    )
    ours = sorted((p, r.offset, r.value) for p in range(2) for r in log.read(p, 0).to_records("t"))
    assert rows == ours
    assert table.transaction_version("lakelog.partition.1") == 6


def test_checkpoints_keep_open_cost_flat(make_catalog: Callable[..., Catalog]) -> None:
    catalog = make_catalog(checkpoint_interval=5)
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    for i in range(12):
        log.append([Record(f"{i}".encode(), partition=i % 2)])
    log.wait_for_checkpoints()
    storage = catalog.storage
    names = {i.path.rsplit("/", 1)[-1] for i in storage.list_dir(f"{log.table_path}/_delta_log")}
    assert f"{10:020d}.checkpoint.parquet" in names
    reopened = make_catalog().topic("t")
    assert reopened.version == log.version
    assert [reopened.high_watermark(p) for p in range(2)] == [6, 6]
    assert reopened.segments(0) == log.segments(0)
    assert [r.value for r in reopened.read(1, 0).to_records("t")] == [
        f"{i}".encode() for i in range(1, 12, 2)
    ]


def test_timestamp_beyond_year_9999_is_refused(catalog: Catalog) -> None:
    catalog.create_topic("t", 1)
    with pytest.raises(InvalidTimestampError, match="9999"):
        catalog.topic("t").append([Record(b"v", timestamp_ms=2**62)])
    assert catalog.topic("t").high_watermark(0) == 0
