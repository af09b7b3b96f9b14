"""Reading and writing one table's ``_delta_log`` through the storage root.

New versions are found by reading ``<version+1>.json``, never by listing (one
small GET per poll even on S3); opening starts from ``_last_checkpoint``.
Committing is ``put_if_absent`` of the next version: the Delta writer's mutual exclusion.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.delta.actions import Action, AddFile, action_from_json, decode_commit, encode_commit
from lakelog.delta.checkpoint import LAST_CHECKPOINT, checkpoint_file
from lakelog.delta.state import TableState
from lakelog.errors import CorruptRecordError, KafkaStorageError, UnknownTopicOrPartitionError
from lakelog.storage import Storage, join

log = logging.getLogger(__name__)

LOG_DIR = "_delta_log"
#: Log cleanup only removes commits older than the log retention (30 days by
#: default), so a reader needs to look for it rarely, not on every poll.
CLEANUP_CHECK_INTERVAL_S = 60.0
#: Most commits fetched in one round trip while catching up: a reader one
#: round trip behind a busy writer still gains on it (the window doubles from 1).
MAX_READ_AHEAD = 64


def commit_file(version: int) -> str:
    return f"{version:020d}.json"


class DeltaLog:
    """The transaction log of the Delta table at ``table_path`` (root-relative)."""

    def __init__(self, storage: Storage, table_path: str) -> None:
        self.storage = storage
        self.table_path = table_path
        self.log_path = join(table_path, LOG_DIR)
        self._cleanup_checked_at = time.monotonic()

    # -- reading -------------------------------------------------------------

    def read_commit(self, version: int) -> list[Action] | None:
        """The actions of one version, or None if that version does not exist (yet)."""
        try:
            data = self.storage.read_bytes(join(self.log_path, commit_file(version)))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise KafkaStorageError(f"cannot read Delta commit {version}: {exc}") from exc
        return self.decode(version, data)

    def read_commits(self, versions: range) -> list[list[Action] | None]:
        """The actions of several versions, fetched together; None for each missing one."""
        paths = [join(self.log_path, commit_file(v)) for v in versions]
        try:
            found = self.storage.read_many(paths)
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot read Delta commits {versions.start}-{versions.stop - 1}: {exc}"
            ) from exc
        return [
            None if data is None else self.decode(v, data)
            for v, data in zip(versions, found, strict=True)
        ]

    def decode(self, version: int, data: bytes) -> list[Action]:
        """The actions of commit ``version`` from its file's bytes."""
        try:
            return decode_commit(data)
        except (ValueError, KeyError) as exc:
            raise CorruptRecordError(
                f"Delta commit {version} of {self.table_path} is not valid JSON actions: {exc}"
            ) from exc

    def load(self) -> TableState:
        """The latest state, starting from the last checkpoint if there is one."""
        state = self.load_checkpoint()
        self.update(state)
        return state

    def load_checkpoint(self) -> TableState:
        """The state of the last checkpoint, or the empty state before commit 0 if none.

        The commits after it are the caller's to apply (``update`` reads them).
        """
        state = TableState()
        checkpoint = self.last_checkpoint()
        if checkpoint is not None:
            version, parts = checkpoint
            self._apply_checkpoint(state, version, parts)
        elif self.read_commit(0) is None:
            raise UnknownTopicOrPartitionError(f"no Delta table at {self.table_path}")
        return state

    def update(
        self, state: TableState, until: int | None = None
    ) -> tuple[list[tuple[int, list[Action]]], bool]:
        """Apply every commit newer than ``state.version`` (up to ``until``, if given).

        Returns the commits applied, and whether the state was reloaded from a checkpoint
        instead (anything derived from it is then stale; the version may pass ``until``).
        """
        applied: list[tuple[int, list[Action]]] = []
        window = 1  # the usual case, nothing or one commit new, costs one round trip as ever
        while until is None or state.version < until:
            first = state.version + 1
            last = first + window - 1 if until is None else min(first + window - 1, until)
            versions = range(first, last + 1)
            for version, actions in zip(versions, self.read_commits(versions), strict=True):
                if actions is None:
                    break
                applied.append((version, state.apply(version, actions)))
            else:
                window = min(window * 2, MAX_READ_AHEAD)
                continue
            break
        if not applied and self._cleaned_up_past(state):
            state.__dict__.update(self.load().__dict__)
            return [], True
        return applied, False

    def _cleaned_up_past(self, state: TableState) -> bool:
        """Was the next commit deleted by log cleanup (a newer checkpoint exists)? The caller
        then starts again from the checkpoint instead of stalling forever."""
        now = time.monotonic()
        if now - self._cleanup_checked_at < CLEANUP_CHECK_INTERVAL_S:
            return False
        self._cleanup_checked_at = now
        checkpoint = self.last_checkpoint()
        if checkpoint is not None and checkpoint[0] > state.version + 1:
            log.info(
                "commit %d of %s was cleaned up; reloading", state.version + 1, self.table_path
            )
            return True
        return False

    def last_checkpoint(self) -> tuple[int, int | None] | None:
        """The version and part count ``_last_checkpoint`` names, or None without one."""
        try:
            data = self.storage.read_bytes(join(self.log_path, LAST_CHECKPOINT))
        except FileNotFoundError:
            return None
        info = json.loads(data)
        return int(info["version"]), info.get("parts")

    def _apply_checkpoint(self, state: TableState, version: int, parts: int | None) -> None:
        if parts:
            names = [
                f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet"
                for i in range(1, parts + 1)
            ]
        else:
            names = [checkpoint_file(version)]
        actions: list[Action] = []
        for name in names:
            data = self.storage.read_bytes(join(self.log_path, name))
            table = pq.read_table(pa.BufferReader(data))
            actions.extend(_checkpoint_adds(table))
            # The few other rows (protocol, metadata, txns, tombstones) go the generic way.
            kinds = ("protocol", "metaData", "txn", "remove")
            present = [c for c in kinds if c in table.column_names]
            small = table.select(present)
            keep = pc.is_valid(small.column(present[0])) if present else None
            for column in present[1:]:
                keep = pc.or_(keep, pc.is_valid(small.column(column)))
            if keep is not None:
                for row in small.filter(keep).to_pylist(maps_as_pydicts="lossy"):
                    actions.extend(_checkpoint_row_actions(row))
        state.apply(version, actions)

    # -- writing -------------------------------------------------------------

    def try_commit(
        self, version: int, actions: list[Action], ready: Callable[[], None] | None = None
    ) -> bool:
        """Write commit ``version``; False if another writer already wrote it.

        ``ready`` runs before the commit can become visible (see ``put_if_absent``).
        """
        return self.try_commit_encoded(version, encode_commit(actions), ready)

    def try_commit_encoded(
        self, version: int, data: bytes, ready: Callable[[], None] | None = None
    ) -> bool:
        """``try_commit`` of actions already encoded (``encode_commit``)."""
        try:
            return self.storage.put_if_absent(
                join(self.log_path, commit_file(version)), data, ready
            )
        except OSError as exc:
            raise KafkaStorageError(f"cannot write Delta commit {version}: {exc}") from exc

    def delete_table(self) -> None:
        self.storage.delete_tree(self.table_path)


