"""The per-producer memory of recent batches (pure logic, no storage)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakelog.append.producer_state import ProducerState
from lakelog.append.result import AppendResult, partition_batches
from lakelog.produce import PreparedBatch


def _batch(
    producer_id: int | None, base_sequence: int | None, count: int, partition: int | None = None
) -> PreparedBatch:
    table = pa.table({"partition": pa.array([partition or 0] * count, pa.int32())})
    return PreparedBatch(table, producer_id, base_sequence, sequence_partition=partition)


def _result(first_offset: int, count: int, version: int = 3) -> AppendResult:
    partitions = np.zeros(count, np.int64)
    offsets = np.arange(first_offset, first_offset + count, dtype=np.int64)
    return AppendResult(
        partitions, offsets, offsets * 10, partition_batches(partitions, offsets), version
    )


def test_a_retried_batch_gets_its_original_offsets_as_a_duplicate() -> None:
    state = ProducerState()
    state.remember(_batch(7, 0, 3), _result(100, 3))
    found = state.original(_batch(7, 0, 3))
    assert found is not None and found.duplicate
    assert (found.offsets, found.timestamps_ms, found.version) == (
        [100, 101, 102],
        [1000, 1010, 1020],
        3,
    )


def test_only_the_same_batch_matches() -> None:
    state = ProducerState()
    state.remember(_batch(7, 0, 3), _result(100, 3))
    assert state.original(_batch(7, 0, 2)) is None  # other records
    assert state.original(_batch(7, 1, 3)) is None
    assert state.original(_batch(8, 0, 3)) is None  # another producer
    assert state.original(_batch(7, 0, 3, partition=1)) is None  # another sequence stream


def test_batches_without_a_producer_are_not_remembered() -> None:
    state = ProducerState()
    state.remember(_batch(None, None, 3), _result(0, 3))
    assert state.records == 0
    assert state.original(_batch(None, None, 3)) is None


def test_each_stream_keeps_its_last_batches() -> None:
    state = ProducerState(batches_per_stream=5)
    for i in range(8):
        state.remember(_batch(1, 10 * i, 10), _result(10 * i, 10))
    assert state.records == 50
    assert [state.original(_batch(1, 10 * i, 10)) is not None for i in range(8)] == [
        False,
        False,
        False,
        True,
        True,
        True,
        True,
        True,
    ]


def test_the_least_recently_written_streams_go_first_beyond_the_record_limit() -> None:
    state = ProducerState(batches_per_stream=5, max_records=25)
    state.remember(_batch(1, 0, 10), _result(0, 10))
    state.remember(_batch(2, 0, 10), _result(10, 10))
    state.remember(_batch(1, 10, 1), _result(20, 1))  # producer 1 wrote again
    state.remember(_batch(3, 0, 10), _result(21, 10))  # 31 records: one stream must go
    assert state.records == 21
    assert state.original(_batch(2, 0, 10)) is None
    assert state.original(_batch(1, 0, 10)) is not None
    assert state.original(_batch(3, 0, 10)) is not None


def test_one_stream_above_the_limit_is_still_kept() -> None:
    state = ProducerState(batches_per_stream=5, max_records=4)
    state.remember(_batch(1, 0, 10), _result(0, 10))
    assert state.original(_batch(1, 0, 10)) is not None
