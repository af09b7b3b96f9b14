"""One topic's partitioned log on its Delta table: append, read by offset, offsets.

The commit protocol (docs/architecture.md, "Offsets without a coordinator"): the high
watermark of partition p is the version of the Delta app transaction
``lakelog.partition.<p>``. An append writes its segments for offsets starting
at those watermarks and commits them, with transactions carrying the new
watermarks, as the next table version via put-if-absent. If another writer
took that version first, the new commits are read; when none of them moved a
partition this append touches, the same segments are committed at the next
version; otherwise they are renumbered and rewritten. An offset is therefore
assigned exactly once, in order, with no gap, by any number of processes.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.commit_stats import CommitStats
from lakelog.delta.actions import Action, CommitInfo, Metadata, Txn
from lakelog.delta.checkpoint import (
    AddRowCache,
    CheckpointSnapshot,
    snapshot_of,
    write_checkpoint,
)
from lakelog.delta.log import DeltaLog
from lakelog.delta.state import TableState
from lakelog.errors import (
    AmbiguousCommitError,
    ConcurrentCommitError,
    DuplicateSequenceError,
    InvalidRequestError,
    KafkaStorageError,
    LakelogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from lakelog.internal_topics import InternalWriter, check_append
from lakelog.offset_index import OffsetIndex, Segment
from lakelog.partitioner import Partitioner, make_keyless_partitioner
from lakelog.produce import (
    PreparedBatch,
    SequenceCheck,
    check_sequences,
    prepare_batch,
    producer_txn,
)
from lakelog.produce_batch import ProduceInput
from lakelog.records import (
    SEGMENT_SCHEMA,
    ConsumerRecord,
    table_to_records,
    with_offsets,
)
from lakelog.segments import DEFAULT_COMPRESSION, SegmentReader, add_action, write_segment
from lakelog.storage import Storage, join
from lakelog.topic_config import TopicConfig

log = logging.getLogger(__name__)
T = TypeVar("T")
#: Asks for a checkpoint of (table path, version) to be written elsewhere
#: (``checkpoint_process.CheckpointProcess.request``); must return at once.
CheckpointRequester = Callable[[str, int], None]

PARTITION_TXN_PREFIX = "lakelog.partition."
CONFIG_PARTITIONS = "lakelog.partitions"
CONFIG_PREFIX = "lakelog.config."
COMMIT_ID = "lakelog.commitId"
ENGINE = "lakelog/0.1.0"
#: Threads writing and flushing one append's segments (one per partition touched) in parallel.
SEGMENT_IO_THREADS = 8


def partition_txn(partition: int) -> str:
    return f"{PARTITION_TXN_PREFIX}{partition}"


def topic_config_of(metadata: Metadata) -> TopicConfig:
    conf = metadata.configuration
    return TopicConfig(
        {k[len(CONFIG_PREFIX) :]: v for k, v in conf.items() if k.startswith(CONFIG_PREFIX)}
    )


def table_configuration(partitions: int, config: TopicConfig) -> dict[str, str]:
    """The Delta table configuration that stores a topic's partition count and overrides."""
    conf = {CONFIG_PARTITIONS: str(partitions)}
    conf.update({CONFIG_PREFIX + k: v for k, v in config.overrides.items()})
    return conf


@dataclass(frozen=True, slots=True)
class PartitionBatch:
    """The records one append placed in one partition."""

    partition: int
    base_offset: int
    count: int


IntColumn = Sequence[int] | npt.NDArray[np.int64] | npt.NDArray[np.int32]


def _as_list(column: IntColumn) -> list[int]:
    return column.tolist() if isinstance(column, np.ndarray) else list(column)


