"""``decode_produce`` reads back exactly what a producer's RecordBatch holds.

Random records (null, empty and large keys and values; headers on some
records only, with null values) are written by aiokafka's per-record
builder, the way a client frames them, and decoded: every key, value, header
and timestamp must come back, and the producer fields of the batch header as
given. A negative timestamp (none given) is read as null: a builder never
writes one, so that batch is written by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.kafka.records import decode_produce

Header = tuple[str, bytes | None]
Record = tuple[int, bytes | None, bytes | None, list[Header]]

payloads = st.one_of(st.none(), st.just(b""), st.binary(max_size=40), st.binary(min_size=300))
headers: st.SearchStrategy[list[Header]] = st.one_of(
    st.just([]),
    st.lists(
        st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20))),
        min_size=1,
        max_size=4,
    ),
)
timestamps = st.integers(1_767_225_600_000, 1_767_225_700_000)
records = st.lists(st.tuples(timestamps, payloads, payloads, headers), min_size=1, max_size=60)


def _batch(given_records: list[Record], producer_id: int, base_sequence: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for offset, (timestamp, key, value, record_headers) in enumerate(given_records):
        builder.append(
            offset=offset,
            timestamp=timestamp,
            key=key,
            value=value,
            headers=record_headers,
        )
    return bytes(builder.build())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.integers(-1, 2**40), st.integers(0, 2**30))
def test_every_record_field_reads_back(
    given_records: list[Record], producer_id: int, base_sequence: int
) -> None:
    decoded = decode_produce(_batch(given_records, producer_id, base_sequence), partition=3)
    table = decoded.rows.table
    assert decoded.num_records == len(given_records)
    assert table.column("partition").to_pylist() == [3] * len(given_records)
    assert table.column("key").to_pylist() == [key for _, key, _, _ in given_records]
    assert table.column("value").to_pylist() == [value for _, _, value, _ in given_records]
    read_headers: list[Any] = table.column("headers").to_pylist()
    assert [[(h["key"], h["value"]) for h in row] for row in read_headers] == [
        list(record_headers) for *_, record_headers in given_records
    ]
    stamps = table.column("timestamp").cast("int64").to_pylist()
    assert stamps == [timestamp for timestamp, *_ in given_records]
    if producer_id >= 0:
        assert (decoded.producer_id, decoded.base_sequence) == (producer_id, base_sequence)
    else:
        assert (decoded.producer_id, decoded.base_sequence) == (None, None)


@pytest.mark.parametrize("timestamp", [-1, -5])
def test_a_negative_timestamp_is_read_as_none_given(timestamp: int) -> None:
    data = bytearray(_batch([(1_767_225_600_000, b"k", b"v", [])], -1, -1))
    # The batch's base timestamp (bytes 27-34) and the one record's delta 0 give it.
    data[27:35] = timestamp.to_bytes(8, "big", signed=True)
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    decoded = decode_produce(bytes(data), partition=0)
    assert decoded.rows.table.column("timestamp").to_pylist() == [None]
