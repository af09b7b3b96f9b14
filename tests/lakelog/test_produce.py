"""Pure logic of preparing a produce batch: the byte sizes max.message.bytes is checked on."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from lakelog.produce_batch import binary_lengths, record_sizes, timestamp_range
from lakelog.records import HEADERS_TYPE, TIMESTAMP_TYPE

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
def test_timestamp_range_agrees_with_the_kernel_on_sliced_chunked_nullable_columns(
    chunks: list[list[int | None]], head: int, tail: int
) -> None:
    column = pa.chunked_array([pa.array(c, pa.int64()).cast(TIMESTAMP_TYPE) for c in chunks])
    sliced = column.slice(min(head, len(column)), max(len(column) - head - tail, 0))
    expected = pc.min_max(sliced.cast(pa.int64()))
    low, high = expected["min"].as_py(), expected["max"].as_py()
    assert timestamp_range(sliced) == (None if low is None else (low, high))


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
