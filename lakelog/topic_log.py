"""One topic's partitioned log on its Delta table: append, read by offset, offsets.

The facade other code holds (``Catalog.topic`` returns one). It only joins
the parts, each with one job:

- ``lakelog.topic_table``: the table conventions and ``TopicTable`` (the
  table's committer, ``lakelog.delta.table.TableCommitter``, and the offset
  index it keeps current);
- ``lakelog.append``: prepare, stage and commit produce requests;
- ``lakelog.fetch``: read a partition from an offset, offsets by time;
- ``lakelog.segments``: segment files and the pool that writes them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from lakelog.append import (
    Appender,
    AppendListener,
    AppendResult,
    PartitionBatch,
    StagedAppend,
)
from lakelog.append import (
    prepare as prepare_request,
)
from lakelog.commit_stats import CommitStats
from lakelog.delta.actions import Action, Metadata
from lakelog.delta.state import TableState
from lakelog.delta.table import COMMIT_ID, ENGINE, CheckpointRequester, TableCommitter
from lakelog.errors import LakelogError
from lakelog.fetch import FetchResult, offset_for_timestamp, offset_of_max_timestamp
from lakelog.fetch import read as read_partition
from lakelog.internal_topics import InternalWriter
from lakelog.offset_index import Segment
from lakelog.partition_state import PartitionState
from lakelog.partitioner import Partitioner, make_keyless_partitioner
from lakelog.produce import PreparedBatch
from lakelog.produce_batch import ProduceInput
from lakelog.segments import (
    DEFAULT_COMPRESSION,
    SEGMENT_IO_THREADS,
    SegmentReader,
    SegmentWriter,
)
from lakelog.storage import Storage
from lakelog.topic_config import TopicConfig
from lakelog.topic_table import (
    CONFIG_PARTITIONS,
    CONFIG_PREFIX,
    PARTITION_TXN_PREFIX,
    TopicTable,
    partition_txn,
    table_configuration,
    topic_config_of,
)

__all__ = [
    "COMMIT_ID",
    "CONFIG_PARTITIONS",
    "CONFIG_PREFIX",
    "ENGINE",
    "PARTITION_TXN_PREFIX",
    "SEGMENT_IO_THREADS",
    "AppendListener",
    "AppendResult",
    "CheckpointRequester",
    "FetchResult",
    "PartitionBatch",
    "PartitionState",
    "StagedAppend",
    "TopicLog",
    "partition_txn",
    "table_configuration",
    "topic_config_of",
]


class TopicLog:
    """Append to and read from one topic's Delta table. Thread-safe; one per process per topic."""

    def __init__(
        self,
        storage: Storage,
        name: str,
        table_path: str,
        *,
        checkpoint_interval: int = 100,
        keyless_partitioner: Partitioner | None = None,
        compression: str = DEFAULT_COMPRESSION,
        commit_timeout_s: float = 30.0,
        checkpointer: CheckpointRequester | None = None,
    ) -> None:
        self.storage = storage
        self.name = name
        self.table_path = table_path
        self.compression = compression
        self.table = TopicTable(
            storage,
            name,
            table_path,
            checkpoint_interval=checkpoint_interval,
            commit_timeout_s=commit_timeout_s,
            checkpointer=checkpointer,
        )
        self._keyless = keyless_partitioner or make_keyless_partitioner("sticky")
        self._reader = SegmentReader(storage, table_path)
        self._writer = SegmentWriter(storage, table_path, name, compression)
        self._appender = Appender(self.table, self._writer, self._reader)

    # -- snapshot ------------------------------------------------------------

    @property
    def checkpoint_interval(self) -> int:
        return self.committer.checkpoint_interval

    @property
    def commit_timeout_s(self) -> float:
        return self.committer.commit_timeout_s

    @property
    def committer(self) -> TableCommitter:
        """The table's committer: every change to the table is committed through it."""
        return self.table.committer

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
    def topic_id(self) -> str:
        return self.table.topic_id

    def refresh(self) -> bool:
        """Pick up commits made by other processes; True if anything new was found."""
        return self.table.refresh()

    def check_partition(self, partition: int) -> None:
        self.table.check_partition(partition)

    def txn_version(self, app_id: str) -> int | None:
        """The latest version of a Delta app transaction (None if never written)."""
        return self.table.txn_version(app_id)

    def live_paths(self) -> set[str]:
        """Paths of the segments in the current snapshot."""
        return self.table.live_paths()

    def high_watermark(self, partition: int) -> int:
        return self.table.high_watermark(partition)

    def log_start_offset(self, partition: int) -> int:
        return self.table.log_start_offset(partition)

    def partition_state(self, partition: int) -> PartitionState:
        return self.table.partition_state(partition)

    def segments(self, partition: int) -> list[Segment]:
        return self.table.segments(partition)

    # -- commit protocol -----------------------------------------------------

    def commit(
        self,
        build: Callable[[TableState], list[Action]],
        operation: str,
        parameters: dict[str, str] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> int:
        """Commit what ``build`` derives from the latest state (``TableCommitter.commit``)."""
        return self.committer.commit(build, operation, parameters, ready)

    def wait_for_checkpoints(self) -> None:
        """Block until a background checkpoint (if any) has finished; for tests and shutdown."""
        self.committer.wait_for_checkpoints()

    def close(self) -> None:
        """Stop the background pools. The log stays usable: a caller still holding it gets
        new pools, or runs the work itself."""
        self.committer.close()
        self._writer.close()

    def closer(self, wait: bool = False) -> Callable[[], None]:
        """``close`` as a function that does not hold this log, for ``weakref.finalize``.

        A finalizer must not wait for the pools' threads (it may run on one of them);
        an owner closing everything at shutdown does (``wait=True``).
        """
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
    ) -> PreparedBatch:
        """Validate one request's records against the topic; nothing is written.

        An internal topic refuses every request but its owner's, which carry
        the owner's ``writer`` (``lakelog.internal_topics``). A producer that
        numbers its records per partition (Kafka's protocol) names the
        partition in ``sequence_partition``.
        """
        return prepare_request(
            self.table,
            self._keyless,
            records,
            producer_id,
            base_sequence,
            writer=writer,
            sequence_partition=sequence_partition,
        )

    def append(
        self,
        records: ProduceInput,
        producer_id: int | None = None,
        base_sequence: int | None = None,
    ) -> AppendResult:
        """Append a batch: one segment per partition touched, one Delta commit in all.

        Records without a partition get one from their key (Kafka's murmur2) or,
        keyless, from the sticky partitioner. All records are validated before
        anything is written, so a bad record leaves the topic untouched. With a
        producer id and base sequence, a retry of an append that was already
        committed returns the original offsets instead of writing twice.
        """
        (result,) = self.append_prepared([self.prepare(records, producer_id, base_sequence)])
        if isinstance(result, LakelogError):
            raise result
        return result

    def append_once(self, records: ProduceInput, app_id: str, version: int) -> AppendResult:
        """Append exactly once per (app_id, version): a repeat is a no-op (``duplicate``).

        The marker is a Delta app transaction committed atomically with the
        records, so a writer that crashed after committing and retries (a Spark
        streaming micro-batch, say) cannot write the batch twice. Versions of
        one app id must increase.
        """
        (result,) = self.append_prepared([self.prepare(records)], app_transaction=(app_id, version))
        if isinstance(result, LakelogError):
            raise result
        return result

    def append_prepared(
        self,
        batches: Sequence[PreparedBatch],
        app_transaction: tuple[str, int] | None = None,
    ) -> list[AppendResult | LakelogError]:
        """Commit many prepared requests together (group commit); one result per request.

        Requests that repeat an idempotent producer's committed sequences get
        their original result; ones that skip sequences get
        OUT_OF_ORDER_SEQUENCE_NUMBER; the rest share one Delta commit. With
        ``app_transaction`` the whole commit happens at most once (see
        ``append_once``).
        """
        return self._appender.append(batches, app_transaction)

    def stage(self, batches: Sequence[PreparedBatch]) -> StagedAppend:
        """Write the segments of a group commit at predicted offsets; nothing is visible yet.

        The prediction continues after every append staged before and not yet
        committed, so successive stages line up. Follow with ``commit_staged``
        (in staging order, for the predictions to hold) or ``abandon``.
        Every append passes here, so this is where an internal topic refuses
        batches that do not carry its owner's writer, however they were made.
        """
        return self._appender.stage(batches)

    def abandon(self, staged: StagedAppend) -> None:
        """Drop a staged append that will not be committed (its segments were never visible)."""
        self._appender.abandon(staged)

    def commit_staged(
        self, staged: StagedAppend, app_transaction: tuple[str, int] | None = None
    ) -> list[AppendResult | LakelogError]:
        """Commit a staged append (see ``append_prepared`` for the per-request outcomes)."""
        return self._appender.commit_staged(staged, app_transaction)

    def find_producer_records(
        self,
        producer_id: int,
        base_sequence: int,
        count: int,
        max_segments: int = 64,
        partitions: Sequence[int] | None = None,
    ) -> AppendResult | None:
        """Look up records of a producer's sequence range in the newest segments."""
        return self._appender.find_producer_records(
            producer_id, base_sequence, count, max_segments, partitions
        )

    def add_append_listener(self, listener: AppendListener) -> None:
        """Call ``listener(partition, rows_with_offsets)`` after each append of this process.

        Lets a broker keep recent batches in memory for caught-up consumers and
        wake long polls without touching storage (see ``AppendListener``).
        """
        self._appender.add_listener(listener)

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
