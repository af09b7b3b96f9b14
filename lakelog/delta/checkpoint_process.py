"""Checkpoints written by a helper process, so their work never waits on a broker's GIL.

A checkpoint is milliseconds of Arrow/Parquet work in dozens of short calls that
each give up the GIL and must win it back, pausing the event loop and the group
commit. At half the produce saturation an in-process checkpoint thread ran
20-80 ms once a second and set the produce p99 (40-60 ms, against 18 ms with
checkpoints off). Another process has its own GIL.

The helper keeps each table's state between checkpoints and is sent the commits
the writer made, so it reads only other writers' commits. Checkpoints are derived
data: a request lost with a crashed helper only means a later one. It needs no web
stack; writers reach it through ``lakelog.delta.table.CheckpointRequester``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import astuple, dataclass
from multiprocessing.connection import Connection

from lakelog.delta.checkpoint import AddRowCache, snapshot_of, write_checkpoint
from lakelog.delta.log import DeltaLog
from lakelog.delta.state import TableState
from lakelog.errors import KafkaStorageError, LakelogError
from lakelog.storage import Storage

log = logging.getLogger(__name__)

#: The helper's scheduling niceness (0 normal, 19 lowest): checkpoints are background work.
NICENESS = 10
#: How long ``close`` waits for the helper to finish its current checkpoint.
STOP_TIMEOUT_S = 10.0
#: Commits kept per table for the helper; older ones it reads from storage instead.
MAX_KNOWN_COMMITS = 1_000

#: Per table path, commit bytes by version: what the writer itself stored.
KnownCommits = dict[str, dict[int, bytes]]


@dataclass(frozen=True)
class CheckpointOutcome:
    """What the helper did for one table: the version written, or why it could not."""

    table_path: str
    requested: int
    written: int | None
    error: str | None = None
    #: Commits the helper read from storage for it: those other writers made.
    commits_read: int = 0


# -- the helper process --------------------------------------------------------


@dataclass
class _Followed:
    delta: DeltaLog
    state: TableState
    rows: AddRowCache
    written: int = -1


def catch_up(delta: DeltaLog, state: TableState, known: dict[int, bytes], until: int) -> int:
    """Bring ``state`` to ``until``: commits from ``known`` where given, the rest from storage.

    Returns how many commits were read from storage. Stops early, below
    ``until``, where a commit is neither known nor readable yet.
    """
    read = 0
    while state.version < until:
        following = state.version + 1
        data = known.get(following)
        if data is not None:
            state.apply(following, delta.decode(following, data))
            continue
        gap_end = min((v for v in known if v > following), default=until + 1) - 1
        before = state.version
        applied, _ = delta.update(state, until=min(gap_end, until))
        read += len(applied)
        if state.version == before:
            break
    return read


def _checkpoint_one(
    storage: Storage,
    tables: dict[str, _Followed],
    path: str,
    version: int,
    known: dict[int, bytes],
) -> CheckpointOutcome:
    """Checkpoint ``path`` at ``version``; a table seen first starts from its last checkpoint."""
    followed = tables.get(path)
    if followed is None:
        delta = DeltaLog(storage, path)
        followed = tables[path] = _Followed(delta, delta.load_checkpoint(), AddRowCache())
    if followed.written >= version:  # a newer request was served first
        return CheckpointOutcome(path, version, followed.written)
    state = followed.state
    read = catch_up(followed.delta, state, known, version)
    if state.version < version:
        raise KafkaStorageError(
            f"commit {state.version + 1} of {path} is not readable yet; the table is "
            "opened again for the next checkpoint"
        )
    write_checkpoint(storage, followed.delta.log_path, snapshot_of(state), followed.rows)
    followed.written = state.version
    return CheckpointOutcome(path, version, state.version, commits_read=read)


def serve(conn: Connection) -> None:
    """The helper's loop: the storage root, then ({path: version}, ``KnownCommits``) requests.

    Ends when the writer sends None or its socket closes, so a helper never outlives its broker.
    """
    try:
        storage: Storage = conn.recv()
    except (EOFError, OSError):
        return
    tables: dict[str, _Followed] = {}
    while True:
        try:
            request: tuple[dict[str, int], KnownCommits] | None = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        wanted, known = request
        outcomes = []
        for path, version in wanted.items():
            try:
                outcomes.append(
                    _checkpoint_one(storage, tables, path, version, known.get(path, {}))
                )
            except (LakelogError, OSError, ValueError) as exc:
                tables.pop(path, None)  # start from storage again next time
                outcomes.append(CheckpointOutcome(path, version, None, f"{exc}"))
        # Plain tuples: this module runs as __main__ here, so its classes would not unpickle.
        conn.send([astuple(o) for o in outcomes])


# -- the writer's side -----------------------------------------------------------


class CheckpointProcess:
    """Asks a helper process to checkpoint tables of one storage root.

    ``request`` never blocks the committing thread: it records the newest
    version wanted per table, and one dispatcher thread (asleep in a pipe
    read while the helper works) sends what accumulated, so requests made
    meanwhile are merged into one checkpoint per table.
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._lock = threading.Condition()
        self._wanted: dict[str, int] = {}
        self._known: KnownCommits = {}
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        #: observability: newest version written per table, and running counts
        self.written: dict[str, int] = {}
        self.completed = 0
        #: commits the helper read back from storage (those other writers made)
        self.commits_read = 0
        self.restarts = 0
        self.failures = 0

    @property
    def pid(self) -> int | None:
        """The helper's process id, once started (tests kill it to show it comes back)."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def committed(self, table_path: str, version: int, data: bytes) -> None:
        """Keep the bytes this writer stored as ``version``, for the helper's next request."""
        with self._lock:
            if self._closed:
                return
            commits = self._known.setdefault(table_path, {})
            commits[version] = data
            if len(commits) > MAX_KNOWN_COMMITS:
                del commits[min(commits)]

    def request(self, table_path: str, version: int) -> None:
        """Checkpoint ``table_path`` at ``version`` (or newer) soon; returns at once."""
        with self._lock:
            if self._closed:
                log.info("checkpoint of %s at %d skipped: shutting down", table_path, version)
                return
            self._wanted[table_path] = max(version, self._wanted.get(table_path, -1))
            self._start_dispatcher()
            self._lock.notify_all()

    def start(self) -> None:
        """Start the helper now, in the background, rather than at the first checkpoint.

        Its start-up is about a second of CPU: paid while the broker starts, not amid produce load.
        """
        with self._lock:
            if not self._closed:
                self._start_dispatcher()

    def _start_dispatcher(self) -> None:
        """Called with the lock held."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._dispatch, name="checkpoint-dispatch", daemon=True
            )
            self._thread.start()

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until every request so far was handled; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._wanted and not self._busy, timeout_s)

    def close(self) -> None:
        """Stop the helper; a checkpoint not yet written is simply not written.

        Once the dispatcher has returned no request is outstanding, so the helper is
        killed at once: it might take seconds (still importing, at low priority) to stop.
        """
        with self._lock:
            self._closed = True
            self._lock.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(STOP_TIMEOUT_S)
        self._stop_helper(idle=thread is None or not thread.is_alive())

    # -- dispatcher thread ---------------------------------------------------------

    def _dispatch(self) -> None:
        try:
            self._ensure_helper()
        except OSError as exc:  # a request retries the start and reports what fails
            log.warning("checkpoint helper did not start: %s", exc)
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._wanted or self._closed)
                if self._closed:
                    self._lock.notify_all()
                    return
                wanted, self._wanted = self._wanted, {}
                known = {p: self._known.pop(p) for p in wanted if p in self._known}
                self._busy = True
            try:
                outcomes = self._exchange(wanted, known)
            except (EOFError, OSError) as exc:  # the helper died or its socket broke
                self._helper_failed(wanted, f"{exc or type(exc).__name__}")
                outcomes = []
            except Exception as exc:  # anything else must not stop the dispatcher
                log.exception("checkpoint helper exchange failed")
                self._helper_failed(wanted, f"{type(exc).__name__}: {exc}")
                outcomes = []
            for outcome in outcomes:
                self.commits_read += outcome.commits_read
                if outcome.written is not None:
                    self.written[outcome.table_path] = outcome.written
                    self.completed += 1
                else:
                    self.failures += 1
                    log.warning(
                        "checkpoint of %s at %d failed: %s",
                        outcome.table_path,
                        outcome.requested,
                        outcome.error,
                    )
            with self._lock:
                self._busy = False
                self._lock.notify_all()

    def _helper_failed(self, wanted: dict[str, int], reason: str) -> None:
        self.failures += 1
        log.error(
            "checkpoint helper %s failed (%s); it is started again for the next checkpoint, "
            "%d table(s) wait for their next interval",
            self._exit_description(),
            reason,
            len(wanted),
        )
        self._stop_helper()

    def _exchange(self, wanted: dict[str, int], known: KnownCommits) -> list[CheckpointOutcome]:
        conn = self._ensure_helper()
        conn.send((wanted, known))
        return [CheckpointOutcome(*fields) for fields in conn.recv()]

    def _ensure_helper(self) -> Connection:
        process, conn = self._process, self._conn
        if process is not None and conn is not None and process.poll() is None:
            return conn
        if process is not None:
            self.restarts += 1
            log.warning(
                "checkpoint helper %s has exited; starting a new one", self._exit_description()
            )
            self._stop_helper()
        # A fresh interpreter running this module, not multiprocessing's spawn: that one
        # re-imports the parent's __main__, which starts a whole broker when unguarded.
        ours, theirs = socket.socketpair()
        with ours, theirs:
            helper = subprocess.Popen(
                [sys.executable, "-m", __name__, "--fd", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
            )
            conn = Connection(ours.detach())
        self._process, self._conn = helper, conn
        try:  # at once, so even its start-up (imports) yields a core the broker wants
            os.setpriority(os.PRIO_PROCESS, helper.pid, NICENESS)
        except OSError as exc:
            log.warning("checkpoint helper pid %s keeps normal priority: %s", helper.pid, exc)
        conn.send(self.storage)
        return conn

    def _exit_description(self) -> str:
        process = self._process
        if process is None:
            return "(not running)"
        code = process.poll()
        return f"pid {process.pid} (exit code {code})" if code is not None else f"pid {process.pid}"

    def _stop_helper(self, idle: bool = False) -> None:
        """Tell the helper to stop and reap it; an ``idle`` one (no request outstanding) is
        killed rather than waited for."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            with contextlib.suppress(OSError, ValueError):
                conn.send(None)
            conn.close()
        if process is not None:
            if idle and process.poll() is None:
                process.kill()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning("checkpoint helper pid %s did not stop; killing it", process.pid)
                process.kill()
                process.wait(STOP_TIMEOUT_S)


def main(argv: list[str] | None = None) -> int:
    """``python -m lakelog.delta.checkpoint_process --fd N``: the helper, started by the writer."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fd", type=int, required=True, help="the socket to the writer")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the broker, which stops us
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    serve(Connection(args.fd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