class AppendResult:
    """Where every appended record landed, in input order.

    The per-record columns are kept as numpy arrays and turned into Python
    lists only when asked for: a 10,000-record append would otherwise spend
    more time building three lists of ints than committing, and a broker
    answering with per-partition base offsets (``batches``) never needs them.
    """

    __slots__ = ("_offsets", "_partitions", "_timestamps_ms", "batches", "duplicate", "version")

    def __init__(
        self,
        partitions: IntColumn,
        offsets: IntColumn,
        timestamps_ms: IntColumn,
        batches: list[PartitionBatch],
        version: int,
        duplicate: bool = False,
    ) -> None:
        self._partitions = partitions
        self._offsets = offsets
        self._timestamps_ms = timestamps_ms
        self.batches = batches
        self.version = version
        #: True when this is the original result of a retried idempotent request.
        self.duplicate = duplicate

    @property
    def num_records(self) -> int:
        return len(self._offsets)

    @property
    def partitions(self) -> list[int]:
        """Partition of each record, in input order."""
        self._partitions = _as_list(self._partitions)
        return self._partitions

    @property
    def offsets(self) -> list[int]:
        """Offset of each record, in input order."""
        self._offsets = _as_list(self._offsets)
        return self._offsets

    @property
    def timestamps_ms(self) -> list[int]:
        """Stored timestamp (ms) of each record, in input order."""
        self._timestamps_ms = _as_list(self._timestamps_ms)
        return self._timestamps_ms

    def arrays(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(partitions, offsets, timestamps_ms) as int64 numpy arrays, without building lists."""
        return (
            np.asarray(self._partitions, dtype=np.int64),
            np.asarray(self._offsets, dtype=np.int64),
            np.asarray(self._timestamps_ms, dtype=np.int64),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AppendResult):
            return NotImplemented
        return (
            self.partitions == other.partitions
            and self.offsets == other.offsets
            and self.timestamps_ms == other.timestamps_ms
            and self.batches == other.batches
            and (self.version, self.duplicate) == (other.version, other.duplicate)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable caches; like the dataclass before

    def __repr__(self) -> str:
        return (
            f"AppendResult(records={self.num_records}, batches={self.batches!r}, "
            f"version={self.version}, duplicate={self.duplicate})"
        )


@dataclass(frozen=True)
class PartitionState:
    partition: int
    log_start_offset: int
    high_watermark: int
    size_bytes: int
    num_segments: int
    num_records: int


@dataclass(frozen=True)
class FetchResult:
    """Records of one partition from an offset, with the partition's bounds at read time."""

    partition: int
    records: pa.Table
    high_watermark: int
    log_start_offset: int
    next_offset: int

    def to_records(self, topic: str) -> list[ConsumerRecord]:
        return table_to_records(topic, self.partition, self.records)


@dataclass
class _PreparedAppend:
    """Segments written for one attempt, reusable while their base offsets stay valid."""

    bases: dict[int, int] = field(default_factory=dict)
    segments: dict[int, Segment] = field(default_factory=dict)

    def discard(self, storage: Storage, table_path: str) -> None:
        """Delete segments that were written but never committed (nobody can see them)."""
        for segment in self.segments.values():
            storage.delete(join(table_path, segment.path))
        self.segments.clear()
        self.bases.clear()


@dataclass
class StagedAppend:
    """Requests whose segments are written, at predicted offsets, but not yet committed.

    Staging is the slow part of an append (encoding Parquet, fsync) and needs
    no lock, so a broker stages its next group commit while the previous one
    is committing. The commit checks the prediction and rewrites any segment
    whose partition moved on meanwhile (another writer, a failed commit).
    """

    batches: list[PreparedBatch]
    by_partition: dict[int, pa.Table]
    locate: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]]
    prepared: _PreparedAppend
    released: bool = False
    #: per segment path: its flush to stable storage, running while the commit is prepared
    flushes: dict[str, Future[None]] = field(default_factory=dict)

    def wait_flushed(self) -> None:
        """Block until every staged segment still to be committed is durable.

        Runs just before the commit file is published: the flush overlaps
        building and writing the commit instead of preceding it.
        """
        current = {s.path for s in self.prepared.segments.values()}
        for path, flush in self.flushes.items():
            try:
                flush.result()
            except FileNotFoundError:
                if path in current:
                    raise
                # Rewritten at other offsets and deleted before its flush: nothing to keep.

    def settle(self) -> None:
        """Wait for the flushes before the segments are thrown away; their outcome no longer
        matters (a failed flush of a deleted, never published file loses nothing)."""
        futures.wait(list(self.flushes.values()))


class _AlreadyCommitted(Exception):
    """Raised inside a commit attempt: this app transaction version is already in the log."""


class _SequenceConflict(Exception):
    """Raised inside a commit attempt: some requests repeat or skip producer sequences."""

    def __init__(self, check: SequenceCheck) -> None:
        super().__init__("producer sequence conflict")
        self.check = check


