"""The native scan (``read_topic``) returns exactly what format ``lakelog`` returns.

One small root (several segments per partition, headers, keyless records and
tombstones, a retention-moved log start and compaction holes) is read both
ways for every batch option combination the connector supports; rows and
schema must be identical, and the native scan must really be native.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import lakelog
import spark_connector
from compaction.compact import compact_topic
from compaction.retention import apply_retention
from lakelog.catalog import Catalog
from lakelog.offset_index import Segment
from lakelog.records import Record
from spark_connector.file_plan import partition_files, plan_files
from spark_connector.native_scan import scan_choice
from spark_connector.options import parse_read_options
from spark_connector.planning import PartitionSnapshot
from tests.fixtures.roots import RootSpec
from tests.spark_connector.helpers import log_rows, read, root_options, rows_of

DAY = 86_400_000
BASE_MS = 1_700_000_000_000


# -- the file plan (pure) --------------------------------------------------------


def _snapshot(*ranges: tuple[int, int]) -> PartitionSnapshot:
    segments = tuple(Segment(lo, hi, f"partition=0/{lo}.parquet", 0) for lo, hi in ranges)
    return PartitionSnapshot("t", "topics/t/x", 0, ranges[0][0], ranges[-1][1] + 1, segments)


def test_only_overlapping_files_are_listed_and_straddling_ones_filtered() -> None:
    snap = _snapshot((0, 9), (10, 19), (20, 29))
    whole = partition_files(snap, 10, 20)
    assert whole is not None and whole.paths == ("partition=0/10.parquet",) and whole.exact
    cut = partition_files(snap, 5, 25)
    assert cut is not None and len(cut.paths) == 3 and not cut.exact
    assert partition_files(snap, 12, 12) is None
    assert partition_files(snap, 30, 40) is None
    (topic,) = plan_files([snap], {("t", 0): (0, 30)})
    assert topic.exact and len(topic.partitions[0].paths) == 3


# -- Spark: both paths, every option ---------------------------------------------


@pytest.fixture(scope="module")
def scan_root(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RootSpec]:
    """``a``: 3 partitions, retention and compaction applied; ``b``: 1 partition, keyless."""
    spark_connector.register(spark)
    root = RootSpec(str(tmp_path_factory.mktemp("native") / "root"))
    catalog: Catalog = lakelog.connect(root.url)
    catalog.create_topic(
        "a",
        3,
        {
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.01",
            "retention.ms": str(DAY),
        },
    )
    catalog.create_topic("b", 1)
    a, b = catalog.topic("a"), catalog.topic("b")
    now = int(time.time() * 1000)
    a.append([Record(b"old", key=b"k%d" % i, timestamp_ms=now - 9 * DAY) for i in range(6)])
    for n in range(5):  # append n has timestamps BASE_MS + n seconds (+ its index in ms)
        a.append(
            [
                Record(
                    None if i == 7 else b"a%d-%d" % (n, i),
                    key=b"k%d" % (i % 6),
                    headers=[("n", b"%d" % n), ("e", None)] if i % 3 == 0 else [],
                    partition=i % 3,
                    timestamp_ms=now + 1000 * n + i,
                )
                for i in range(12)
            ]
        )
        b.append([Record(b"b%d" % n, timestamp_ms=BASE_MS + 1000 * n)])
    assert apply_retention(catalog, "a", now_ms=now).status == "ok"
    assert compact_topic(catalog, "a", spark, force=True).status == "ok"
    a.append([Record(b"head", key=b"k1", partition=p, timestamp_ms=now + 9000) for p in range(3)])
    catalog.close()
    yield root


def _native(spark: SparkSession, root: RootSpec, **options: str) -> DataFrame:
    return spark_connector.read_topic(spark, options={**root_options(root), **options})


def _options_cases(root: RootSpec) -> list[dict[str, str]]:
    catalog = lakelog.connect(root.url)
    try:
        a = catalog.topic("a")
        starts = {p: a.log_start_offset(p) for p in range(3)}
        ts = [s.min_timestamp_ms for p in range(3) for s in a.segments(p)]
    finally:
        catalog.close()
    mid = sorted(ts)[len(ts) // 2]
    return [
        {"subscribe": "a"},
        {"subscribe": "a,b", "includeHeaders": "true"},
        {"subscribePattern": "[ab]"},
        {"subscribePattern": "a", "includeHeaders": "true"},
        {"assign": '{"a": [0, 2], "b": [0]}'},
        {"subscribe": "a", "startingOffsets": "earliest", "endingOffsets": "latest"},
        {
            "subscribe": "a",
            "startingOffsets": json.dumps({"a": {"0": starts[0] + 2, "1": -2}}),
            "endingOffsets": json.dumps({"a": {"0": starts[0] + 5, "2": -1}}),
            "includeHeaders": "true",
        },
        {"subscribe": "a,b", "startingTimestamp": str(BASE_MS + 2000)},
        {"subscribe": "a", "startingTimestamp": str(mid), "endingTimestamp": str(mid + 2000)},
        {
            "assign": '{"b": [0]}',
            "startingOffsetsByTimestamp": json.dumps({"b": {"0": BASE_MS + 1000}}),
            "endingOffsetsByTimestamp": json.dumps({"b": {"0": BASE_MS + 3000}}),
        },
        {
            "subscribe": "b",
            "startingTimestamp": str(BASE_MS + 60_000),
            "startingOffsetsByTimestampStrategy": "latest",
        },
        {  # below the log start: data loss skipped
            "subscribe": "a",
            "startingOffsets": json.dumps({"a": {"0": 0}}),
            "failOnDataLoss": "false",
        },
        {"SUBSCRIBE": "b", "IncludeHeaders": "TRUE", "kafka.bootstrap.servers": "ignored:9092"},
    ]


CASES = 13


@pytest.mark.parametrize("case", range(CASES))
def test_native_scan_equals_the_data_source(
    spark: SparkSession, scan_root: RootSpec, case: int
) -> None:
    cases = _options_cases(scan_root)
    assert len(cases) == CASES
    options = cases[case]
    given = {**root_options(scan_root), **options}
    opts = parse_read_options({k.lower(): v for k, v in given.items()}, streaming=False)
    choice = scan_choice(spark, opts, given)
    assert choice.native, choice.reason
    native = _native(spark, scan_root, **options)
    python = read(spark, scan_root, **options)
    assert native.schema == python.schema
    expected = rows_of(python)
    assert rows_of(native) == expected
    if case == 0:
        assert expected == log_rows(lakelog.connect(scan_root.url), "a")
        assert len(expected) > 0


@pytest.mark.parametrize(
    "where",
    [
        "partition = 1",
        "partition IN (0, 2) AND offset >= 8",
        "offset BETWEEN 7 AND 12",
        "topic = 'b' OR partition = 2",
        f"timestamp >= timestamp_millis({BASE_MS + 2000})",
    ],
)
def test_filters_on_both_paths_give_the_same_rows(
    spark: SparkSession, scan_root: RootSpec, where: str
) -> None:
    native = _native(spark, scan_root, subscribe="a,b").where(where)
    python = read(spark, scan_root, subscribe="a,b").where(where)
    assert rows_of(native) == rows_of(python)


def test_a_partition_filter_lists_only_its_files(spark: SparkSession, scan_root: RootSpec) -> None:
    df = _native(spark, scan_root, assign='{"a": [1]}')
    files = df.inputFiles()
    assert files and all("/partition=1/" in f for f in files)
    opts = parse_read_options({**root_options(scan_root), "assign": '{"a": [1]}'}, streaming=False)
    assert scan_choice(spark, opts, {}).native


def test_errors_are_the_data_source_errors(spark: SparkSession, scan_root: RootSpec) -> None:
    for options, message in (
        ({"subscribe": "nope"}, "option 'subscribe': topic 'nope' does not exist"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "were both given"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "'latest' (-1) is not allowed"),
        (
            {"subscribe": "a", "startingOffsets": '{"a": {"0": 0}}'},
            "are no longer in the log",
        ),
    ):
        with pytest.raises(Exception) as python:
            read(spark, scan_root, **options).collect()
        with pytest.raises(Exception) as native:
            _native(spark, scan_root, **options)
        assert message in str(python.value)
        assert message in str(native.value)


def test_partitioning_options_keep_the_python_path(
    spark: SparkSession, scan_root: RootSpec
) -> None:
    options = {**root_options(scan_root), "subscribe": "a", "minPartitions": "4"}
    choice = scan_choice(spark, parse_read_options(options, streaming=False), options)
    assert not choice.native and "minPartitions" in choice.reason
    df = spark_connector.read_topic(spark, options=options)
    assert rows_of(df) == rows_of(read(spark, scan_root, subscribe="a"))


def test_memory_roots_keep_the_python_path(spark: SparkSession, tmp_path: Path) -> None:
    options = {"root": "memory://native-scan", "subscribe": "t"}
    choice = scan_choice(spark, parse_read_options(options, streaming=False), options)
    assert not choice.native and "lakelog's storage layer" in choice.reason


@pytest.mark.parametrize("make_root", ["s3"], indirect=True)
def test_s3_falls_back_to_the_data_source_and_says_so(
    spark: SparkSession, root: RootSpec, catalog: Catalog, caplog: pytest.LogCaptureFixture
) -> None:
    spark_connector.register(spark)
    catalog.create_topic("t", 2)
    catalog.topic("t").append([Record(b"v%d" % i, key=b"k%d" % i) for i in range(10)])
    options = {**root_options(root), "subscribe": "t"}
    choice = scan_choice(spark, parse_read_options(options, streaming=False), options)
    assert not choice.native and "s3a://" in choice.reason
    with caplog.at_level("INFO", logger="spark_connector.native_scan"):
        df = spark_connector.read_topic(spark, "t", options=root_options(root))
    assert "through the Python data source" in caplog.text and "s3a://" in caplog.text
    assert rows_of(df) == log_rows(catalog, "t") and len(rows_of(df)) == 10
    assert df.schema == read(spark, root, subscribe="t").schema
    assert df.where(F.col("partition") == 0).count() == len(log_rows(catalog, "t", partitions=[0]))


def test_snapshot_views_run_on_the_native_scan(spark: SparkSession, tmp_path: Path) -> None:
    root = RootSpec(str(tmp_path / "views"))
    catalog = lakelog.connect(root.url)
    catalog.create_topic("orders.eu", 2)
    catalog.topic("orders.eu").append([Record(b"v%d" % i, key=b"k%d" % i) for i in range(8)])
    views = spark_connector.register_topics(spark, root.url, snapshot=True, include_headers=True)
    assert views == {"orders.eu": "orders_eu"}
    via_sql = spark.sql("SELECT * FROM orders_eu")
    python = read(spark, root, subscribe="orders.eu", includeHeaders="true")
    assert via_sql.schema == python.schema
    assert rows_of(via_sql) == rows_of(python)
    assert "FileScan parquet" in via_sql._jdf.queryExecution().executedPlan().toString()
    # pinned to the registration: newer records need a new registration
    catalog.topic("orders.eu").append([Record(b"late", key=b"k9")])
    assert spark.sql("SELECT count(*) AS n FROM orders_eu").collect()[0].n == 8
    spark_connector.register_topics(spark, root.url, snapshot=True)
    assert spark.sql("SELECT count(*) AS n FROM orders_eu").collect()[0].n == 9
    catalog.close()


def _scanned_rows(df: DataFrame) -> int:
    """Rows Spark's Parquet scan produced for ``df`` (after row-group skipping)."""
    df.collect()
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves()
    scans = [leaves.apply(i) for i in range(leaves.size())]
    return sum(int(s.metrics().get("numOutputRows").get().value()) for s in scans)


def test_a_key_lookup_reads_only_the_segments_that_may_hold_the_key(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = RootSpec(str(tmp_path / "lookup"))
    catalog = lakelog.connect(root.url)
    catalog.create_topic("users", 1)
    users = catalog.topic("users")
    segments, per_segment = 8, 100
    for s in range(segments):
        users.append([Record(b"v", key=b"user-%d-%d" % (s, i)) for i in range(per_segment)])
    catalog.close()
    everything = _native(spark, root, subscribe="users")
    assert _scanned_rows(everything) == segments * per_segment
    lookup = everything.where(F.col("key") == F.lit(b"user-5-42"))
    # Segments whose key bloom filter rules the key out are skipped whole; a false
    # positive (5%) would add one more segment, never all of them.
    assert _scanned_rows(lookup) <= 2 * per_segment
    assert [r.offset for r in lookup.collect()] == [5 * per_segment + 42]
