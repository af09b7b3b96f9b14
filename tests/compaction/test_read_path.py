"""Which reader a job uses for a root, and that both refuse segments they cannot vouch for."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from compaction.compact import compact_topic, record_id
from compaction.native_read import ReadPath, read_path_for
from lakelog import Catalog, Record
from lakelog.errors import CorruptRecordError
from lakelog.records import SEGMENT_SCHEMA
from lakelog.segments import SegmentReader
from lakelog.storage import join
from lakelog.storage.fsspec_backend import MemoryStorage, S3Storage
from lakelog.storage.local import LocalStorage
from lakelog.storage.settings import S3Settings
from spark_connector.native_scan import hadoop_scheme, spark_uri
from tests.compaction.helpers import data_files, read_all, snapshot
from tests.fixtures.roots import RootSpec


def test_spark_opens_local_roots_itself_and_s3_only_as_s3a(tmp_path: object) -> None:
    local = LocalStorage(str(tmp_path))
    assert hadoop_scheme(local.url) == "file"
    assert (
        spark_uri(local, "t/partition=0/a.parquet") == f"file://{tmp_path}/t/partition=0/a.parquet"
    )
    s3 = S3Storage("s3://bucket/root", S3Settings(endpoint_url="http://127.0.0.1:1"))
    assert hadoop_scheme(s3.url) == "s3a"
    assert spark_uri(s3, "t/a.parquet") == "s3a://bucket/root/t/a.parquet"
    assert hadoop_scheme(MemoryStorage("memory://read-path").url) is None


def test_spark_reads_the_roots_its_hadoop_opens(spark: SparkSession, tmp_path: object) -> None:
    assert read_path_for(spark, LocalStorage(str(tmp_path))) is ReadPath.SPARK_PARQUET
    assert read_path_for(spark, MemoryStorage("memory://read-path")) is ReadPath.STORAGE_LAYER
    s3 = S3Storage("s3://bucket/root", S3Settings(endpoint_url="http://127.0.0.1:1"))
    assert read_path_for(spark, s3) is ReadPath.STORAGE_LAYER  # no hadoop-aws in this Spark


def _keyed_topic(catalog: Catalog, name: str) -> list[str]:
    catalog.create_topic(name, 1, {"cleanup.policy": "compact"})
    log = catalog.topic(name)
    for i in range(4):
        log.append([Record(f"v{i}-{j}".encode(), key=f"k{j % 3}".encode()) for j in range(5)])
    return [s.path for s in log.segments(0)]


def test_both_read_paths_keep_each_keys_latest_record(
    root: RootSpec, catalog: Catalog, spark: SparkSession
) -> None:
    _keyed_topic(catalog, "same")
    messages: list[str] = []
    report = compact_topic(catalog, "same", spark, force=True, progress=messages.append)
    assert report.status == "ok", report.message
    expected = "spark parquet" if root.s3 is None else "storage layer"
    assert any(f"({expected})" in m for m in messages), messages
    # Offsets 0-14 are cleaned (the active segment 15-19 is not): k0..k2 keep 12, 13, 14.
    assert [(o, k) for _, o, k, _, _ in read_all(catalog.topic("same"))] == [
        (12, b"k2"),
        (13, b"k0"),
        (14, b"k1"),
        *[(15 + j, f"k{j % 3}".encode()) for j in range(5)],
    ]


def test_a_segment_holding_offsets_outside_its_range_is_refused(
    catalog: Catalog, spark: SparkSession
) -> None:
    paths = _keyed_topic(catalog, "shifted")
    log = catalog.topic("shifted")
    reader = SegmentReader(catalog.storage, log.table_path)
    # Segment 0 (offsets 0..4) overwritten with the rows of segment 1 (offsets 5..9).
    rows = reader.read(log.segments(0)[1], 5, 100)
    target = join(log.table_path, paths[0])
    with catalog.storage.arrow_filesystem().open_output_stream(
        catalog.storage.arrow_path(target)
    ) as sink:
        pq.write_table(rows, sink)
    before, files = snapshot(catalog, "shifted"), data_files(catalog, "shifted")
    with pytest.raises(CorruptRecordError, match=r"holds offsets 5\.\.9 outside its range 0\.\.4"):
        compact_topic(catalog, "shifted", spark, force=True)
    assert snapshot(catalog, "shifted") == before
    assert data_files(catalog, "shifted") == files


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_segments_without_offset_statistics_are_checked_by_a_spark_scan(
    catalog: Catalog, spark: SparkSession
) -> None:
    paths = _keyed_topic(catalog, "plain")
    log = catalog.topic("plain")
    reader = SegmentReader(catalog.storage, log.table_path)
    first, second = log.segments(0)[0], log.segments(0)[1]
    first_rows, second_rows = reader.read(first, 0, 100), reader.read(second, 5, 100)

    def rewrite_without_statistics(path: str, rows: pa.Table) -> None:
        full = catalog.storage.arrow_path(join(log.table_path, path))
        pq.write_table(rows.cast(SEGMENT_SCHEMA), full, write_statistics=False)

    # Same rows, no statistics: compaction still runs and keeps the same records.
    rewrite_without_statistics(paths[0], first_rows)
    # Rows of segment 1 in segment 0's file, no statistics to tell: the scan refuses them.
    rewrite_without_statistics(paths[0], second_rows)
    with pytest.raises(CorruptRecordError, match=r"holds offsets 5\.\.9 outside its range 0\.\.4"):
        compact_topic(catalog, "plain", spark, force=True)
    rewrite_without_statistics(paths[0], first_rows)
    rewrite_without_statistics(paths[1], second_rows)
    report = compact_topic(catalog, "plain", spark, force=True)
    assert report.status == "ok", report.message
    assert [o for _, o, _, _, _ in read_all(log)] == [12, 13, 14, *range(15, 20)]


def test_headers_survive_compaction_exactly(catalog: Catalog, spark: SparkSession) -> None:
    catalog.create_topic("headed", 1, {"cleanup.policy": "compact"})
    log = catalog.topic("headed")
    shapes: list[list[tuple[str, bytes | None]]] = [
        [("bin", b"\x00\xff\n"), ("none", None), ("text", "é".encode())],
        [],
        [("only", b"")],
    ]
    for i, headers in enumerate(shapes):
        log.append([Record(b"old", key=f"k{i}".encode(), headers=[("old", b"1")])])
        log.append([Record(f"v{i}".encode(), key=f"k{i}".encode(), headers=headers)])
    log.append([Record(b"head", key=b"head")])
    report = compact_topic(catalog, "headed", spark, force=True)
    assert report.status == "ok", report.message
    log.refresh()
    fetched = log.read(0, log.log_start_offset(0), max_records=100).to_records("headed")
    assert [(r.key, list(r.headers)) for r in fetched] == [
        *[(f"k{i}".encode(), headers) for i, headers in enumerate(shapes)],
        (b"head", []),
    ]


def test_record_ids_are_unique_and_fall_back_when_they_would_not_fit(spark: SparkSession) -> None:
    """Packed (partition, offset) ids never collide; a span too wide for 62 bits is refused."""
    assert record_id(None) is None
    assert record_id((0, 2**60, 8)) is None
    packed = record_id((5, 1_000, 3))
    assert packed is not None
    pairs = [(p, o) for p in range(3) for o in (5, 6, 999, 1_000)]
    frame = spark.createDataFrame(pairs, "partition int, offset long")
    ids = [row[0] for row in frame.select(packed).collect()]
    assert len(set(ids)) == len(pairs)
