"""Batch reads: ``spark.read.format("lakelog")``, planned on the driver, read in tasks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from spark_connector.offsets import check_end, resolve, start_offsets
from spark_connector.options import Latest, ReadOptions
from spark_connector.planning import (
    PartitionSnapshot,
    ReadSplit,
    ScanBounds,
    plan_splits,
    push_filters,
)
from spark_connector.reading import read_split
from spark_connector.topics import TopicSource, open_topics


def plan_batch(
    opts: ReadOptions, source: TopicSource, bounds: ScanBounds | None = None
) -> list[ReadSplit]:
    """The input partitions of a batch read, given the root as ``source`` sees it now."""
    bounds = bounds or ScanBounds()
    topics = [t for t in source.topics(opts.subscription) if bounds.allows_topic(t)]
    snapshots = [
        s
        for s in source.snapshots(opts.subscription, topics)
        if bounds.allows_partition(s.partition)
    ]
    ranges = batch_ranges(opts, source, snapshots)
    return plan_splits(
        [(s, *ranges[s.key]) for s in snapshots],
        bounds,
        opts.max_records_per_partition,
        opts.min_partitions,
    )


def batch_ranges(
    opts: ReadOptions, source: TopicSource, snapshots: Sequence[PartitionSnapshot]
) -> dict[tuple[str, int], tuple[int, int]]:
    starts = start_offsets(opts, snapshots, source.offset_for_timestamp)
    end_option = opts.ending.option if opts.ending else "endingOffsets"
    ends = resolve(opts.ending, Latest(), snapshots, source.offset_for_timestamp, is_start=False)
    check_end(starts, ends, snapshots, end_option)
    return {key: (starts[key], ends[key]) for key in starts}


class LakelogBatchReader(DataSourceReader):
    """Picklable: holds options and pushed bounds only; the catalog is opened per call."""

    def __init__(self, opts: ReadOptions, typed: Sequence[pa.Field] = ()) -> None:
        self.opts = opts
        #: The typed columns of the read (``LakelogDataSource.typed``).
        self.typed = tuple(typed)
        self.bounds = ScanBounds()

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        self.bounds, rest = push_filters(filters)
        return rest

    def partitions(self) -> Sequence[InputPartition]:
        with open_topics(self.opts.storage) as source:
            return plan_batch(self.opts, source, self.bounds)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ReadSplit):
            return iter(())  # Spark's placeholder when nothing is to be read
        return read_split(
            self.opts.storage,
            partition,
            self.opts.include_headers,
            self.opts.fail_on_data_loss,
            self.typed,
        )