def _checkpoint_adds(table: pa.Table) -> list[AddFile]:
    """The add rows of a checkpoint, column by column (a topic may have many thousands)."""
    if "add" not in table.column_names:
        return []
    adds = table.column("add")
    adds = adds.filter(pc.is_valid(adds))
    if len(adds) == 0:
        return []
    fields = {f.name for f in adds.type}

    def column(name: str) -> list[Any]:
        if name not in fields:
            return [None] * len(adds)
        values: list[Any] = pc.struct_field(adds, name).to_pylist()
        return values

    def maps(name: str) -> list[dict[str, Any]]:
        """A map column as dicts, from its flat keys and items (to_pylist builds tuples)."""
        if name not in fields:
            return [{} for _ in range(len(adds))]
        result: list[dict[str, Any]] = []
        for chunk in pc.struct_field(adds, name).chunks:
            ends = chunk.offsets.to_numpy().tolist()
            keys, items = chunk.keys.to_pylist(), chunk.items.to_pylist()
            base = ends[0]
            dicts = [
                dict(zip(keys[a - base : b - base], items[a - base : b - base], strict=True))
                for a, b in itertools.pairwise(ends)
            ]
            if chunk.null_count:  # a null map is no entries, whatever its offsets say
                valid = chunk.is_valid().to_pylist()
                dicts = [d if ok else {} for d, ok in zip(dicts, valid, strict=True)]
            result.extend(dicts)
        return result

    paths, sizes, mtimes = column("path"), column("size"), column("modificationTime")
    changes, stats, tags, parts = (
        column("dataChange"),
        column("stats"),
        maps("tags"),
        maps("partitionValues"),
    )
    return [
        AddFile(
            path=paths[i],
            partition_values=parts[i],
            size=int(sizes[i] or 0),
            modification_time=int(mtimes[i] or 0),
            data_change=bool(changes[i]) if changes[i] is not None else True,
            stats=stats[i],
            tags=tags[i],
        )
        for i in range(len(adds))
    ]


def _checkpoint_row_actions(row: dict[str, Any]) -> list[Action]:
    """Turn one checkpoint row (one non-null action column) into actions."""
    actions: list[Action] = []
    for column, value in row.items():
        if value is None:
            continue
        if column == "remove" and not value.get("extendedFileMetadata"):
            value["partitionValues"] = None  # not given (written as an empty map)
        actions.append(action_from_json({column: value}))
    return actions
