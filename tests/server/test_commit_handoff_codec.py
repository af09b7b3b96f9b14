"""The handoff bodies round-trip requests and results, and refuse bodies that do not add up."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakelog.append.result import AppendResult, partition_batches
from lakelog.append.staging import group_by_partition
from lakelog.errors import InvalidRequestError, LakelogError, OutOfOrderSequenceError
from lakelog.partitioner import StickyPartitioner
from lakelog.produce import PreparedBatch, prepare_batch
from lakelog.records import Record
from lakelog.topic_config import TopicConfig
from server.commit_leader.codec import (
    decode_batches,
    decode_results,
    encode_batches,
    encode_results,
)


def prepared(values: list[str], producer_id: int | None = None) -> PreparedBatch:
    records = [Record(v.encode(), key=v.encode()) for v in values]
    return prepare_batch(
        records,
        topic="t",
        num_partitions=3,
        config=TopicConfig(),
        keyless=StickyPartitioner(),
        now_ms=1_700_000_000_000,
        producer_id=producer_id,
        base_sequence=None if producer_id is None else 5,
    )


def test_requests_round_trip_in_order() -> None:
    batches = [prepared(["a", "b"]), prepared(["c"], producer_id=7), prepared(["d", "e", "f"])]
    decoded = decode_batches(encode_batches(batches))
    assert [b.table.to_pylist() for b in decoded] == [b.table.to_pylist() for b in batches]
    assert [(b.producer_id, b.base_sequence) for b in decoded] == [
        (b.producer_id, b.base_sequence) for b in batches
    ]


def test_results_and_errors_round_trip() -> None:
    parts, offs = np.array([0, 2, 0]), np.array([10, 4, 11])
    ok = AppendResult(parts, offs, np.array([1, 2, 3]), partition_batches(parts, offs), 9)
    refused = OutOfOrderSequenceError("producer 7 sent sequence 9; the next expected is 6")
    results: list[AppendResult | LakelogError] = [ok, refused, ok]
    back = decode_results(encode_results(results))
    assert back[0] == ok and back[2] == ok
    assert isinstance(back[1], OutOfOrderSequenceError)
    assert back[1].message == refused.message


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not arrow at all",
        # rows that are not prepared produce rows
        encode_batches([prepared(["a"])])[:-40],
    ],
)
def test_unreadable_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(InvalidRequestError, match="unreadable commit handoff"):
        decode_batches(body)


def test_foreign_rows_are_refused() -> None:
    table = pa.table({"x": [1, 2]}).replace_schema_metadata(
        {b"lakelog.requests": b"[[2,null,null]]"}
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(InvalidRequestError, match="not prepared produce rows"):
        decode_batches(sink.getvalue().to_pybytes())


def test_handed_off_keyed_requests_stage_like_the_senders_own() -> None:
    # Keyed requests spread over every partition; at the leader they join a group with
    # the leader's own requests and are split by partition there. Each partition holds
    # its rows in request order, then record order, and every record sits where it is
    # reported, exactly as for requests that were never handed off.
    sent = [
        prepared([f"key-{i}" for i in range(40)]),
        prepared(["x", "y", "z"], producer_id=7),
        prepared([f"other-{i}" for i in range(25)]),
    ]
    own = prepared([f"leader-{i}" for i in range(10)])
    group = [own, *decode_batches(encode_batches(sent))]
    staged, located = group_by_partition(group)
    expected: dict[int, list[dict[str, object]]] = {}
    for batch in [own, *sent]:
        parts = batch.table.column("partition").to_pylist()
        for p, row in zip(parts, batch.table.drop_columns(["partition"]).to_pylist(), strict=True):
            expected.setdefault(p, []).append(row)
    assert len(expected) == 3
    assert {p: t.to_pylist() for p, t in staged.items()} == expected
    for batch, original, (parts, at) in zip(group, [own, *sent], located, strict=True):
        assert parts.tolist() == original.table.column("partition").to_pylist()
        rows = batch.table.drop_columns(["partition"]).to_pylist()
        found = [
            staged[int(p)].slice(int(i), 1).to_pylist()[0] for p, i in zip(parts, at, strict=True)
        ]
        assert found == rows
