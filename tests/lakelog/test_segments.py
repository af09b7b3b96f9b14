"""Segment encoding: the Parquet layout readers rely on (filters, encodings)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.records import SEGMENT_SCHEMA
from lakelog.segments import ROW_GROUP_ROWS, encode_segment


def _segment(keys: list[bytes | None]) -> pq.FileMetaData:
    n = len(keys)
    table = pa.Table.from_pydict(
        {
            "offset": list(range(n)),
            "timestamp": [1_700_000_000_000] * n,
            "timestamp_type": [0] * n,
            "key": keys,
            "value": [b"v"] * n,
            "headers": [[]] * n,
            "producer_id": [None] * n,
            "sequence": [None] * n,
        },
        schema=SEGMENT_SCHEMA,
    )
    sink = io.BytesIO()
    encode_segment(table, sink)
    return pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata


def _column(meta: pq.FileMetaData, group: int, name: str) -> pq.ColumnChunkMetaData:
    return meta.row_group(group).column(meta.schema.names.index(name))


def test_keyed_segments_carry_a_key_bloom_filter_in_every_row_group() -> None:
    rows = ROW_GROUP_ROWS + 10
    meta = _segment([b"k%d" % (i % 500) for i in range(rows)])
    assert meta.num_row_groups == 2
    for group in range(meta.num_row_groups):
        assert _column(meta, group, "key").bloom_filter_offset is not None
        assert _column(meta, group, "value").bloom_filter_offset is None


def test_no_column_is_dictionary_encoded() -> None:
    meta = _segment([b"hot"] * 1_000)
    for name in meta.schema.names:
        chunk = _column(meta, 0, name)
        assert not chunk.has_dictionary_page, name
        assert not {"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & set(chunk.encodings), name


def test_unkeyed_and_empty_segments_get_no_bloom_filter() -> None:
    assert _column(_segment([None] * 100), 0, "key").bloom_filter_offset is None
    assert _segment([]).num_rows == 0
