"""Offset commits of one consumer, in order: synchronous and asynchronous on one worker thread.

Kafka's guarantees, that commits complete in order and ``commit_async``
callbacks run on the polling thread, follow from one worker thread and a queue
of finished commits drained by ``run_callbacks``.
"""

from __future__ import annotations

import contextlib
import logging
import queue
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from lakelog.client.structs import OffsetAndMetadata, TopicPartition
from lakelog.errors import LakelogError

log = logging.getLogger(__name__)

Offsets = Mapping[TopicPartition, OffsetAndMetadata]
#: ``callback(offsets, error)``: error is None when the commit succeeded.
CommitCallback = Callable[[Offsets, LakelogError | None], None]


class Committer:
    """Sends one consumer's commits in order and hands finished callbacks to its thread."""

    def __init__(self, send: Callable[[Offsets], None]) -> None:
        self._send = send
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="lakelog-commit")
        self._done: queue.SimpleQueue[tuple[CommitCallback, Offsets, LakelogError | None]] = (
            queue.SimpleQueue()
        )
        self._pending: list[Future[None]] = []

    def commit_sync(self, offsets: Offsets) -> None:
        """Commit after every earlier async commit; raises the broker's error."""
        self._pool.submit(self._send, dict(offsets)).result()

    def commit_async(self, offsets: Offsets, callback: CommitCallback | None) -> None:
        snapshot = dict(offsets)
        future = self._pool.submit(self._send, snapshot)
        self._pending = [f for f in self._pending if not f.done()] + [future]

        def finished(done: Future[None]) -> None:
            error = done.exception()
            if error is not None and not isinstance(error, LakelogError):
                log.error("async commit failed unexpectedly", exc_info=error)
                return
            if callback is not None:
                self._done.put((callback, snapshot, error))
            elif error is not None:
                log.warning("async commit of %d partitions failed: %s", len(snapshot), error)

        future.add_done_callback(finished)

    def run_callbacks(self) -> None:
        """Run the callbacks of finished async commits (on the caller's thread)."""
        while True:
            try:
                callback, offsets, error = self._done.get_nowait()
            except queue.Empty:
                return
            callback(offsets, error)

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for outstanding async commits (close does, so nothing is lost)."""
        for future in list(self._pending):
            # A failure is reported through its callback or the log by ``finished``.
            with contextlib.suppress(LakelogError):
                future.result(timeout=timeout_s)
        self._pending = []

    def close(self) -> None:
        self._pool.shutdown(wait=True)


__all__ = ["CommitCallback", "Committer", "Offsets"]
