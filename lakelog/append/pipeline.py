"""The append pipeline of one topic: stage and commit a group of prepared produce requests.

``stage`` numbers the requests' rows from predicted base offsets and writes one
segment per partition; ``commit_staged`` commits them (docs/architecture.md,
"Offsets without a coordinator"), renumbering and rewriting a partition another
writer moved meanwhile, so an offset is assigned exactly once, in order, with no
gap, by any number of processes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.append.producer_state import ProducerState
from lakelog.append.result import AppendResult, grouped_batches, partition_batches
from lakelog.append.staging import PreparedSegments, StagedAppend, group_by_partition
from lakelog.column_buffers import int64_values
from lakelog.delta.actions import Action, Txn
from lakelog.delta.state import TableState
from lakelog.errors import (
    AmbiguousCommitError,
    DuplicateSequenceError,
    LakelogError,
    OutOfOrderSequenceError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from lakelog.internal_topics import check_append
from lakelog.offset_index import Segment
from lakelog.produce import PreparedBatch, SequenceCheck, check_sequences
from lakelog.records import SEGMENT_SCHEMA, with_offsets
from lakelog.segments import SegmentReader, SegmentWriter, add_action
from lakelog.topic_table import CONFIG_PARTITIONS, TopicTable, partition_txn
from lakelog.typed_columns import (
    TYPED_COLUMNS,
    ColumnDecoder,
    evolved_schema,
    merge_types,
    refitted,
    typed_fields,
)

log = logging.getLogger(__name__)


class AppendListener(Protocol):
    """Told ``(partition, rows_with_offsets)`` on the committing thread once an append is durable.

    The only way the core calls up into what runs it (a broker's recent-batch cache and
    long polls): the core imports nothing of ``server/``.
    """

    def __call__(self, partition: int, rows: pa.Table, /) -> None: ...


class _AlreadyCommitted(Exception):
    """Raised inside a commit attempt: this app transaction version is already in the log."""


class _SequenceConflict(Exception):
    """Raised inside a commit attempt: some requests repeat or skip producer sequences."""

    def __init__(self, check: SequenceCheck) -> None:
        super().__init__("producer sequence conflict")
        self.check = check


class Appender:
    """Stages and commits produce requests to one topic's table. Thread-safe."""

    def __init__(self, table: TopicTable, writer: SegmentWriter, reader: SegmentReader) -> None:
        self.table = table
        self.writer = writer
        self.reader = reader
        self._listeners: list[AppendListener] = []
        #: Where this process last wrote each producer's batches: a retry's answer.
        self.producer_state = ProducerState()
        # Offsets promised to staged appends not yet committed, per partition, and how
        # many such appends there are (the promise ends with the last of them).
        self._reserved: dict[int, int] = {}
        self._staged: dict[int, int] = {}
        #: Decodes staged rows into typed columns (``lakelog.typed_columns``); None: none.
        self.decoder: ColumnDecoder | None = None

    def add_listener(self, listener: AppendListener) -> None:
        self._listeners.append(listener)

    def _with_typed_columns(self, by_partition: dict[int, pa.Table]) -> dict[int, pa.Table]:
        """Each partition's rows with the typed columns the decoder finds in them.

        The stored bytes are the record; a decoder that fails leaves its rows untyped
        (their typed columns read as null) rather than failing the append.
        """
        decoder = self.decoder
        if decoder is None:
            return by_partition
        metadata = self.table.state.metadata
        if metadata is None:
            return by_partition
        stored = {name: f.type for name, f in typed_fields(metadata).items()}
        config = self.table.config
        out = {}
        for p, rows in by_partition.items():
            try:
                typed = decoder(self.table.name, config, rows, stored)
            except Exception:
                log.warning("typed columns of topic %s not decoded", self.table.name, exc_info=True)
                typed = {}
            for name in TYPED_COLUMNS:
                if name in typed:
                    rows = rows.append_column(name, typed[name])
            out[p] = rows
        return out

    def stage(self, batches: Sequence[PreparedBatch]) -> StagedAppend:
        """Write the segments of a group commit at predicted offsets; nothing is visible yet.

        The prediction continues after appends staged and not yet committed; follow
        with ``commit_staged`` (in staging order) or ``abandon``. Every append passes
        here, so an internal topic refuses here batches without its owner's writer.
        """
        for batch in batches:
            check_append(self.table.name, batch.writer)
        by_partition, locate = group_by_partition(batches)
        by_partition = self._with_typed_columns(by_partition)
        staged = StagedAppend(list(batches), by_partition, locate, PreparedSegments())
        bases = self._reserve({p: rows.num_rows for p, rows in by_partition.items()})
        try:
            numbered = {p: with_offsets(rows, bases[p]) for p, rows in by_partition.items()}
            written = self.writer.write(numbered, sync=False)
        except BaseException:
            self._release(staged)
            raise
        staged.prepared.segments.update(written)
        staged.prepared.bases.update(bases)
        staged.prepared.numbered.update(numbered)
        for segment in written.values():
            staged.flushes[segment.path] = self.writer.flush(segment)
        return staged

    def abandon(self, staged: StagedAppend) -> None:
        """Drop a staged append that will not be committed (its segments were never visible)."""
        staged.settle()
        staged.prepared.discard(self.writer)
        self._release(staged)

    def _reserve(self, counts: dict[int, int]) -> dict[int, int]:
        table = self.table
        with table.state_lock:
            bases = {}
            for p, n in counts.items():
                committed = table.state.txn_version(partition_txn(p))
                bases[p] = max(committed, self._reserved.get(p, 0))
                self._reserved[p] = bases[p] + n
                self._staged[p] = self._staged.get(p, 0) + 1
            return bases

    def _release(self, staged: StagedAppend) -> None:
        """End a staged append's promise; with none left, predictions follow the log again."""
        with self.table.state_lock:
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
        """Commit a staged append; one outcome per request (``TopicLog.append_prepared``).

        A retried request is answered from memory, else from the log once the commit
        has landed. A sequence gap is final only in the table's latest state (another
        writer may have committed the missing sequences), so the table is read again
        before any request is refused.
        """
        batches = staged.batches
        results: list[AppendResult | LakelogError | None] = [None] * len(batches)
        pending = list(range(len(batches)))
        duplicates: list[int] = []
        current: StagedAppend | None = staged
        refreshed = False
        try:
            while pending:
                active = [batches[i] for i in pending]
                if current is None:  # after a sequence conflict: the rest, staged again
                    current = self.stage(active)
                try:
                    committed = self._commit_batches(current, app_transaction)
                except _AlreadyCommitted:
                    version = self.table.version
                    done = AppendResult([], [], [], [], version, duplicate=True)
                    return [done for _ in batches]
                except _SequenceConflict as conflict:
                    current = None
                    if conflict.check.out_of_order and not refreshed:
                        refreshed = True
                        if self.table.refresh():
                            continue  # every pending request, checked on the newer state
                    duplicates += [pending[i] for i in conflict.check.duplicates]
                    for i, expected in conflict.check.out_of_order:
                        batch = active[i]
                        results[pending[i]] = OutOfOrderSequenceError(
                            f"producer {batch.producer_id} sent sequence {batch.base_sequence} "
                            f"to topic {self.table.name!r}; the next expected is {expected}"
                        )
                    skip = set(conflict.check.duplicates) | {
                        i for i, _ in conflict.check.out_of_order
                    }
                    pending = [p for i, p in enumerate(pending) if i not in skip]
                    continue
                for i, result in zip(pending, committed, strict=True):
                    results[i] = result
                pending = []
        finally:
            self._release(staged)
        for i in duplicates:
            results[i] = self._remembered_result(batches[i])
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
            check = check_sequences(batches, state.txns.get)
            if check:
                raise _SequenceConflict(check)
            actions = self._build_append(state, by_partition, prepared)
            if app_transaction is not None:
                actions.append(Txn(app_transaction[0], app_transaction[1], now))
            last: dict[str, int] = {}
            for b in batches:
                stream = b.sequence_txn
                if stream is not None and b.last_sequence is not None:
                    last[stream] = b.last_sequence
            actions += [Txn(stream, seq, now) for stream, seq in last.items()]
            return actions

        try:
            version = self.table.committer.commit(
                build, "WRITE", {"mode": "Append"}, ready=staged.wait_flushed
            )
        except AmbiguousCommitError:
            raise  # the segments may be referenced by a landed commit: keep them
        except BaseException:
            staged.settle()
            prepared.discard(self.writer)
            raise
        finally:
            self._release(staged)
        base_of = np.zeros(max(prepared.bases) + 1, dtype=np.int64)
        base_of[list(prepared.bases)] = list(prepared.bases.values())
        results = []
        runs = grouped_batches([parts for parts, _ in locate], prepared.bases)
        for b, (parts, positions), placed in zip(batches, locate, runs, strict=True):
            result = AppendResult(
                partitions=parts,
                offsets=base_of[parts] + positions,
                timestamps_ms=int64_values(b.table.column("timestamp")),
                batches=placed,
                version=version,
            )
            self.producer_state.remember(b, result)
            results.append(result)
        for p, numbered in prepared.numbered.items():
            if numbered.num_columns > len(SEGMENT_SCHEMA):  # listeners see the fixed columns
                numbered = numbered.select(SEGMENT_SCHEMA.names)
            for listener in self._listeners:
                listener(p, numbered)
        return results

    def _build_append(
        self, state: TableState, by_partition: dict[int, pa.Table], prepared: PreparedSegments
    ) -> list[Action]:
        partitions = int((state.metadata or self.table.metadata).configuration[CONFIG_PARTITIONS])
        bases = {p: state.txn_version(partition_txn(p)) for p in by_partition}
        for p in by_partition:
            if p >= partitions:
                raise UnknownTopicOrPartitionError(
                    f"partition {p} does not exist in topic {self.table.name!r}"
                )
        metadata = state.metadata or self.table.metadata
        stored = {name: f.type for name, f in typed_fields(metadata).items()}
        refit = set()
        for p, rows in by_partition.items():
            fitted = refitted(rows, stored)
            if fitted is not None:
                by_partition[p] = fitted
                refit.add(p)
        stale = [p for p, base in bases.items() if prepared.bases.get(p) != base or p in refit]
        if stale:
            for p in stale:
                old = prepared.segments.pop(p, None)
                if old is not None:  # never committed: nobody can be reading it
                    self.writer.discard(old)
                    self.table.committer.count(renumbered_segments=1)
            # The partition moved on, or another writer typed a field of its rows
            # first: its rows get their final numbers and types here instead.
            numbered = {p: with_offsets(by_partition[p], bases[p]) for p in stale}
            written = self.writer.write(numbered)
            prepared.segments.update(written)
            prepared.bases.update({p: bases[p] for p in stale})
            prepared.numbered.update(numbered)
        now = int(time.time() * 1000)
        actions: list[Action] = []
        evolved = evolved_schema(metadata, written_typed_fields(prepared.numbered.values()))
        if evolved is not None:  # the schema grows in the commit that first writes the fields
            actions.append(replace(metadata, schema_string=evolved))
        for p in sorted(by_partition):
            segment = prepared.segments[p]
            actions.append(Txn(partition_txn(p), segment.end_offset, now))
            actions.append(add_action(segment))
        return actions

    def _remembered_result(self, batch: PreparedBatch) -> AppendResult | LakelogError:
        """A duplicate request's first result: remembered, or searched in the log."""
        remembered = self.producer_state.original(batch)
        if remembered is not None:
            self.table.committer.count(duplicates_from_memory=1)
            return remembered
        assert batch.producer_id is not None and batch.base_sequence is not None
        self.table.committer.count(duplicates_from_log=1)
        found = self.find_producer_records(
            batch.producer_id,
            batch.base_sequence,
            batch.num_records,
            partitions=None if batch.sequence_partition is None else [batch.sequence_partition],
        )
        if found is None:
            return DuplicateSequenceError(
                f"producer {batch.producer_id} sequence {batch.base_sequence} of topic "
                f"{self.table.name!r} was already written; its offsets are no longer in the log"
            )
        return found

    def find_producer_records(
        self,
        producer_id: int,
        base_sequence: int,
        count: int,
        max_segments: int = 64,
        partitions: Sequence[int] | None = None,
    ) -> AppendResult | None:
        """Look up records of a producer's sequence range in the newest segments
        (of ``partitions`` only, for a stream numbered per partition).

        Newest first, stopping once all are found: a retry's records are almost always
        in the last few commits, and each segment read is a store round trip.
        """
        wanted = np.arange(base_sequence, base_sequence + count)
        parts = np.full(count, -1, np.int64)
        offs = np.full(count, -1, np.int64)
        stamps = np.zeros(count, np.int64)
        missing = count
        for segment in newest_first(self.table, partitions, max_segments):
            self.table.committer.count(duplicate_segment_reads=1)
            rows = self.reader.read(
                segment, segment.base_offset, 2**62, columns=PRODUCER_LOOKUP_COLUMNS
            )
            mask = pc.and_(
                pc.equal(rows.column("producer_id"), producer_id),
                pc.is_in(rows.column("sequence"), pa.array(wanted, pa.int32())),
            )
            hits = rows.filter(pc.fill_null(mask, False))
            if not hits.num_rows:
                continue
            index = hits.column("sequence").to_numpy(zero_copy_only=False) - base_sequence
            parts[index] = segment.partition
            offs[index] = hits.column("offset").to_numpy(zero_copy_only=False)
            stamps[index] = hits.column("timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False)
            missing = int(np.count_nonzero(parts < 0))
            if missing == 0:
                break
        if missing:
            return None
        return AppendResult(
            partitions=parts,
            offsets=offs,
            timestamps_ms=stamps,
            batches=partition_batches(parts, offs),
            version=self.table.version,
            duplicate=True,
        )


def written_typed_fields(tables: Iterable[pa.Table]) -> list[pa.Field]:
    """The typed columns of segment rows, each with a type holding every partition's."""
    merged: dict[str, pa.DataType] = {}
    for table in tables:
        for f in list(table.schema)[len(SEGMENT_SCHEMA) :]:
            merged[f.name] = merge_types(merged.get(f.name), f.type)
    return [pa.field(name, type_) for name, type_ in merged.items()]


#: What the answer to a retried request needs of each stored record.
PRODUCER_LOOKUP_COLUMNS = ("producer_id", "sequence", "offset", "timestamp")


def newest_first(
    table: TopicTable, partitions: Sequence[int] | None, per_partition: int
) -> list[Segment]:
    """The newest ``per_partition`` segments of each partition, newest written first over all."""
    searched = range(table.num_partitions) if partitions is None else partitions
    segments = [s for p in searched for s in table.segments(p)[-per_partition:]]
    return sorted(segments, key=lambda s: (s.modification_time, s.base_offset), reverse=True)
