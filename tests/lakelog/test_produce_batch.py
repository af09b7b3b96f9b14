"""The produce batch: how every front-end's rows are built, and the rules a topic checks on them.

Pure logic: no storage, no broker.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakelog.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    LakelogError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
)
from lakelog.produce_batch import MAX_TIMESTAMP_MS, ProduceBatch
from lakelog.records import HEADERS_TYPE, PRODUCE_SCHEMA, Record
from lakelog.topic_config import TopicConfig

PLAIN = TopicConfig({"max.message.bytes": "10"})
COMPACTED = TopicConfig({"cleanup.policy": "compact", "max.message.bytes": "10"})


def _batch(**columns: object) -> ProduceBatch:
    return ProduceBatch.from_columns(**columns)  # type: ignore[arg-type]


def test_arrow_columns_of_the_schema_type_are_taken_without_a_copy() -> None:
    values = pa.array([b"a", b"bb"], pa.binary())
    batch = ProduceBatch.from_columns(value=values)
    assert batch.table.schema.equals(PRODUCE_SCHEMA)
    stored = batch.column("value").chunk(0)
    assert [b.address for b in stored.buffers() if b] == [b.address for b in values.buffers() if b]
    assert batch.column("key").null_count == 2


def test_records_lists_and_outside_tables_make_the_same_batch() -> None:
    records = [
        Record(b"v1", key=b"k1", partition=1, timestamp_ms=5, headers=[("h", b"x")]),
        Record(None, key=b"k2"),
    ]
    from_records = ProduceBatch.from_records(records)
    from_lists = ProduceBatch.from_columns(
        partition=[1, None],
        timestamp=[5, None],
        key=[b"k1", b"k2"],
        value=[b"v1", None],
        headers=[[{"key": "h", "value": b"x"}], []],
    )
    outside = pa.table(
        {
            "partition": pa.array([1, None], pa.int64()),
            "timestamp": pa.array([5, None], pa.timestamp("ms", tz="UTC")),
            "key": pa.array([b"k1", b"k2"], pa.large_binary()),
            "value": pa.array([b"v1", None], pa.binary()),
            "headers": pa.array([[{"key": "h", "value": b"x"}], []], HEADERS_TYPE),
        }
    )
    assert from_records.table.equals(from_lists.table)
    assert ProduceBatch.from_arrow(outside).table.equals(from_records.table)
    assert ProduceBatch.of(records).table.equals(from_records.table)


def test_outside_tables_with_unknown_or_uncastable_columns_are_refused() -> None:
    with pytest.raises(InvalidRecordError, match="colour"):
        ProduceBatch.from_arrow(pa.table({"value": [b"x"], "colour": ["red"]}))
    with pytest.raises(InvalidRecordError, match="schema"):
        ProduceBatch.from_arrow(pa.table({"value": [b"x"], "partition": ["zero"]}))


def test_only_produce_schema_rows_make_a_batch() -> None:
    with pytest.raises(TypeError):
        ProduceBatch(pa.table({"value": [b"x"]}))
    with pytest.raises(ValueError, match="lengths"):
        ProduceBatch.from_columns(key=[b"k"], value=[b"a", b"b"])


def test_derived_batches_keep_the_schema() -> None:
    batch = _batch(value=[b"a", b"b", b"c"], key=[b"1", b"2", b"3"])
    pinned = batch.with_partition(2)
    assert pinned.column("partition").to_pylist() == [2, 2, 2]
    assert pinned.take([2, 0]).column("key").to_pylist() == [b"3", b"1"]
    assert batch.column("partition").null_count == 3  # immutable: the original is unchanged


def test_a_batch_the_topic_accepts_passes() -> None:
    batch = _batch(
        partition=[0, 1],
        key=[b"k", b"k"],
        value=[b"12345678", None],
        timestamp=[0, MAX_TIMESTAMP_MS],
        headers=[[], [{"key": "h", "value": b"1"}]],
    )
    batch.check("t", 2, COMPACTED)


@pytest.mark.parametrize(
    ("columns", "config", "error", "message", "index"),
    [
        ({"partition": [0, 2]}, PLAIN, UnknownTopicOrPartitionError, "partition 2 does not", 1),
        ({"partition": [-1, 0]}, PLAIN, UnknownTopicOrPartitionError, "partition -1", 0),
        ({"value": [b"x", b"y" * 11]}, PLAIN, MessageTooLargeError, "12 bytes", 1),
        (
            {"headers": [[], [{"key": "hh", "value": b"y" * 8}]]},
            PLAIN,
            MessageTooLargeError,
            "max.message.bytes=10",
            1,
        ),
        ({"key": [b"k", None]}, COMPACTED, InvalidRecordError, "without a key", 1),
        ({"timestamp": [None, -1]}, PLAIN, InvalidTimestampError, "negative", 1),
        ({"timestamp": [MAX_TIMESTAMP_MS + 1, 0]}, PLAIN, InvalidTimestampError, "9999", 0),
    ],
)
def test_each_rule_names_the_record_at_fault(
    columns: dict[str, list[object]],
    config: TopicConfig,
    error: type[LakelogError],
    message: str,
    index: int,
) -> None:
    base: dict[str, list[object]] = {"partition": [0, 1], "key": [b"k", b"k"], "value": [b"", b""]}
    batch = _batch(**{**base, **columns})
    with pytest.raises(error, match=message) as raised:
        batch.check("t", 2, config)
    assert raised.value.details["record_index"] == index


def test_a_keyless_record_is_fine_on_a_topic_that_is_not_compacted() -> None:
    _batch(partition=[0], value=[b"x"]).check("t", 1, PLAIN)


def test_a_header_without_a_key_is_refused() -> None:
    # Arrow that declares the key non-nullable yet holds a null (possible in an IPC body).
    keys = pa.array(["a", None], pa.string())
    elements = pa.StructArray.from_arrays(
        [keys, pa.array([b"1", b"2"], pa.binary())], fields=list(HEADERS_TYPE.value_type)
    )
    headers = pa.ListArray.from_arrays(pa.array([0, 0, 2], pa.int32()), elements, HEADERS_TYPE)
    batch = _batch(partition=[0, 0], value=[b"", b""], headers=headers)
    with pytest.raises(InvalidRecordError, match="record 1: a header has no key"):
        batch.check("t", 1, PLAIN)