def _group_by_partition(
    batches: Sequence[PreparedBatch],
) -> tuple[dict[int, pa.Table], list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]]]:
    """Each partition's rows in request order, and where each request's records land.

    For every request: its records' partitions and their positions within
    their partition's rows (the offset is then that partition's base plus the
    position). Requests sent to one partition, the usual case, are only
    concatenated (no copy); mixed requests are split with one ``take``.
    """
    pieces: dict[int, list[pa.Table]] = {}
    filled: dict[int, int] = {}
    locate = []
    for b in batches:
        parts = b.table.column("partition").to_numpy()
        rows = b.table.drop_columns(["partition"])
        if (parts == parts[0]).all():
            p = int(parts[0])
            start = filled.get(p, 0)
            pieces.setdefault(p, []).append(rows)
            filled[p] = start + len(parts)
            locate.append((parts, np.arange(start, start + len(parts), dtype=np.int64)))
            continue
        order = np.argsort(parts, kind="stable")
        positions = np.empty(len(parts), dtype=np.int64)
        for group in np.split(order, np.flatnonzero(np.diff(parts[order])) + 1):
            p = int(parts[group[0]])
            start = filled.get(p, 0)
            pieces.setdefault(p, []).append(rows.take(pa.array(group)))
            filled[p] = start + len(group)
            positions[group] = np.arange(start, start + len(group))
        locate.append((parts, positions))
    by_partition = {
        p: tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        for p, tables in pieces.items()
    }
    return by_partition, locate


