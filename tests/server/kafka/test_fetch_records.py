"""The column-wise Fetch encoder writes the batches aiokafka's per-record builder wrote.

Random segment rows (null, empty and large keys and values; headers with
null values; offset gaps; both timestamp types in runs; negative and large
timestamps; tables in several chunks and sliced) are encoded by
``encode_fetch`` and by the per-record reference encoder. The bytes must be
equal, and both must read back, with aiokafka's and kafka-python's readers,
as the rows given: every batch field and every record field. The one
difference: a batch whose first record has timestamp -1, which aiokafka's
builder takes for "no timestamp yet" (it bases the batch on the next
record's and those records read back with that); the column-wise encoder
keeps every record's own timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from aiokafka.record.memory_records import MemoryRecords as AiokafkaRecords
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords as KafkaPythonRecords

from benchmarks.per_record_fetch_encoder import encode_fetch_per_record
from lakelog.records import CREATE_TIME, LOG_APPEND_TIME, SEGMENT_SCHEMA
from server.kafka.records import encode_fetch

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Row:
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] | None


def _large(size: int, byte: int) -> bytes:
    return bytes([byte]) * size


payloads = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(max_size=40),
    st.builds(_large, st.integers(100, 70_000), st.integers(0, 255)),
)
headers = st.one_of(
    st.none(),
    st.lists(st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20)))),
)
# Deltas between any two timestamps stay inside int64, as Kafka's varlong needs.
timestamps = st.one_of(
    st.integers(-(2**62), 2**62 - 1),
    st.integers(1_767_225_600_000, 1_767_225_700_000),
    st.integers(-1, 1),
)


@st.composite
def segment_rows(draw: st.DrawFn) -> list[Row]:
    count = draw(st.integers(1, 40))
    offset = draw(st.integers(0, 2**40))
    timestamp_type = draw(st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]))
    rows = []
    for _ in range(count):
        if draw(st.integers(0, 5)) == 0:  # a new run of the other timestamp type
            timestamp_type = LOG_APPEND_TIME - timestamp_type
        rows.append(
            Row(
                offset,
                draw(timestamps),
                timestamp_type,
                draw(payloads),
                draw(payloads),
                draw(headers),
            )
        )
        offset += draw(st.one_of(st.just(1), st.integers(1, 100_000)))  # compaction's gaps
    return rows


def table_of(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "offset": [r.offset for r in rows],
            "timestamp": pa.array([r.timestamp for r in rows], pa.int64()).cast(
                SEGMENT_SCHEMA.field("timestamp").type
            ),
            "timestamp_type": [r.timestamp_type for r in rows],
            "key": [r.key for r in rows],
            "value": [r.value for r in rows],
            "headers": [
                None if r.headers is None else [{"key": k, "value": v} for k, v in r.headers]
                for r in rows
            ],
            "producer_id": [None] * len(rows),
            "sequence": [None] * len(rows),
        },
        schema=SEGMENT_SCHEMA,
    )


def as_stored(rows: list[Row], cut: int, lead: int) -> pa.Table:
    """The rows as a segment read may hold them: in two chunks, sliced out of a larger table."""
    padding = rows[:lead]
    table = pa.concat_tables([table_of(padding + rows[:cut]), table_of(rows[cut:])])
    return table.slice(len(padding))


def read_back(library: Any, data: bytes) -> list[tuple[Any, ...]]:
    """Every batch's fields, then each record's, as one flat list of tuples."""
    found: list[tuple[Any, ...]] = []
    records = library(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        found.append(
            (
                "batch",
                batch.base_offset,
                batch.magic,
                batch.attributes,
                batch.timestamp_type,
                batch.last_offset_delta,
                batch.first_timestamp,
                batch.max_timestamp,
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                batch.is_transactional,
                batch.is_control_batch,
            )
        )
        found.extend(
            (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, list(r.headers))
            for r in batch
        )
    return found


def expected(rows: list[Row]) -> list[tuple[Any, ...]]:
    """What a consumer must read: one batch per timestamp-type run, every record as given."""
    found: list[tuple[Any, ...]] = []
    start = 0
    while start < len(rows):
        end = start
        while end < len(rows) and rows[end].timestamp_type == rows[start].timestamp_type:
            end += 1
        run = rows[start:end]
        kind = run[0].timestamp_type
        newest = max(r.timestamp for r in run)
        found.append(
            (
                "batch",
                run[0].offset,
                2,
                0x08 if kind == LOG_APPEND_TIME else 0,
                kind,
                run[-1].offset - run[0].offset,
                run[0].timestamp,
                newest,
                -1,
                -1,
                -1,
                False,
                False,
            )
        )
        # Readers give every record of a LogAppendTime batch the batch's max timestamp.
        found.extend(
            (
                r.offset,
                newest if kind == LOG_APPEND_TIME else r.timestamp,
                kind,
                r.key,
                r.value,
                list(r.headers or []),
            )
            for r in run
        )
        start = end
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=segment_rows(), data=st.data())
def test_column_wise_batches_equal_the_per_record_builders(rows: list[Row], data: Any) -> None:
    table = as_stored(
        rows,
        cut=data.draw(st.integers(0, len(rows)), label="chunk cut"),
        lead=data.draw(st.integers(0, len(rows)), label="rows sliced off ahead"),
    )
    new = encode_fetch(table)
    reference = encode_fetch_per_record(table)
    want = expected(rows)
    assert read_back(AiokafkaRecords, new) == want
    assert read_back(KafkaPythonRecords, new) == want
    if not any(b[0] == "batch" and b[6] == -1 for b in want):
        assert read_back(AiokafkaRecords, reference) == want
        assert new == reference
    # else aiokafka's builder takes a first timestamp of -1 for "none yet": it bases the batch
    # on the next record's timestamp and those records read back with it, not with their own.


def test_no_rows_no_bytes() -> None:
    assert encode_fetch(SEGMENT_SCHEMA.empty_table()) == b""


@pytest.mark.parametrize("chunks", [1, 3])
def test_headers_in_some_rows_only(chunks: int) -> None:
    """Rows without headers between rows with them: the slower header path, row by row."""
    each: list[list[Header] | None] = [
        None,
        [("a", b"1"), ("b", None)],
        [],
        None,
        [("", b"")],
        [("é", b"\xff" * 300)],
    ]
    rows = [
        Row(10 + i, 1_767_225_600_000 + i, CREATE_TIME, b"k", b"v" * i, h)
        for i, h in enumerate(each)
    ]
    size = -(-len(rows) // chunks)
    table = pa.concat_tables([table_of(rows[i : i + size]) for i in range(0, len(rows), size)])
    data = encode_fetch(table)
    assert data == encode_fetch_per_record(table)
    assert read_back(AiokafkaRecords, data) == expected(rows)
