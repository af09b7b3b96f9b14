"""What a caught-up stream's trigger costs: no segment lists for latestOffset, a warm reader.

Driven in-process, as Spark drives the reader; the Spark streaming tests show
the same reader inside real queries.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from lakelog.catalog import Catalog
from lakelog.records import Record
from spark_connector.planning import ReadSplit
from spark_connector.schema import spark_schema
from spark_connector.source import LakelogDataSource
from spark_connector.stream_reader import LakelogStreamReader, WarmUp
from spark_connector.topics import TopicSource
from tests.fixtures.roots import RootSpec
from tests.spark_connector.helpers import root_options


def _reader(root: RootSpec, **options: str) -> LakelogStreamReader:
    reader = LakelogDataSource({**root_options(root), **options}).streamReader(spark_schema(False))
    assert isinstance(reader, LakelogStreamReader)
    return reader


def test_triggers_read_positions_only_and_plan_from_the_start_offset(
    root: RootSpec, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    for i in range(6):  # six segments per partition
        log.append([Record(b"%d" % i, partition=p) for p in (0, 1)])
    calls: list[dict[str, Any]] = []
    listings: list[int] = []
    snapshots, topics = TopicSource.snapshots, TopicSource.topics

    def spy_snapshots(self: TopicSource, *args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return snapshots(self, *args, **kwargs)

    def spy_topics(self: TopicSource, *args: Any, **kwargs: Any) -> Any:
        listings.append(1)
        return topics(self, *args, **kwargs)

    monkeypatch.setattr(TopicSource, "snapshots", spy_snapshots)
    monkeypatch.setattr(TopicSource, "topics", spy_topics)
    reader = _reader(root, subscribe="t", startingOffsets="earliest")
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {"t": {"0": 6, "1": 6}}
        for i in range(3):
            log.append([Record(b"new%d" % i, partition=0)])
            latest = reader.latestOffset(end, ReadAllAvailable())
            assert latest == {"t": {"0": 7 + i, "1": 6}}
            splits = reader.partitions(end, latest)
            (split,) = splits
            assert isinstance(split, ReadSplit)
            assert (split.start, split.end, len(split.segments)) == (6 + i, 7 + i, 1)
            end = latest
        assert [c.get("segments", False) for c in calls] == [False, False] + [False, True] * 3
        assert all(c.get("segments_from") for c in calls if c.get("segments"))
        assert len(listings) == 1  # the named topic was checked once
    finally:
        reader.stop()


def test_a_query_that_starts_caught_up_warms_its_reader_once(
    root: RootSpec, catalog: Catalog
) -> None:
    catalog.create_topic("t", 1)
    catalog.topic("t").append([Record(b"old")])
    reader = _reader(root, subscribe="t")  # from latest: caught up
    try:
        start = reader.initialOffset()
        assert reader.latestOffset(start, ReadAllAvailable()) == start
        (warm,) = reader.partitions(start, start)
        assert isinstance(warm, WarmUp)
        assert list(reader.read(warm)) == []
        assert reader.partitions(start, start) == []
    finally:
        reader.stop()
