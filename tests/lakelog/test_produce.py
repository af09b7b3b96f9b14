"""Pure logic of preparing a produce batch: the byte sizes max.message.bytes is checked on,
timestamps, and the partition a producer numbered its records for."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog.column_buffers import binary_lengths, int64_range, int64_values
from lakelog.errors import InvalidRequestError
from lakelog.partitioner import make_keyless_partitioner
from lakelog.produce import prepare_batch
from lakelog.produce_batch import record_sizes
from lakelog.records import HEADERS_TYPE, TIMESTAMP_TYPE, Record
from lakelog.topic_config import TopicConfig

VALUES = st.lists(st.one_of(st.none(), st.binary(max_size=12)), max_size=30)


def _kernel_lengths(column: pa.ChunkedArray) -> list[int]:
    lengths: list[int] = pc.fill_null(pc.binary_length(column), 0).to_pylist()
    return lengths


@given(st.lists(VALUES, min_size=1, max_size=4), st.integers(0, 5), st.integers(0, 5))
def test_binary_lengths_agree_with_the_kernel_on_sliced_chunked_nullable_columns(
    chunks: list[list[bytes | None]], head: int, tail: int
) -> None:
    column = pa.chunked_array([pa.array(c, pa.binary()) for c in chunks], pa.binary())
    sliced = column.slice(min(head, len(column)), max(len(column) - head - tail, 0))
    assert binary_lengths(sliced).tolist() == _kernel_lengths(sliced)
    assert binary_lengths(sliced).dtype == np.int64


STAMPS = st.lists(st.one_of(st.none(), st.integers(-(2**62), 2**62)), max_size=30)


@given(st.lists(STAMPS, min_size=1, max_size=4), st.integers(0, 5), st.integers(0, 5))
def test_int64_range_agrees_with_the_kernel_on_sliced_chunked_nullable_columns(
    chunks: list[list[int | None]], head: int, tail: int
) -> None:
    column = pa.chunked_array([pa.array(c, pa.int64()).cast(TIMESTAMP_TYPE) for c in chunks])
    sliced = column.slice(min(head, len(column)), max(len(column) - head - tail, 0))
    expected = pc.min_max(sliced.cast(pa.int64()))
    low, high = expected["min"].as_py(), expected["max"].as_py()
    assert int64_range(sliced) == (None if low is None else (low, high))
    assert int64_range(sliced.cast(pa.int64())) == int64_range(sliced)
    if sliced.null_count == 0:
        assert int64_values(sliced).tolist() == sliced.cast(pa.int64()).to_pylist()


def test_record_sizes_count_key_value_and_header_bytes() -> None:
    headers = pa.array([[{"key": "ab", "value": b"xyz"}], [], None], HEADERS_TYPE)
    table = pa.table(
        {
            "key": pa.array([b"k", None, b"kk"], pa.binary()),
            "value": pa.array([b"vvvv", b"v", None], pa.binary()),
            "headers": headers,
        }
    )
    assert record_sizes(table).tolist() == [1 + 4 + 2 + 3, 1, 2]
    assert record_sizes(table.slice(1)).tolist() == [1, 2]


def _prepared(records: list[Record], **kwargs: object) -> pa.Table:
    prepared = prepare_batch(
        records,
        topic="t",
        num_partitions=3,
        config=TopicConfig(),
        keyless=make_keyless_partitioner("sticky"),
        now_ms=NOW_MS,
        **kwargs,  # type: ignore[arg-type]
    )
    return prepared.table


NOW_MS = 1_700_000_000_000


def test_client_timestamps_are_kept_and_missing_ones_stamped_with_the_broker_clock() -> None:
    every = _prepared(
        [Record(b"a", partition=0, timestamp_ms=5), Record(b"b", partition=1, timestamp_ms=7)]
    )
    assert every.column("timestamp").cast(pa.int64()).to_pylist() == [5, 7]
    some = _prepared([Record(b"a", partition=0, timestamp_ms=5), Record(b"b", partition=1)])
    assert some.column("timestamp").cast(pa.int64()).to_pylist() == [5, NOW_MS]


def test_records_numbered_for_one_partition_must_all_be_in_it() -> None:
    numbered = {"producer_id": 7, "base_sequence": 0, "sequence_partition": 1}
    table = _prepared([Record(b"a", partition=1), Record(b"b", partition=1)], **numbered)
    assert table.column("sequence").to_pylist() == [0, 1]
    with pytest.raises(InvalidRequestError, match="numbered for partition 1 name another"):
        _prepared([Record(b"a", partition=1), Record(b"b", partition=2)], **numbered)