def _partition_batches(
    partitions: npt.NDArray[np.int64] | npt.NDArray[np.int32], offsets: npt.NDArray[np.int64]
) -> list[PartitionBatch]:
    """Per partition (ascending): the lowest offset and the record count, vectorised."""
    if len(partitions) == 0:
        return []
    first = partitions[0]
    if (partitions == first).all():  # the common case: one partition per request
        return [PartitionBatch(int(first), int(offsets.min()), len(offsets))]
    order = np.argsort(partitions, kind="stable")
    ordered = partitions[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    lowest = np.minimum.reduceat(offsets[order], starts)
    counts = np.diff(np.r_[starts, len(ordered)])
    return [
        PartitionBatch(int(p), int(o), int(n))
        for p, o, n in zip(ordered[starts].tolist(), lowest.tolist(), counts.tolist(), strict=True)
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
        self.checkpoint_interval = checkpoint_interval
        self.compression = compression
        self.commit_timeout_s = commit_timeout_s
        self._delta = DeltaLog(storage, table_path)
        self._state_lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._state: TableState = self._delta.load()
        self._index = OffsetIndex.from_adds(self._state.files.values())
        self._reader = SegmentReader(storage, table_path)
        self._keyless = keyless_partitioner or make_keyless_partitioner("sticky")
        self._io_pool: ThreadPoolExecutor | None = None
        self._checkpointer: ThreadPoolExecutor | None = None
        self._request_checkpoint = checkpointer
        self._checkpointed = -1
        # Rows reused from checkpoint to checkpoint; the lock covers the moment a closed
        # log's old checkpoint thread still runs while a new one starts.
        self._add_rows = AddRowCache()
        self._checkpoint_lock = threading.Lock()
        self._listeners: list[Callable[[int, pa.Table], None]] = []
        # Offsets promised to staged appends not yet committed, per partition, and how
        # many such appends there are (the promise ends with the last of them).
        self._reserved: dict[int, int] = {}
        self._staged: dict[int, int] = {}
        # Replaced, never mutated, and only under the write lock: readers need no lock.
        self._commit_stats = CommitStats()

    # -- snapshot ------------------------------------------------------------

    @property
    def version(self) -> int:
        return self._state.version

    @property
    def commit_stats(self) -> CommitStats:
        """This writer's commits, lost races and renumberings since the log was opened."""
        return self._commit_stats

    def _count(self, **increments: int) -> None:
        """Add to the commit counters; called with the write lock held."""
        stats = self._commit_stats
        self._commit_stats = replace(
            stats, **{name: getattr(stats, name) + n for name, n in increments.items()}
        )

    @property
    def metadata(self) -> Metadata:
        metadata = self._state.metadata
        if metadata is None:
            raise UnknownTopicOrPartitionError(f"topic {self.name!r} has no Delta metadata")
        return metadata

    @property
    def config(self) -> TopicConfig:
        return topic_config_of(self.metadata)

    @property
    def num_partitions(self) -> int:
        return int(self.metadata.configuration.get(CONFIG_PARTITIONS, "1"))

    @property
    def topic_id(self) -> str:
        return self.metadata.table_id

    def refresh(self) -> bool:
        """Pick up commits made by other processes; True if anything new was found."""
        with self._state_lock:
            applied, reloaded = self._delta.update(self._state)
            if reloaded:
                self._index = OffsetIndex.from_adds(self._state.files.values())
            else:
                for _, actions in applied:
                    self._index.apply(actions)
            return bool(applied) or reloaded

    def check_partition(self, partition: int) -> None:
        if not isinstance(partition, int) or not 0 <= partition < self.num_partitions:
            raise UnknownTopicOrPartitionError(
                f"partition {partition} does not exist in topic {self.name!r} "
                f"(it has {self.num_partitions} partitions)"
            )

    def txn_version(self, app_id: str) -> int | None:
        """The latest version of a Delta app transaction (None if never written)."""
        with self._state_lock:
            return self._state.txns.get(app_id)

    def live_paths(self) -> set[str]:
        """Paths of the segments in the current snapshot."""
        with self._state_lock:
            return set(self._state.files)

    def high_watermark(self, partition: int) -> int:
        self.check_partition(partition)
        return self._state.txn_version(partition_txn(partition))

    def log_start_offset(self, partition: int) -> int:
        self.check_partition(partition)
        with self._state_lock:
            hwm = self._state.txn_version(partition_txn(partition))
            return self._index.partition(partition).log_start_offset(hwm)

    def partition_state(self, partition: int) -> PartitionState:
        self.check_partition(partition)
        with self._state_lock:
            hwm = self._state.txn_version(partition_txn(partition))
            index = self._index.partition(partition)
            return PartitionState(
                partition=partition,
                log_start_offset=index.log_start_offset(hwm),
                high_watermark=hwm,
                size_bytes=index.size_bytes(),
                num_segments=len(index),
                num_records=sum(s.num_records for s in index),
            )

    def segments(self, partition: int) -> list[Segment]:
        self.check_partition(partition)
        with self._state_lock:
            return self._index.partition(partition).segments

    # -- commit protocol -----------------------------------------------------

    def commit(
        self,
        build: Callable[[TableState], list[Action]],
        operation: str,
        parameters: dict[str, str] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> int:
        """Commit the actions ``build`` derives from the latest state; returns the new version.

        ``build`` is called again, with the newer state, every time another
        writer wins the version; it must decide from that state whether its
        earlier work is still valid. This is the one place any table change
        (append, config change, compaction) is made durable. ``ready`` runs just
        before the commit file can become visible (an append waits there for
        its segments' flush).
        """
        commit_id = uuid.uuid4().hex
        deadline = time.monotonic() + self.commit_timeout_s
        attempt = 0
        with self._write_lock:
            while True:
                with self._state_lock:
                    snapshot = self._state
                    version = snapshot.version + 1
                actions = build(snapshot)
                info = CommitInfo(
                    {
                        "timestamp": int(time.time() * 1000),
                        "operation": operation,
                        "operationParameters": parameters or {},
                        "engineInfo": ENGINE,
                        "clientVersion": ENGINE,
                        COMMIT_ID: commit_id,
                    }
                )
                try:
                    committed = self._delta.try_commit(version, [*actions, info], ready)
                except KafkaStorageError as exc:
                    committed = self._resolve_failed_put(commit_id, version, exc)
                    if committed:
                        self._count(recognised_after_error=1)
                with self._state_lock:
                    if committed:
                        if self._state.version == version - 1:
                            self._state.apply(version, [*actions, info])
                            self._index.apply(actions)
                        else:
                            self.refresh()
                        self._maybe_checkpoint(version)
                        self._count(commits=1)
                        return version
                    self.refresh()
                    if self._committed_by_us(commit_id, version):
                        self._count(commits=1, recognised_after_error=1)
                        return version
                self._count(lost_races=1)
                attempt += 1
                if time.monotonic() > deadline:
                    raise ConcurrentCommitError(
                        f"could not commit to topic {self.name!r} after {attempt} attempts: "
                        "other writers kept winning"
                    )
                if attempt > 2:
                    time.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))

    def _resolve_failed_put(self, commit_id: str, version: int, error: Exception) -> bool:
        """The commit PUT failed: did it land anyway? Never guess.

        True if the version file holds our commit, False if the version is
        free or someone else's (the normal retry path). If storage cannot
        tell us, the outcome is unknown: raise ``AmbiguousCommitError`` so the
        caller keeps its segment files (they may be live now) and reports a
        retriable error; an idempotent producer's retry then finds the truth.
        """
        try:
            actions = self._delta.read_commit(version)
        except KafkaStorageError:
            raise AmbiguousCommitError(
                f"commit {version} of topic {self.name!r} may or may not have been written "
                f"({error}); retry (idempotent producers are deduplicated)"
            ) from error
        if actions is None:
            raise error  # nothing landed: a plain, retriable storage failure
        return any(
            isinstance(a, CommitInfo) and a.values.get(COMMIT_ID) == commit_id for a in actions
        )

    def _committed_by_us(self, commit_id: str, version: int) -> bool:
        """A put that failed in transit may still have landed: look for our commit id."""
        actions = self._delta.read_commit(version)
        return any(
            isinstance(a, CommitInfo) and a.values.get(COMMIT_ID) == commit_id
            for a in actions or []
        )

    def _maybe_checkpoint(self, version: int) -> None:
        """Called under the state lock right after ``version`` was applied."""
        if self.checkpoint_interval <= 0 or version % self.checkpoint_interval != 0:
            return
        if self._request_checkpoint is not None:  # another process writes it
            self._request_checkpoint(self.table_path, version)
            return
        snapshot = snapshot_of(self._state)  # copies references only: cheap under the lock
        if self._checkpointer is None:
            self._checkpointer = ThreadPoolExecutor(1, thread_name_prefix=f"ckpt-{self.name}")
        try:
            self._checkpointer.submit(self._checkpoint, snapshot)
        except RuntimeError:  # closed meanwhile: the commit stands, a later interval checkpoints
            log.info("checkpoint of %s at %d skipped: the log was closed", self.name, version)

    def _checkpoint(self, snapshot: CheckpointSnapshot) -> None:
        """Runs on the one checkpoint thread, off the append path, so commits stay fast."""
        try:
            with self._checkpoint_lock:
                if snapshot.version <= self._checkpointed:
                    return
                write_checkpoint(self.storage, self._delta.log_path, snapshot, self._add_rows)
                self._checkpointed = snapshot.version
        except Exception:  # a background thread: log it, the commit stands
            # Checkpoints only bound open/commit cost; the next interval tries again.
            log.warning("checkpoint of %s at %d failed", self.name, snapshot.version, exc_info=True)

    def wait_for_checkpoints(self) -> None:
        """Block until a background checkpoint (if any) has finished; for tests and shutdown."""
        if self._checkpointer is not None:
            self._checkpointer.submit(lambda: None).result()

    def close(self) -> None:
        """Stop the background pools. The log stays usable: a caller still holding it (a
        catalog replaced it meanwhile) gets new pools, or runs the work itself."""
        with self._state_lock:
            pools = (self._checkpointer, self._io_pool)
            self._checkpointer = self._io_pool = None
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=True)

    # -- append --------------------------------------------------------------

    def prepare(
        self,
        records: ProduceInput,
        producer_id: int | None = None,
        base_sequence: int | None = None,
        *,
        writer: InternalWriter | None = None,
    ) -> PreparedBatch:
        """Validate one request's records against the topic; nothing is written.

        An internal topic refuses every request but its owner's, which carry
        the owner's ``writer`` (``lakelog.internal_topics``).
        """
        return prepare_batch(
            records,
            topic=self.name,
            num_partitions=self.num_partitions,
            config=self.config,
            keyless=self._keyless,
            now_ms=int(time.time() * 1000),
            producer_id=producer_id,
            base_sequence=base_sequence,
            writer=writer,
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
        return self.commit_staged(self.stage(batches), app_transaction)

    def stage(self, batches: Sequence[PreparedBatch]) -> StagedAppend:
        """Write the segments of a group commit at predicted offsets; nothing is visible yet.

        The prediction continues after every append staged before and not yet
        committed, so successive stages line up. Follow with ``commit_staged``
        (in staging order, for the predictions to hold) or ``abandon``.
        Every append passes here, so this is where an internal topic refuses
        batches that do not carry its owner's writer, however they were made.
        """
        for batch in batches:
            check_append(self.name, batch.writer)
        by_partition, locate = _group_by_partition(batches)
        staged = StagedAppend(list(batches), by_partition, locate, _PreparedAppend())
        bases = self._reserve({p: rows.num_rows for p, rows in by_partition.items()})
        try:
            written = self._write_segments(
                {p: with_offsets(rows, bases[p]) for p, rows in by_partition.items()}, sync=False
            )
        except BaseException:
            self._release(staged)
            raise
        staged.prepared.segments.update(written)
        staged.prepared.bases.update(bases)
        for segment in written.values():
            path = join(self.table_path, segment.path)
            staged.flushes[segment.path] = self._submit(self.storage.sync_new, [path])
        return staged

    def abandon(self, staged: StagedAppend) -> None:
        """Drop a staged append that will not be committed (its segments were never visible)."""
        staged.settle()
        staged.prepared.discard(self.storage, self.table_path)
        self._release(staged)

    def _reserve(self, counts: dict[int, int]) -> dict[int, int]:
        with self._state_lock:
            bases = {}
            for p, n in counts.items():
                committed = self._state.txn_version(partition_txn(p))
                bases[p] = max(committed, self._reserved.get(p, 0))
                self._reserved[p] = bases[p] + n
                self._staged[p] = self._staged.get(p, 0) + 1
            return bases

    def _release(self, staged: StagedAppend) -> None:
        """End a staged append's promise; with none left, predictions follow the log again."""
        with self._state_lock:
            if staged.released:
                return
            staged.released = True
            for p in staged.by_partition:
                self._staged[p] -= 1
                if not self._staged[p]:
                    del self._staged[p]
                    self._reserved.pop(p, None)

    def commit_staged(
        self, staged: StagedAppend, app_transaction: tuple[str, int] | None = None
    ) -> list[AppendResult | LakelogError]:
        """Commit a staged append (see ``append_prepared`` for the per-request outcomes)."""
        batches = staged.batches
        results: list[AppendResult | LakelogError | None] = [None] * len(batches)
        pending = list(range(len(batches)))
        duplicates: list[int] = []
        current: StagedAppend | None = staged
        try:
            while pending:
                active = [batches[i] for i in pending]
                if current is None:  # after a sequence conflict: the rest, staged again
                    current = self.stage(active)
                try:
                    committed = self._commit_batches(current, app_transaction)
                except _AlreadyCommitted:
                    version = self.version
                    done = AppendResult([], [], [], [], version, duplicate=True)
                    return [done for _ in batches]
                except _SequenceConflict as conflict:
                    duplicates += [pending[i] for i in conflict.check.duplicates]
                    for i, expected in conflict.check.out_of_order:
                        batch = active[i]
                        results[pending[i]] = OutOfOrderSequenceError(
                            f"producer {batch.producer_id} sent sequence {batch.base_sequence} "
                            f"to topic {self.name!r}; the next expected is {expected}"
                        )
                    skip = set(conflict.check.duplicates) | {
                        i for i, _ in conflict.check.out_of_order
                    }
                    pending = [p for i, p in enumerate(pending) if i not in skip]
                    current = None
                    continue
                for i, result in zip(pending, committed, strict=True):
                    results[i] = result
                pending = []
        finally:
            self._release(staged)
        for i in duplicates:
            results[i] = self._original_result(batches[i])
        return [r if r is not None else UnknownServerError("no result") for r in results]

    def _commit_batches(
        self, staged: StagedAppend, app_transaction: tuple[str, int] | None = None
    ) -> list[AppendResult]:
        batches, by_partition, locate = staged.batches, staged.by_partition, staged.locate
        prepared = staged.prepared

        def build(state: TableState) -> list[Action]:
            now = int(time.time() * 1000)
            if app_transaction is not None:
                app_id, app_version = app_transaction
                done = state.txns.get(app_id)
                if done is not None and done >= app_version:
                    raise _AlreadyCommitted()
            check = check_sequences(batches, lambda pid: state.txns.get(producer_txn(pid)))
            if check:
                raise _SequenceConflict(check)
            actions = self._build_append(state, by_partition, prepared)
            if app_transaction is not None:
                actions.append(Txn(app_transaction[0], app_transaction[1], now))
            last: dict[int, int] = {}
            for b in batches:
                if b.producer_id is not None and b.last_sequence is not None:
                    last[b.producer_id] = b.last_sequence
            actions += [Txn(producer_txn(pid), seq, now) for pid, seq in last.items()]
            return actions

        try:
            version = self.commit(build, "WRITE", {"mode": "Append"}, ready=staged.wait_flushed)
        except AmbiguousCommitError:
            raise  # the segments may be referenced by a landed commit: keep them
        except BaseException:
            staged.settle()
            prepared.discard(self.storage, self.table_path)
            raise
        finally:
            self._release(staged)
        base_of = np.zeros(max(prepared.bases) + 1, dtype=np.int64)
        for p, base in prepared.bases.items():
            base_of[p] = base
        results = []
        for b, (parts, positions) in zip(batches, locate, strict=True):
            offs = base_of[parts] + positions
            results.append(
                AppendResult(
                    partitions=parts,
                    offsets=offs,
                    timestamps_ms=b.table.column("timestamp").cast(pa.int64()).to_numpy(),
                    batches=_partition_batches(parts, offs),
                    version=version,
                )
            )
        self._notify_appended(by_partition, prepared)
        return results

    def _original_result(self, batch: PreparedBatch) -> AppendResult | LakelogError:
        """Where a duplicate request's records were first written, found by their sequences."""
        assert batch.producer_id is not None and batch.base_sequence is not None
        found = self.find_producer_records(
            batch.producer_id, batch.base_sequence, batch.num_records
        )
        if found is None:
            return DuplicateSequenceError(
                f"producer {batch.producer_id} sequence {batch.base_sequence} of topic "
                f"{self.name!r} was already written; its offsets are no longer in the log"
            )
        return found

    def find_producer_records(
        self, producer_id: int, base_sequence: int, count: int, max_segments: int = 64
    ) -> AppendResult | None:
        """Look up records of a producer's sequence range in the newest segments."""
        wanted = np.arange(base_sequence, base_sequence + count)
        parts = np.full(count, -1, np.int64)
        offs = np.full(count, -1, np.int64)
        stamps = np.zeros(count, np.int64)
        for partition in range(self.num_partitions):
            for segment in reversed(self.segments(partition)[-max_segments:]):
                rows = self._reader.read(segment, segment.base_offset, 2**62)
                mask = pc.and_(
                    pc.equal(rows.column("producer_id"), producer_id),
                    pc.is_in(rows.column("sequence"), pa.array(wanted, pa.int32())),
                )
                hits = rows.filter(pc.fill_null(mask, False))
                for seq, off, ts in zip(
                    hits.column("sequence").to_pylist(),
                    hits.column("offset").to_pylist(),
                    hits.column("timestamp").cast(pa.int64()).to_pylist(),
                    strict=True,
                ):
                    i = seq - base_sequence
                    parts[i], offs[i], stamps[i] = partition, off, ts
        if (parts < 0).any():
            return None
        return AppendResult(
            partitions=parts,
            offsets=offs,
            timestamps_ms=stamps,
            batches=_partition_batches(parts, offs),
            version=self.version,
            duplicate=True,
        )

    def add_append_listener(self, listener: Callable[[int, pa.Table], None]) -> None:
        """Call ``listener(partition, rows_with_offsets)`` after each append of this process.

        Lets a broker keep recent batches in memory for caught-up consumers and
        wake long polls without touching storage.
        """
        self._listeners.append(listener)

    def _notify_appended(
        self, by_partition: dict[int, pa.Table], prepared: _PreparedAppend
    ) -> None:
        if not self._listeners:
            return
        for p, rows in by_partition.items():
            base = prepared.bases[p]
            numbered = with_offsets(rows, base)
            for listener in self._listeners:
                listener(p, numbered)

    def _build_append(
        self, state: TableState, by_partition: dict[int, pa.Table], prepared: _PreparedAppend
    ) -> list[Action]:
        partitions = int((state.metadata or self.metadata).configuration[CONFIG_PARTITIONS])
        bases = {p: state.txn_version(partition_txn(p)) for p in by_partition}
        for p in by_partition:
            if p >= partitions:
                raise UnknownTopicOrPartitionError(
                    f"partition {p} does not exist in topic {self.name!r}"
                )
        stale = [p for p, base in bases.items() if prepared.bases.get(p) != base]
        if stale:
            for p in stale:
                old = prepared.segments.pop(p, None)
                if old is not None:  # never committed: nobody can be reading it
                    self.storage.delete(join(self.table_path, old.path))
                    self._count(renumbered_segments=1)
            written = self._write_segments(
                {p: with_offsets(by_partition[p], bases[p]) for p in stale}
            )
            prepared.segments.update(written)
            prepared.bases.update({p: bases[p] for p in stale})
        now = int(time.time() * 1000)
        actions: list[Action] = []
        for p in sorted(by_partition):
            segment = prepared.segments[p]
            actions.append(Txn(partition_txn(p), segment.end_offset, now))
            actions.append(add_action(segment))
        return actions

    def _pool(self) -> ThreadPoolExecutor:
        with self._state_lock:
            if self._io_pool is None:
                self._io_pool = ThreadPoolExecutor(
                    SEGMENT_IO_THREADS, thread_name_prefix=f"seg-{self.name}"
                )
            return self._io_pool

    def _submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``fn`` on the I/O pool, or here if ``close`` shut that pool down meanwhile."""
        try:
            return self._pool().submit(fn, *args)
        except RuntimeError:  # "cannot schedule new futures after shutdown"
            done: Future[T] = Future()
            try:
                done.set_result(fn(*args))
            except BaseException as exc:
                done.set_exception(exc)
            return done

    def _write_segments(self, tables: dict[int, pa.Table], sync: bool = True) -> dict[int, Segment]:
        def one(p: int) -> Segment:
            table = tables[p]
            first = int(table.column("offset")[0].as_py())  # offsets are base, base+1, ...
            return write_segment(
                self.storage,
                self.table_path,
                p,
                table,
                self.compression,
                base_offset=first,
                last_offset=first + table.num_rows - 1,
                sync=sync,
            )

        if len(tables) == 1:
            (p,) = tables
            return {p: one(p)}
        running = {p: self._submit(one, p) for p in tables}
        return {p: f.result() for p, f in running.items()}

    # -- read ----------------------------------------------------------------

    def read(
        self,
        partition: int,
        offset: int,
        max_records: int = 500,
        max_bytes: int = 1024 * 1024,
    ) -> FetchResult:
        """Records from ``offset`` on; the first record is returned even if over ``max_bytes``.

        An offset removed by compaction yields the next record present (Kafka's
        behaviour). Below the log start or past the high watermark is
        OFFSET_OUT_OF_RANGE. If a segment vanished (a compaction committed and
        a vacuum ran meanwhile) the index is refreshed and the read retried.
        """
        self.check_partition(partition)
        if max_records <= 0 or max_bytes <= 0:
            raise InvalidRequestError("max_records and max_bytes must be positive")
        for attempt in range(3):
            with self._state_lock:
                hwm = self._state.txn_version(partition_txn(partition))
                index = self._index.partition(partition)
                start = index.log_start_offset(hwm)
                segments = index.segments_from(offset)
            if offset < start or offset > hwm:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range for {self.name}-{partition}: "
                    f"valid offsets are {start}..{hwm}",
                    log_start_offset=start,
                    high_watermark=hwm,
                )
            try:
                return self._read_segments(
                    partition, offset, segments, hwm, start, max_records, max_bytes
                )
            except FileNotFoundError:
                if attempt == 2:
                    raise
                self.refresh()
        raise AssertionError("unreachable")

    def _read_segments(
        self,
        partition: int,
        offset: int,
        segments: list[Segment],
        hwm: int,
        start: int,
        max_records: int,
        max_bytes: int,
    ) -> FetchResult:
        pieces: list[pa.Table] = []
        remaining_records, remaining_bytes = max_records, max_bytes
        next_offset = offset
        for segment in segments:
            if segment.base_offset >= hwm:
                break
            rows = self._reader.read(segment, max(offset, segment.base_offset), remaining_records)
            if rows.num_rows:
                sizes = pc.add(
                    pc.fill_null(pc.binary_length(rows.column("key")), 0),
                    pc.fill_null(pc.binary_length(rows.column("value")), 0),
                ).to_numpy()
                cumulative = np.cumsum(sizes)
                fits = int(np.searchsorted(cumulative, remaining_bytes, side="right"))
                if fits == 0 and not pieces:
                    fits = 1
                if fits < rows.num_rows:
                    rows = rows.slice(0, fits)
                    remaining_records = 0
                if rows.num_rows:
                    pieces.append(rows)
                    remaining_records -= rows.num_rows
                    remaining_bytes -= int(cumulative[rows.num_rows - 1])
                    next_offset = int(rows.column("offset")[-1].as_py()) + 1
                if remaining_records <= 0 or remaining_bytes <= 0:
                    break
            else:
                next_offset = max(next_offset, segment.end_offset)
        if not pieces:
            next_offset = max(next_offset, offset) if segments else hwm
        records = pa.concat_tables(pieces) if pieces else SEGMENT_SCHEMA.empty_table()
        return FetchResult(partition, records, hwm, start, min(next_offset, hwm))

    def offset_for_timestamp(self, partition: int, timestamp_ms: int) -> tuple[int, int] | None:
        """First (offset, timestamp) with timestamp >= ``timestamp_ms`` (Kafka's ListOffsets)."""
        self.check_partition(partition)
        with self._state_lock:
            segments = self._index.partition(partition).segments_for_timestamp(timestamp_ms)
        for segment in segments:
            rows = self._reader.read(segment, segment.base_offset, max(segment.num_records, 1) + 1)
            if segment.num_records == 0:
                rows = self._reader.read(segment, segment.base_offset, 2**62)
            millis = rows.column("timestamp").cast(pa.int64()).to_numpy()
            hits = np.flatnonzero(millis >= timestamp_ms)
            if len(hits):
                i = int(hits[0])
                return int(rows.column("offset")[i].as_py()), int(millis[i])
        return None
