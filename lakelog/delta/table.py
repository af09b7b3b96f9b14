"""One Delta table's writer: its state, and the optimistic commit loop every change goes through.

Every table change (appends, topic administration, the offsets store, rewrites)
is made durable here as the next version via put-if-absent; a writer that loses
the version rebuilds its actions from the newer state. A PUT that fails in
transit is resolved by looking for this commit's id, never by guessing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Protocol

from lakelog.commit_stats import CommitStats
from lakelog.delta.actions import Action, CommitInfo, encode_commit
from lakelog.delta.checkpoint import (
    AddRowCache,
    CheckpointSnapshot,
    snapshot_of,
    write_checkpoint,
)
from lakelog.delta.log import DeltaLog
from lakelog.delta.state import TableState
from lakelog.delta.writer_rules import check_commit
from lakelog.errors import (
    AmbiguousCommitError,
    ConcurrentCommitError,
    DeltaTableRuleError,
    KafkaStorageError,
)
from lakelog.storage import Storage

log = logging.getLogger(__name__)


class CheckpointRequester(Protocol):
    """Checkpoints written elsewhere (``checkpoint_process.CheckpointProcess``); both calls
    come from the committing thread and must return at once."""

    def committed(self, table_path: str, version: int, data: bytes) -> None:
        """This writer wrote ``data`` as ``version``: its checkpoint writer need not read it."""

    def request(self, table_path: str, version: int) -> None:
        """Checkpoint ``table_path`` at ``version`` (or newer) soon."""


COMMIT_ID = "lakelog.commitId"
ENGINE = "lakelog/0.1.0"


def commit_info(
    operation: str, parameters: dict[str, str], now_ms: int, **extra: str
) -> CommitInfo:
    """The commitInfo action every lakelog commit ends with."""
    return CommitInfo(
        {
            "timestamp": now_ms,
            "operation": operation,
            "operationParameters": parameters,
            "engineInfo": ENGINE,
            "clientVersion": ENGINE,
            **extra,
        }
    )


class TableView(Protocol):
    """Something derived from the table state (an offset index), kept current by the committer.

    Called in the state lock's critical section that changes the state, so a reader
    holding the lock sees state and view at one version.
    """

    def reload(self, state: TableState) -> None:
        """The state was loaded anew (opened, or reloaded from a checkpoint): rebuild."""

    def apply(self, actions: Sequence[Action]) -> None:
        """One commit's actions were applied to the state: follow them."""


