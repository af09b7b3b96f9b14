"""The readers and writers driven directly, as Spark would drive them, without a SparkSession.

Spark calls ``partitions`` on the driver and ``read`` in tasks, and
``latestOffset``/``partitions``/``commit`` per micro-batch; calling them here
tests every decision fast, including the ones (data loss, rate limits, a
repeated micro-batch commit) that are slow or awkward to provoke in a real
query. The Spark tests then show the same code works inside Spark.
"""

from __future__ import annotations

import time
from typing import Any, cast

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from compaction.retention import apply_retention
from lakelog.catalog import Catalog
from lakelog.errors import (
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from lakelog.groups.codec import OFFSETS_TOPIC, CommittedOffset
from lakelog.groups.offsets_store import OffsetsStore
from lakelog.records import Record
from lakelog.structs import TopicPartition as TP
from spark_connector.batch_reader import LakelogBatchReader
from spark_connector.planning import ReadSplit
from spark_connector.schema import spark_schema
from spark_connector.source import LakelogDataSource
from spark_connector.staging import STAGING_DIR
from spark_connector.stream_reader import Clock, LakelogStreamReader
from spark_connector.writers import LakelogBatchWriter, LakelogStreamWriter
from tests.fixtures.roots import RootSpec
from tests.fixtures.snapshots import RootSnapshots
from tests.spark_connector.helpers import Row, log_rows, root_options

DAY = 86_400_000


def batch_reader(root: RootSpec, **options: str) -> LakelogBatchReader:
    source = LakelogDataSource({**root_options(root), **options})
    reader = source.reader(spark_schema("includeHeaders" in options))
    assert isinstance(reader, LakelogBatchReader)
    return reader


def stream_reader(
    root: RootSpec, clock: Clock | None = None, **options: str
) -> LakelogStreamReader:
    reader = LakelogDataSource({**root_options(root), **options}).streamReader(spark_schema(False))
    assert isinstance(reader, LakelogStreamReader)
    return reader if clock is None else LakelogStreamReader(reader.opts, clock)


class SteppedClock:
    """A clock that moves only when told to (seconds, as ``time.monotonic``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def rows_from_batches(batches: list[pa.RecordBatch]) -> list[Row]:
    out: list[Row] = []
    for b in batches:
        d = b.to_pydict()
        for i in range(b.num_rows):
            ts = d["timestamp"][i]
            headers = d.get("headers", [None] * b.num_rows)[i]
            out.append(
                (
                    d["topic"][i],
                    d["partition"][i],
                    d["offset"][i],
                    int(ts.timestamp() * 1000),
                    d["timestampType"][i],
                    d["key"][i],
                    d["value"][i],
                    [(h["key"], h["value"]) for h in headers] if headers is not None else None,
                )
            )
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def run_batch(reader: LakelogBatchReader) -> tuple[list[ReadSplit], list[Row]]:
    splits = cast(list[ReadSplit], list(reader.partitions()))
    batches = [b for s in splits for b in reader.read(s)]
    return splits, rows_from_batches(batches)


def fill(catalog: Catalog, topic: str, partitions: int, batches: int, per_batch: int) -> None:
    catalog.create_topic(topic, partitions)
    log = catalog.topic(topic)
    for b in range(batches):
        log.append(
            [
                Record(
                    f"{topic}-{b}-{i}".encode(),
                    key=f"k{i % 7}".encode() if i % 5 else None,
                    headers=[("n", str(i).encode()), ("e", None)] if i % 3 == 0 else [],
                    partition=i % partitions,
                )
                for i in range(per_batch)
            ]
        )


# -- batch reads ---------------------------------------------------------------


def test_batch_read_equals_topic_log(root: RootSpec, catalog: Catalog) -> None:
    fill(catalog, "orders", 3, 6, 40)
    fill(catalog, "other", 1, 2, 5)
    splits, rows = run_batch(
        batch_reader(root, subscribe="orders", includeHeaders="true", maxRecordsPerPartition="35")
    )
    assert rows == log_rows(catalog, "orders", with_headers=True)
    assert len(rows) == 240 and len(splits) >= 6
    # headers: an empty list is null, as in Spark's Kafka source
    assert {r[7] is None for r in rows} == {True, False}
    _, both = run_batch(batch_reader(root, subscribePattern="o.*"))
    assert both == log_rows(catalog, "orders") + log_rows(catalog, "other")


def test_batch_read_offsets_and_timestamps(root: RootSpec, catalog: Catalog) -> None:
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    for i in range(10):  # offset i of each partition has timestamp 1000 * (i + 1)
        log.append([Record(b"v%d" % i, partition=p, timestamp_ms=1000 * (i + 1)) for p in (0, 1)])
    _, rows = run_batch(
        batch_reader(
            root,
            subscribe="t",
            startingOffsets='{"t": {"0": 3, "1": -2}}',
            endingOffsets='{"t": {"0": 5, "1": -1}}',
        )
    )
    assert [(r[1], r[2]) for r in rows] == [(0, 3), (0, 4)] + [(1, o) for o in range(10)]
    _, rows = run_batch(batch_reader(root, subscribe="t", startingTimestamp="7500"))
    assert [(r[1], r[2]) for r in rows] == [(0, 7), (0, 8), (0, 9), (1, 7), (1, 8), (1, 9)]
    _, rows = run_batch(
        batch_reader(
            root,
            assign='{"t": [1]}',
            startingOffsetsByTimestamp='{"t": {"1": 2000}}',
            endingOffsetsByTimestamp='{"t": {"1": 4000}}',
        )
    )
    assert [(r[1], r[2]) for r in rows] == [(1, 1), (1, 2)]
    with pytest.raises(InvalidConfigError, match="no record of t-0 has a timestamp"):
        batch_reader(root, subscribe="t", startingTimestamp="999999").partitions()
    _, rows = run_batch(
        batch_reader(
            root,
            subscribe="t",
            startingTimestamp="999999",
            startingOffsetsByTimestampStrategy="latest",
        )
    )
    assert rows == []


def test_batch_read_after_retention(root: RootSpec, catalog: Catalog) -> None:
    catalog.create_topic("t", 1, {"retention.ms": str(DAY)})
    log = catalog.topic("t")
    now = int(time.time() * 1000)
    for i in range(4):
        stamp = now - 10 * DAY if i < 2 else now
        log.append([Record(b"%d-%d" % (i, j), timestamp_ms=stamp) for j in range(5)])
    assert apply_retention(catalog, "t", now_ms=now).status == "ok"
    _, rows = run_batch(batch_reader(root, subscribe="t"))
    assert [r[2] for r in rows] == list(range(10, 20))
    assert rows == log_rows(catalog, "t")
    with pytest.raises(OffsetOutOfRangeError) as info:
        batch_reader(root, subscribe="t", startingOffsets='{"t": {"0": 3}}').partitions()
    assert "offsets 3..9 are no longer in the log" in str(info.value)
    _, rows = run_batch(
        batch_reader(root, subscribe="t", startingOffsets='{"t": {"0": 3}}', failOnDataLoss="false")
    )
    assert [r[2] for r in rows] == list(range(10, 20))


def test_pushed_filters_read_exact_rows(root: RootSpec, catalog: Catalog) -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

    fill(catalog, "t", 4, 5, 40)
    everything, _ = run_batch(batch_reader(root, subscribe="t", maxRecordsPerPartition="10"))
    reader = batch_reader(root, subscribe="t", maxRecordsPerPartition="10")
    filters = [
        EqualTo(("partition",), 2),
        GreaterThanOrEqual(("offset",), 13),
        LessThan(("offset",), 31),
    ]
    assert list(reader.pushFilters(filters)) == []
    splits, rows = run_batch(reader)
    assert [(r[1], r[2]) for r in rows] == [(2, o) for o in range(13, 31)]
    assert len(splits) < len(everything) / 4


def test_read_errors_name_the_option(root: RootSpec, catalog: Catalog, tmp_path: Any) -> None:
    fill(catalog, "t", 2, 1, 4)
    with pytest.raises(UnknownTopicOrPartitionError) as info:
        batch_reader(root, subscribe="t,nope").partitions()
    assert "option 'subscribe': topic 'nope' does not exist" in str(info.value)
    with pytest.raises(UnknownTopicOrPartitionError) as info:
        batch_reader(root, assign='{"t": [0, 5]}').partitions()
    assert "option 'assign': partition 5 does not exist in topic 't' (it has 2" in str(info.value)
    with pytest.raises(InvalidConfigError) as bad_root:
        batch_reader(RootSpec(str(tmp_path / "missing")), subscribe="t").partitions()
    assert "option 'root':" in str(bad_root.value)
    assert "is not a lakelog storage root" in str(bad_root.value)
    with pytest.raises(InvalidConfigError, match="names partitions that are not subscribed"):
        batch_reader(root, subscribe="t", startingOffsets='{"t": {"9": 0}}').partitions()
    # a pattern that matches nothing is an empty read, as in Spark
    assert run_batch(batch_reader(root, subscribePattern="zz.*")) == ([], [])


# -- streaming reads -----------------------------------------------------------


def test_stream_offsets_rate_limit_and_new_partitions(root: RootSpec, catalog: Catalog) -> None:
    fill(catalog, "s", 2, 1, 10)  # 5 records per partition
    reader = stream_reader(
        root, subscribe="s", startingOffsets="earliest", maxOffsetsPerTrigger="4"
    )
    try:
        start = reader.initialOffset()
        assert start == {"s": {"0": 0, "1": 0}}
        assert isinstance(reader.getDefaultReadLimit(), ReadMaxRows)
        end = reader.latestOffset(start, ReadMaxRows(4))
        assert end == {"s": {"0": 2, "1": 2}}
        splits = cast(list[ReadSplit], reader.partitions(start, end))
        rows = rows_from_batches([b for s in splits for b in reader.read(s)])
        assert [(r[1], r[2]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert reader.latestOffset(end, ReadAllAvailable()) == {"s": {"0": 5, "1": 5}}
        catalog.create_partitions("s", 3)
        catalog.topic("s").append([Record(b"new", partition=2)])
        latest = reader.latestOffset({"s": {"0": 5, "1": 5}}, ReadAllAvailable())
        assert latest == {"s": {"0": 5, "1": 5, "2": 1}}  # a new partition, from its start
        assert reader.reportLatestOffset() == latest
        assert reader.latestOffset(latest, ReadAllAvailable()) is latest  # unchanged: as given
        assert reader.partitions(latest, latest) == []
    finally:
        reader.stop()


def test_stream_min_offsets_and_trigger_delay(root: RootSpec, catalog: Catalog) -> None:
    fill(catalog, "s", 1, 1, 3)
    clock = SteppedClock()
    reader = stream_reader(
        root, clock, subscribe="s", startingOffsets="earliest", minOffsetsPerTrigger="5",
        maxTriggerDelay="4s",
    )  # fmt: skip
    try:
        start = reader.initialOffset()
        assert isinstance(reader.getDefaultReadLimit(), ReadMinRows)
        assert reader.latestOffset(start, ReadMinRows(5)) is start  # 3 < 5: wait
        clock.advance(3.5)
        assert reader.latestOffset(start, ReadMinRows(5)) is start  # 3.5 s: still waiting
        clock.advance(0.5)
        assert reader.latestOffset(start, ReadMinRows(5)) == {"s": {"0": 3}}  # 4 s: delay passed
        catalog.topic("s").append([Record(b"x") for _ in range(6)])
        assert reader.latestOffset({"s": {"0": 3}}, ReadMinRows(5)) == {"s": {"0": 9}}  # 6 >= 5
        # The delay counts again from the last micro-batch.
        catalog.topic("s").append([Record(b"y") for _ in range(2)])
        clock.advance(3.5)
        assert reader.latestOffset({"s": {"0": 9}}, ReadMinRows(5)) == {"s": {"0": 9}}
        clock.advance(0.5)
        assert reader.latestOffset({"s": {"0": 9}}, ReadMinRows(5)) == {"s": {"0": 11}}
    finally:
        reader.stop()


def test_stream_available_now_stops_at_the_target(root: RootSpec, catalog: Catalog) -> None:
    fill(catalog, "s", 1, 1, 4)
    reader = stream_reader(
        root, subscribe="s", startingOffsets="earliest", minOffsetsPerTrigger="100"
    )
    try:
        start = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        catalog.topic("s").append([Record(b"late")])  # after the target: not in this run
        end = reader.latestOffset(start, ReadMinRows(100))  # min is ignored: it would never end
        assert end == {"s": {"0": 4}}
        assert reader.latestOffset(end, ReadMinRows(100)) is end
    finally:
        reader.stop()


def test_stream_fail_on_data_loss(root: RootSpec, catalog: Catalog) -> None:
    catalog.create_topic("s", 1, {"retention.ms": str(DAY)})
    log = catalog.topic("s")
    now = int(time.time() * 1000)
    log.append([Record(b"old", timestamp_ms=now - 5 * DAY) for _ in range(3)])
    log.append([Record(b"new", timestamp_ms=now) for _ in range(2)])
    checkpointed = {"s": {"0": 1}}  # the query had read offset 0 before retention ran
    apply_retention(catalog, "s", now_ms=now)
    strict = stream_reader(root, subscribe="s")
    with pytest.raises(OffsetOutOfRangeError) as info:
        strict.latestOffset(checkpointed, ReadAllAvailable())
    assert "the query is at offset 1 of s-0, but offsets 1..2 are no longer in the log" in str(
        info.value
    )
    assert "set failOnDataLoss=false" in str(info.value)
    with pytest.raises(OffsetOutOfRangeError):
        strict.partitions(checkpointed, {"s": {"0": 5}})
    strict.stop()
    lenient = stream_reader(root, subscribe="s", failOnDataLoss="false")
    end = lenient.latestOffset(checkpointed, ReadAllAvailable())
    assert end == {"s": {"0": 5}}
    splits = cast(list[ReadSplit], lenient.partitions(checkpointed, end))
    rows = rows_from_batches([b for s in splits for b in lenient.read(s)])
    assert [r[2] for r in rows] == [3, 4]
    lenient.stop()


def test_stream_reader_pickles_without_its_catalog(root: RootSpec, catalog: Catalog) -> None:
    import pickle

    fill(catalog, "s", 1, 1, 2)
    reader = stream_reader(root, subscribe="s")
    reader.initialOffset()
    assert reader._source is not None
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._source is None and copy.opts == reader.opts
    reader.stop()


# -- writes ----------------------------------------------------------------------

WRITE_SCHEMA = "key string, value string, partition int"


def spark_batch(values: list[str], partition: int | None = 0) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "key": pa.array([f"k-{v}" for v in values], pa.string()),
            "value": pa.array(values, pa.string()),
            "partition": pa.array([partition] * len(values), pa.int32()),
        }
    )


def staged_files(root: RootSpec) -> list[str]:
    return [f.path for f in root.open().walk_files(STAGING_DIR)]


def test_batch_write_commit_and_abort(root: RootSpec, catalog: Catalog) -> None:
    from pyspark.sql.types import StructType

    catalog.create_topic("out", 2)
    source = LakelogDataSource({**root_options(root), "topic": "out"})
    schema = StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": {}}
                for n, t in (("key", "string"), ("value", "string"), ("partition", "integer"))
            ],
        }
    )
    writer = source.writer(schema, overwrite=False)
    assert isinstance(writer, LakelogBatchWriter)
    messages = [
        writer.write(iter([spark_batch(["a", "b"], 0), spark_batch(["c"], 1)])),
        writer.write(iter([])),
        writer.write(iter([spark_batch(["d"], 1)])),
    ]
    assert len(staged_files(root)) == 2
    writer.commit([*messages, None])
    assert staged_files(root) == []
    rows = log_rows(catalog, "out")
    assert [(r[1], r[2], r[6]) for r in rows] == [
        (0, 0, b"a"),
        (0, 1, b"b"),
        (1, 0, b"c"),
        (1, 1, b"d"),
    ]
    assert catalog.topic("out").version == 1  # created at 0, then one commit for the write
    aborted = source.writer(schema, overwrite=False)
    assert isinstance(aborted, LakelogBatchWriter)
    aborted.abort([aborted.write(iter([spark_batch(["x"])]))])
    assert staged_files(root) == [] and len(log_rows(catalog, "out")) == 4
    with pytest.raises(InvalidConfigError, match="save mode 'overwrite' is not supported"):
        source.writer(schema, overwrite=True)


def test_stream_commit_of_a_repeated_micro_batch_is_a_no_op(
    root: RootSpec, catalog: Catalog
) -> None:
    catalog.create_topic("out", 1)
    options = {**root_options(root), "topic": "out", "writerId": "query-1"}
    source = LakelogDataSource(options)

    def run_batch_id(batch_id: int, values: list[str]) -> None:
        writer = source.streamWriter(spark_schema(False), overwrite=False)
        assert isinstance(writer, LakelogStreamWriter)
        writer.commit([writer.write(iter([spark_batch(values)]))], batch_id)

    run_batch_id(0, ["a", "b"])
    run_batch_id(0, ["a", "b"])  # Spark re-runs a batch whose commit it did not record
    run_batch_id(1, ["c"])
    run_batch_id(1, ["c"])
    assert [r[6] for r in log_rows(catalog, "out")] == [b"a", b"b", b"c"]
    assert catalog.topic("out").txn_version("spark-query.query-1") == 1
    assert staged_files(root) == []
    other = LakelogDataSource({**options, "writerId": "query-2"})
    writer = other.streamWriter(spark_schema(False), overwrite=False)
    writer.commit([writer.write(iter([spark_batch(["d"])]))], 0)  # another query's batch 0
    assert [r[6] for r in log_rows(catalog, "out")] == [b"a", b"b", b"c", b"d"]


def test_stream_writer_needs_an_identity(root: RootSpec, catalog: Catalog, tmp_path: Any) -> None:
    source = LakelogDataSource({**root_options(root), "topic": "out"})
    with pytest.raises(InvalidConfigError) as info:
        source.streamWriter(spark_schema(False), overwrite=False)
    assert "option 'checkpointLocation'" in str(info.value) and "'writerId'" in str(info.value)
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"4b8e3c1e-query"}\n')
    catalog.create_topic("out", 1)
    writer = LakelogDataSource(
        {**root_options(root), "topic": "out", "checkpointLocation": str(checkpoint)}
    ).streamWriter(spark_schema(False), overwrite=False)
    writer.commit([writer.write(iter([spark_batch(["a"])]))], 7)
    catalog.topic("out").refresh()
    assert catalog.topic("out").txn_version("spark-query.4b8e3c1e-query") == 7
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = LakelogDataSource(
        {**root_options(root), "topic": "out", "checkpointLocation": str(empty)}
    ).streamWriter(spark_schema(False), overwrite=False)
    with pytest.raises(InvalidConfigError, match="cannot read the query id from"):
        broken.commit([broken.write(iter([spark_batch(["b"])]))], 0)
    assert staged_files(root) == []


def test_write_by_topic_column_and_bad_rows(root: RootSpec, catalog: Catalog) -> None:
    catalog.create_topic("a", 1)
    catalog.create_topic("b", 1)
    source = LakelogDataSource({**root_options(root), "writerId": "w"})
    writer = source.streamWriter(spark_schema(False), overwrite=False)
    rows = pa.record_batch(
        {
            "value": pa.array([b"1", b"2", b"3"]),
            "topic": pa.array(["a", "b", "a"]),
            "headers": pa.array(
                [[{"key": "h", "value": b"x"}], [], None],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
        }
    )
    writer.commit([writer.write(iter([rows]))], 0)
    assert [r[6] for r in log_rows(catalog, "a")] == [b"1", b"3"]
    assert [r[6] for r in log_rows(catalog, "b")] == [b"2"]
    assert log_rows(catalog, "a", with_headers=True)[0][7] == [("h", b"x")]
    with pytest.raises(InvalidRecordError, match="column 'topic' is null"):
        writer.write(
            iter(
                [
                    pa.record_batch(
                        {"value": pa.array([b"1"]), "topic": pa.array([None], pa.string())}
                    )
                ]
            )
        )
    bad = writer.write(
        iter([pa.record_batch({"value": pa.array([b"1"]), "topic": pa.array(["nope"])})])
    )
    with pytest.raises(UnknownTopicOrPartitionError, match="nope"):
        writer.commit([bad], 1)
    assert staged_files(root) == []


def test_writes_to_the_offsets_table_are_refused(root: RootSpec, catalog: Catalog) -> None:
    catalog.create_topic("a", 1)
    OffsetsStore(catalog, num_partitions=2).commit("g1", {TP("a", 0): CommittedOffset(1, "", 1)})
    snapshots = RootSnapshots(root)
    before = snapshots.take()
    refusal = "cannot append to internal topic __consumer_offsets"
    source = LakelogDataSource({**root_options(root), "topic": OFFSETS_TOPIC})
    writer = source.writer(spark_schema(False), overwrite=False)
    assert isinstance(writer, LakelogBatchWriter)
    with pytest.raises(InvalidTopicError, match=refusal):
        writer.commit([writer.write(iter([spark_batch(["x"])]))])
    # By the topic column, beside an ordinary topic: every topic is checked before any commit.
    stream = LakelogDataSource({**root_options(root), "writerId": "w"}).streamWriter(
        spark_schema(False), overwrite=False
    )
    rows = pa.record_batch(
        {"value": pa.array([b"1", b"2"]), "topic": pa.array(["a", OFFSETS_TOPIC])}
    )
    with pytest.raises(InvalidTopicError, match=refusal):
        stream.commit([stream.write(iter([rows]))], 0)
    assert log_rows(catalog, "a") == []
    assert staged_files(root) == []
    assert snapshots.take() == before


def test_stream_pattern_picks_up_new_topics(root: RootSpec, catalog: Catalog) -> None:
    fill(catalog, "logs.a", 1, 1, 3)
    reader = stream_reader(root, subscribePattern=r"logs\..*", startingOffsets="latest")
    try:
        start = reader.initialOffset()
        assert start == {"logs.a": {"0": 3}}
        fill(catalog, "logs.b", 2, 1, 4)  # a new matching topic: read from its beginning
        fill(catalog, "other", 1, 1, 1)
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {"logs.a": {"0": 3}, "logs.b": {"0": 2, "1": 2}}
        splits = cast(list[ReadSplit], reader.partitions(start, end))
        assert {(s.topic, s.partition, s.start, s.end) for s in splits} == {
            ("logs.b", 0, 0, 2),
            ("logs.b", 1, 0, 2),
        }
    finally:
        reader.stop()


def test_segment_removed_before_the_task_reads_it(root: RootSpec, catalog: Catalog) -> None:
    fill(catalog, "t", 1, 3, 5)
    splits = cast(list[ReadSplit], list(batch_reader(root, subscribe="t").partitions()))
    (split,) = splits
    assert len(split.segments) == 3
    # a compaction or retention committed and a vacuum ran between planning and reading
    storage = root.open()
    storage.delete(f"{split.table_path}/{split.segments[1].path}")
    strict = batch_reader(root, subscribe="t")
    with pytest.raises(OffsetOutOfRangeError, match="was removed from storage before it could"):
        list(strict.read(split))
    lenient = batch_reader(root, subscribe="t", failOnDataLoss="false")
    rows = rows_from_batches(list(lenient.read(split)))
    assert [r[2] for r in rows] == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
