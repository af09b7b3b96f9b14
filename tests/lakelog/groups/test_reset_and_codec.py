"""Reset planning, group id rules and the offsets-table key/value codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog.errors import CorruptRecordError, InvalidGroupIdError, InvalidRequestError
from lakelog.groups.codec import (
    CommittedOffset,
    OffsetKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    offsets_partition,
)
from lakelog.groups.ids import validate_group_id
from lakelog.groups.reset import (
    PartitionPosition,
    ResetSpec,
    parse_duration_ms,
    parse_spec,
    plan_reset,
)
from lakelog.structs import TopicPartition

TP = TopicPartition("t", 0)
POSITIONS = [
    PartitionPosition(TP, log_start=5, log_end=20, committed=12),
    PartitionPosition(TopicPartition("t", 1), log_start=0, log_end=3, committed=None),
]


def plan(
    to: dict[str, object], by_time: dict[TopicPartition, int | None] | None = None
) -> list[int]:
    spec = parse_spec(to)
    return [r.new_offset for r in plan_reset(spec, POSITIONS[:1], by_time)]


def test_every_kind_is_clamped_to_the_log() -> None:
    assert plan({"earliest": True}) == [5]
    assert plan({"latest": True}) == [20]
    assert plan({"current": True}) == [12]
    assert plan({"offset": 1}) == [5]
    assert plan({"offset": 15}) == [15]
    assert plan({"offset": 99}) == [20]
    assert plan({"shift_by": -2}) == [10]
    assert plan({"shift_by": -100}) == [5]
    assert plan({"shift_by": 100}) == [20]
    assert plan({"datetime": "2026-01-01T00:00:00Z"}, {TP: 7}) == [7]
    assert plan({"duration": "PT1H"}, {TP: None}) == [20]  # nothing that recent: log end
    assert plan({"timestamp_ms": 5}, {TP: 2}) == [5]


def test_current_without_a_commit_is_the_log_end_and_shift_is_refused() -> None:
    rows = plan_reset(ResetSpec("current"), POSITIONS)
    assert [(r.current_offset, r.new_offset) for r in rows] == [(12, 12), (None, 3)]
    with pytest.raises(InvalidRequestError, match="no committed offset"):
        plan_reset(ResetSpec("shift_by", 1), POSITIONS)


def test_time_targets() -> None:
    assert parse_duration_ms("PT1H") == 3_600_000
    assert parse_duration_ms("P1DT2M3.5S") == 86_400_000 + 120_000 + 3_500
    assert parse_spec({"duration": "PT1M"}).timestamp_ms(100_000) == 40_000
    assert parse_spec({"datetime": "1970-01-01T00:00:01"}).timestamp_ms(0) == 1_000
    assert parse_spec({"datetime": "1970-01-01T01:00:00+01:00"}).timestamp_ms(0) == 0


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"earliest": True, "latest": True},
        {"earliest": "yes"},
        {"offset": -1},
        {"offset": True},
        {"shift_by": "2"},
        {"duration": "1h"},
        {"duration": "PT"},
        {"datetime": "yesterday"},
        {"sideways": True},
    ],
)
def test_bad_targets_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidRequestError):
        parse_spec(bad)


def test_group_ids() -> None:
    assert validate_group_id("my.group-1_a") == "my.group-1_a"
    for bad in ("", "a b", "x/y", "..", "é", "g" * 250, None):
        with pytest.raises(InvalidGroupIdError):
            validate_group_id(bad)


names = st.text("abcXYZ019._-", min_size=1, max_size=40)


@given(names, names, st.integers(0, 2**31 - 1), st.integers(0, 2**62), st.text(max_size=50))
def test_codec_round_trips(group: str, topic: str, partition: int, offset: int, meta: str) -> None:
    key = OffsetKey(group, topic, partition)
    assert decode_key(encode_key(key)) == key
    value = CommittedOffset(offset, meta, 1_700_000_000_000)
    assert decode_value(encode_value(value)) == value
    assert decode_value(encode_value(None)) is None
    assert 0 <= offsets_partition(group, 50) < 50


def test_codec_refuses_foreign_records() -> None:
    with pytest.raises(CorruptRecordError):
        decode_key(b"no-separators")
    with pytest.raises(CorruptRecordError):
        decode_value(b'{"offset": "x"}')