class TableCommitter:
    """A Delta table's state and the one place changes to it are committed. Thread-safe."""

    def __init__(
        self,
        storage: Storage,
        table_path: str,
        name: str,
        *,
        checkpoint_interval: int = 100,
        commit_timeout_s: float = 30.0,
        checkpointer: CheckpointRequester | None = None,
        view: TableView | None = None,
    ) -> None:
        self.storage = storage
        self.table_path = table_path
        #: The topic the table holds, for error messages and thread names.
        self.name = name
        self.checkpoint_interval = checkpoint_interval
        self.commit_timeout_s = commit_timeout_s
        self._delta = DeltaLog(storage, table_path)
        #: Where other Delta tools find the table, for errors that tell the user what to run.
        self.table_uri = storage.delta_uri(table_path) or table_path
        #: Held to read the state and its view consistently; commits take it briefly.
        self.state_lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._state: TableState = self._delta.load()
        self._view = view
        if view is not None:
            view.reload(self._state)
        self._checkpointer: ThreadPoolExecutor | None = None
        self._request_checkpoint = checkpointer
        self._checkpointed = -1
        # Rows reused from checkpoint to checkpoint; the lock covers the moment a closed
        # table's old checkpoint thread still runs while a new one starts.
        self._add_rows = AddRowCache()
        self._checkpoint_lock = threading.Lock()
        # Replaced, never mutated, under its own lock: readers need no lock.
        self._commit_stats = CommitStats()
        self._stats_lock = threading.Lock()

    @property
    def state(self) -> TableState:
        """The latest known state; read it under ``state_lock`` when several fields must agree."""
        return self._state

    @property
    def version(self) -> int:
        return self._state.version

    @property
    def log_path(self) -> str:
        return self._delta.log_path

    @property
    def commit_stats(self) -> CommitStats:
        """This writer's commits, lost races and renumberings since the table was opened."""
        return self._commit_stats

    def count(self, **increments: int) -> None:
        """Add to the commit counters (inside ``commit``, or after it for retried requests)."""
        with self._stats_lock:
            stats = self._commit_stats
            self._commit_stats = replace(
                stats, **{name: getattr(stats, name) + n for name, n in increments.items()}
            )

    def refresh(self) -> bool:
        """Pick up commits made by other processes; True if anything new was found."""
        with self.state_lock:
            applied, reloaded = self._delta.update(self._state)
            if self._view is not None:
                if reloaded:
                    self._view.reload(self._state)
                else:
                    for _, actions in applied:
                        self._view.apply(actions)
            return bool(applied) or reloaded

    def commit(
        self,
        build: Callable[[TableState], list[Action]],
        operation: str,
        parameters: dict[str, str] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> int:
        """Commit the actions ``build`` derives from the latest state; returns the new version.

        ``build`` is called again with the newer state whenever another writer wins the
        version, and decides from it whether its earlier work still holds. ``ready`` runs
        just before the commit can become visible (an append waits for its flush there).
        Actions that break a rule of the table's metadata (``writer_rules``) raise
        ``DeltaTableRuleError`` before anything is written.
        """
        commit_id = uuid.uuid4().hex
        deadline = time.monotonic() + self.commit_timeout_s
        attempt = 0
        with self._write_lock:
            while True:
                with self.state_lock:
                    snapshot = self._state
                    version = snapshot.version + 1
                actions = build(snapshot)
                try:
                    check_commit(snapshot, actions, self.name, self.table_uri)
                except DeltaTableRuleError:
                    # Final only on the latest state: the rule may have been lifted since.
                    if self.refresh():
                        continue
                    raise
                now_ms = int(time.time() * 1000)
                info = commit_info(operation, parameters or {}, now_ms, **{COMMIT_ID: commit_id})
                data = encode_commit([*actions, info])
                try:
                    committed = self._delta.try_commit_encoded(version, data, ready)
                except KafkaStorageError as exc:
                    committed = self._resolve_failed_put(commit_id, version, exc)
                    if committed:
                        self.count(recognised_after_error=1)
                with self.state_lock:
                    if committed:
                        if self._state.version == version - 1:
                            self._state.apply(version, [*actions, info])
                            if self._view is not None:
                                self._view.apply(actions)
                        else:
                            self.refresh()
                        if self._request_checkpoint is not None and self.checkpoint_interval > 0:
                            self._request_checkpoint.committed(self.table_path, version, data)
                        self._maybe_checkpoint(version)
                        self.count(commits=1)
                        return version
                    self.refresh()
                    # A put that failed in transit may still have landed: look for our id.
                    if _holds(self._delta.read_commit(version) or [], commit_id):
                        self.count(commits=1, recognised_after_error=1)
                        return version
                self.count(lost_races=1)
                attempt += 1
                if time.monotonic() > deadline:
                    raise ConcurrentCommitError(
                        f"could not commit to topic {self.name!r} after {attempt} attempts: "
                        "other writers kept winning"
                    )
                self.count(retries=1)
                if attempt > 2:
                    time.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))

    def _resolve_failed_put(self, commit_id: str, version: int, error: Exception) -> bool:
        """The commit PUT failed: did it land anyway? Never guess.

        True if the version holds our commit, False if it is someone else's. If storage
        cannot tell, ``AmbiguousCommitError``: the caller keeps its segment files (they
        may be live) and an idempotent producer's retry finds the truth.
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
        return _holds(actions, commit_id)

    def _maybe_checkpoint(self, version: int) -> None:
        """Called under the state lock right after ``version`` was applied."""
        if self.checkpoint_interval <= 0 or version % self.checkpoint_interval != 0:
            return
        if self._request_checkpoint is not None:  # another process writes it
            self._request_checkpoint.request(self.table_path, version)
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

    def close(self, wait: bool = True) -> None:
        """Stop the checkpoint thread. The committer stays usable: a later checkpoint starts
        a new thread. ``wait=False`` lets a running checkpoint finish on its own (needed
        where ``close`` may run on that very thread, as a finalizer may)."""
        with self.state_lock:
            pool, self._checkpointer = self._checkpointer, None
        if pool is not None:
            pool.shutdown(wait=wait)


def _holds(actions: list[Action], commit_id: str) -> bool:
    """Whether a commit's actions are those of the commit ``commit_id``."""
    return any(isinstance(a, CommitInfo) and a.values.get(COMMIT_ID) == commit_id for a in actions)
