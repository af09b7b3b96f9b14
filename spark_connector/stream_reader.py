"""Structured Streaming source: ``spark.readStream.format("lakelog")``.

Offsets, triggers and rate limits behave as Spark's Kafka source does (see
spark_connector/README.md, "Streaming"), so checkpoints read like a Kafka
query's; a restart from a checkpoint re-plans any uncommitted batch from the
same offsets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from lakelog.errors import OffsetOutOfRangeError
from lakelog.structs import TopicPartition
from spark_connector.offsets import data_loss, start_offsets
from spark_connector.options import ReadOptions, SubscribePattern
from spark_connector.planning import (
    PartitionSnapshot,
    ReadSplit,
    offsets_from_json,
    offsets_to_json,
    plan_splits,
    rate_limit,
)
from spark_connector.reading import read_split, storage_for
from spark_connector.topics import TopicSource

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]
#: Seconds on a monotonic scale; only differences matter (``time.monotonic`` by default).
Clock = Callable[[], float]


def effective_starts(
    start: Offsets, snapshots: Sequence[PartitionSnapshot], fail_on_data_loss: bool
) -> Offsets:
    """Where each current partition continues from: its checkpointed offset, else earliest.

    An offset below the log start (retention removed unread data), or above
    the high watermark (the topic was deleted and re-created), is data loss.
    """
    out: Offsets = {}
    for snap in snapshots:
        offset = start.get(snap.key)
        if offset is None:
            out[snap.key] = snap.log_start  # a new partition or topic: from its beginning
        elif offset < snap.log_start:
            out[snap.key] = data_loss(
                snap, offset, fail_on_data_loss, f"the query is at offset {offset}"
            )
        elif offset > snap.high_watermark:
            message = (
                f"the query is at offset {offset} of {snap.topic}-{snap.partition}, past its "
                f"high watermark {snap.high_watermark} (was the topic deleted and re-created?)"
            )
            if fail_on_data_loss:
                raise OffsetOutOfRangeError(
                    f"{message}; set failOnDataLoss=false to restart it from the log start"
                )
            log.warning("%s; restarting from %d", message, snap.log_start)
            out[snap.key] = snap.log_start
        else:
            out[snap.key] = offset
    return out


class WarmUp(InputPartition):
    """A task that reads nothing: it starts a Python worker and opens the root in it."""

    def __init__(self) -> None:
        super().__init__(None)


class LakelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Lives in one long-running Python process on the driver; tasks get a pickled copy.

    ``clock`` measures maxTriggerDelay; tests pass their own to step time exactly.
    """

    def __init__(
        self, opts: ReadOptions, clock: Clock = time.monotonic, typed: Sequence[pa.Field] = ()
    ) -> None:
        self.opts = opts
        #: The typed columns of the stream, fixed when it starts (``LakelogDataSource.typed``).
        self.typed = tuple(typed)
        self._clock = clock
        self._source: TopicSource | None = None
        self._target: Offsets | None = None  # AvailableNow: never read past these
        self._last_trigger = clock()
        self._latest: Offsets | None = None
        self._named: list[str] | None = None  # subscribe/assign: checked to exist once
        self._warmed = False

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts}  # tasks only need the options

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["opts"])  # type: ignore[misc]

    # -- driver ----------------------------------------------------------------

    @property
    def source(self) -> TopicSource:
        if self._source is None:
            self._source = TopicSource(self.opts.storage)
        return self._source

    def _topics(self) -> list[str]:
        """The subscribed topics: listed every trigger for a pattern, checked once otherwise.

        A named topic deleted later still fails the trigger: opening it raises.
        """
        if isinstance(self.opts.subscription, SubscribePattern):
            return self.source.topics(self.opts.subscription)
        if self._named is None:
            self._named = self.source.topics(self.opts.subscription)
        return self._named

    def _snapshots(self, segments_from: Offsets | None = None) -> list[PartitionSnapshot]:
        """Log starts and high watermarks; segments only when planning (from ``segments_from``)."""
        return self.source.snapshots(
            self.opts.subscription,
            self._topics(),
            segments=segments_from is not None,
            segments_from=segments_from,
        )

    def initialOffset(self) -> dict[str, Any]:
        starts = start_offsets(self.opts, self._snapshots(), self.source.offset_for_timestamp)
        return offsets_to_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {s.key: s.high_watermark for s in self._snapshots()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        snapshots = self._snapshots()
        begin = effective_starts(offsets_from_json(start), snapshots, self.opts.fail_on_data_loss)
        available = {s.key: s.high_watermark for s in snapshots}
        self._latest = dict(available)
        if self._target is not None:
            available = {
                key: min(hwm, self._target[key]) if key in self._target else begin[key]
                for key, hwm in available.items()
            }
        backlog = {key: max(0, available[key] - begin[key]) for key in begin}
        if not isinstance(limit, ReadAllAvailable):  # ReadAllAvailable overrides the options
            minimum = (
                limit.min_rows
                if isinstance(limit, ReadMinRows)
                else self.opts.min_offsets_per_trigger
            )
            if self._waiting_for_more(minimum, sum(backlog.values())):
                return start
            if isinstance(limit, ReadMaxRows):
                backlog = rate_limit(backlog, limit.max_rows)
        end = {key: begin[key] + backlog[key] for key in begin}
        result = offsets_to_json(end)
        if result == start:
            return start  # nothing new: Spark compares the JSON text
        self._last_trigger = self._clock()
        return result

    def _waiting_for_more(self, minimum: int | None, backlog: int) -> bool:
        """minOffsetsPerTrigger: too little waiting and maxTriggerDelay not yet passed."""
        if minimum is None or self._target is not None or backlog >= minimum:
            return False
        waited_ms = (self._clock() - self._last_trigger) * 1000
        return waited_ms < self.opts.max_trigger_delay_ms

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ends = offsets_from_json(end)
        if not ends or start == end:
            return self._warm_up()
        starts = offsets_from_json(start)
        snapshots = [s for s in self._snapshots(segments_from=starts) if s.key in ends]
        begin = effective_starts(starts, snapshots, self.opts.fail_on_data_loss)
        missing = sorted(set(ends) - {s.key for s in snapshots})
        if missing and self.opts.fail_on_data_loss:
            listed = ", ".join(f"{t}-{p}" for t, p in missing)
            raise OffsetOutOfRangeError(
                f"partitions {listed} disappeared (topic deleted?) before offsets up to "
                f"{end} were read; set failOnDataLoss=false to skip them"
            )
        ranges = [(s, begin[s.key], ends[s.key]) for s in snapshots]
        self._warmed = True  # this batch's tasks start the workers
        return plan_splits(
            ranges, max_records=self.opts.max_records_per_partition, min_partitions=None
        )

    def _warm_up(self) -> Sequence[InputPartition]:
        """An empty first micro-batch starts a reading worker, off the first records' latency."""
        if self._warmed:
            return []
        self._warmed = True
        return [WarmUp()]

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the checkpoint is the query's position (no consumer group)."""

    def stop(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None

    # -- tasks -------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, WarmUp):
            storage_for(self.opts.storage)
            return iter(())
        assert isinstance(partition, ReadSplit)
        return read_split(
            self.opts.storage,
            partition,
            self.opts.include_headers,
            self.opts.fail_on_data_loss,
            self.typed,
        )
