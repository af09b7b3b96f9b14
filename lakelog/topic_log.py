"""One topic's partitioned log on its Delta table: append, read by offset, offsets.

The facade other code holds (``Catalog.topic`` returns one). It holds the table
rather than being one: the table is the committer's view, and the log's finalizer
must not be kept alive by its committer.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence

import pyarrow as pa

from lakelog.append import Appender, AppendResult, StagedAppend
from lakelog.commit_stats import CommitStats
from lakelog.delta.actions import Metadata
from lakelog.delta.table import CheckpointRequester, TableCommitter
from lakelog.errors import LakelogError
from lakelog.fetch import FetchResult, offset_for_timestamp, offset_of_max_timestamp
from lakelog.fetch import read as read_partition
from lakelog.internal_topics import InternalWriter
from lakelog.partitioner import make_keyless_partitioner
from lakelog.produce import PreparedBatch, RecordCheck, prepare_batch
from lakelog.produce_batch import ProduceInput
from lakelog.segments import (
    DEFAULT_COMPRESSION,
    SEGMENT_IO_THREADS,
    SegmentReader,
    SegmentWriter,
)
from lakelog.storage import Storage
from lakelog.topic_config import TopicConfig
from lakelog.topic_table import TopicTable
from lakelog.typed_columns import TYPED_COLUMNS, typed_fields

__all__ = ["SEGMENT_IO_THREADS", "AppendResult", "FetchResult", "StagedAppend", "TopicLog"]


class TopicLog:
    """Append to and read from one topic's Delta table. Thread-safe; one per process per topic."""

    def __init__(
        self,
        storage: Storage,
        name: str,
        table_path: str,
        *,
        checkpoint_interval: int = 100,
        checkpointer: CheckpointRequester | None = None,
    ) -> None:
        self.storage = storage
        self.name = name
        self.table_path = table_path
        self.compression = DEFAULT_COMPRESSION
        self.table = table = TopicTable(
            storage,
            name,
            table_path,
            checkpoint_interval=checkpoint_interval,
            checkpointer=checkpointer,
        )
        #: The table's committer: every change to the table is committed through it.
        self.committer: TableCommitter = table.committer
        self.refresh = table.refresh
        self.check_partition = table.check_partition
        self.txn_version = table.txn_version
        self.live_paths = table.live_paths
        self.high_watermark = table.high_watermark
        self.log_start_offset = table.log_start_offset
        self.partition_state = table.partition_state
        self.segments = table.segments
        #: Block until a background checkpoint (if any) has finished; for tests and shutdown.
        self.wait_for_checkpoints = table.committer.wait_for_checkpoints
        #: The schema check of topics that validate on produce (set by a broker).
        self.record_check: RecordCheck | None = None
        self._keyless = make_keyless_partitioner("sticky")
        self._reader = SegmentReader(storage, table_path)
        self._writer = SegmentWriter(storage, table_path, name, self.compression)
        #: Stages and commits prepared requests (``stage``, ``commit_staged``, ``abandon``),
        #: and tells its listeners of each commit (``add_listener``).
        self.appender = Appender(table, self._writer, self._reader)

    @property
    def version(self) -> int:
        return self.table.version

    @property
    def commit_stats(self) -> CommitStats:
        """This writer's commits, lost races and renumberings since the log was opened."""
        return self.committer.commit_stats

    @property
    def metadata(self) -> Metadata:
        return self.table.metadata

    @property
    def config(self) -> TopicConfig:
        return self.table.config

    @property
    def num_partitions(self) -> int:
        return self.table.num_partitions

    @property
    def typed_fields(self) -> tuple[pa.Field, ...]:
        """The table's typed columns (``lakelog.typed_columns``), in their order in segments."""
        found = typed_fields(self.table.metadata)
        return tuple(found[name] for name in TYPED_COLUMNS if name in found)

    @property
    def topic_id(self) -> str:
        return self.table.topic_id

    def close(self) -> None:
        """Stop the background pools. The log stays usable: a caller still holding it gets
        new pools, or runs the work itself."""
        self.committer.close()
        self._writer.close()

    def closer(self, wait: bool = False) -> Callable[[], None]:
        """``close`` as a function that does not hold this log, for ``weakref.finalize``
        (which must not wait: it may run on a pool thread; shutdown does, ``wait=True``)."""
        return functools.partial(_stop_pools, self.committer, self._writer, wait)

    # -- append --------------------------------------------------------------

    def prepare(
        self,
        records: ProduceInput,
        producer_id: int | None = None,
        base_sequence: int | None = None,
        *,
        writer: InternalWriter | None = None,
        sequence_partition: int | None = None,
        record_check: RecordCheck | None = None,
    ) -> PreparedBatch:
        """Validate one request's records against the topic; nothing is written.

        ``writer``: an internal topic's owner (``lakelog.internal_topics``);
        ``sequence_partition``: the partition a per-partition sequence numbers;
        ``record_check``: instead of the log's own (``record_check``), for a caller
        that has checked the records already.
        """
        return prepare_batch(
            records,
            topic=self.name,
            num_partitions=self.table.num_partitions,
            config=self.table.config,
            keyless=self._keyless,
            now_ms=int(time.time() * 1000),
            producer_id=producer_id,
            base_sequence=base_sequence,
            writer=writer,
            sequence_partition=sequence_partition,
            record_check=record_check or self.record_check,
        )

    def append(
        self,
        records: ProduceInput,
        producer_id: int | None = None,
        base_sequence: int | None = None,
    ) -> AppendResult:
        """Append a batch: one segment per partition touched, one Delta commit in all.

        All records are validated before anything is written. With a producer id and
        base sequence, a retry of a committed append returns the original offsets.
        """
        return self._append_one(self.prepare(records, producer_id, base_sequence))

    def append_once(self, records: ProduceInput, app_id: str, version: int) -> AppendResult:
        """Append exactly once per (app_id, version): a repeat is a no-op (``duplicate``).

        The marker is a Delta app transaction committed with the records, so a retry
        after a crash (a Spark micro-batch) cannot write twice. Versions must increase.
        """
        return self._append_one(self.prepare(records), (app_id, version))

    def _append_one(
        self, batch: PreparedBatch, app_transaction: tuple[str, int] | None = None
    ) -> AppendResult:
        (result,) = self.append_prepared([batch], app_transaction)
        if isinstance(result, LakelogError):
            raise result
        return result

    def append_prepared(
        self,
        batches: Sequence[PreparedBatch],
        app_transaction: tuple[str, int] | None = None,
    ) -> list[AppendResult | LakelogError]:
        """Commit many prepared requests together (group commit); one result per request
        (``Appender.commit_staged``); with ``app_transaction`` at most once (``append_once``)."""
        return self.appender.commit_staged(self.appender.stage(batches), app_transaction)

    # -- read ----------------------------------------------------------------

    def read(
        self,
        partition: int,
        offset: int,
        max_records: int = 500,
        max_bytes: int = 1024 * 1024,
    ) -> FetchResult:
        """Records from ``offset`` on; the first record is returned even if over ``max_bytes``
        (``lakelog.fetch.read``)."""
        return read_partition(self.table, self._reader, partition, offset, max_records, max_bytes)

    def offset_for_timestamp(self, partition: int, timestamp_ms: int) -> tuple[int, int] | None:
        """First (offset, timestamp) with timestamp >= ``timestamp_ms`` (Kafka's ListOffsets)."""
        return offset_for_timestamp(self.table, self._reader, partition, timestamp_ms)

    def offset_of_max_timestamp(self, partition: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the partition's largest timestamp (ListOffsets MAX_TIMESTAMP)."""
        return offset_of_max_timestamp(self.table, self._reader, partition)


def _stop_pools(committer: TableCommitter, writer: SegmentWriter, wait: bool) -> None:
    committer.close(wait)
    writer.close(wait)
