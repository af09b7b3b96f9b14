"""Checkpoints written by the helper process: real processes, on a local root and on S3."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest
from deltalake import DeltaTable

from lakelog import Catalog, Record
from lakelog.delta.checkpoint_process import CheckpointProcess, catch_up
from lakelog.delta.log import DeltaLog, commit_file
from lakelog.delta.state import TableState
from lakelog.storage import Storage, join
from lakelog.topic_log import TopicLog

pytestmark = pytest.mark.integration  # the checkpoint helper is a process

INTERVAL = 4


@pytest.fixture
def helper(make_catalog: Callable[..., Catalog]) -> Iterator[CheckpointProcess]:
    storage = make_catalog().storage
    process = CheckpointProcess(storage)
    yield process
    process.close()


def _topic(make_catalog: Callable[..., Catalog], helper: CheckpointProcess) -> TopicLog:
    catalog = make_catalog(checkpoint_interval=INTERVAL, checkpointer=helper)
    catalog.create_topic("t", 2)
    return catalog.topic("t")


def _append(log: TopicLog, commits: int) -> None:
    for i in range(commits):
        log.append([Record(f"v{i}-{j}".encode(), key=f"k{j}".encode()) for j in range(5)])


def _checkpointed_once(
    make_catalog: Callable[..., Catalog], helper: CheckpointProcess
) -> tuple[TopicLog, int]:
    """A topic checkpointed once by the helper, and the helper's pid."""
    log = _topic(make_catalog, helper)
    _append(log, INTERVAL)
    assert helper.wait_idle()
    assert helper.pid is not None
    return log, helper.pid


def _last_checkpoint(storage: Storage, log: TopicLog) -> int:
    data = storage.read_bytes(join(log.table_path, "_delta_log", "_last_checkpoint"))
    return int(json.loads(data)["version"])


def test_the_helper_writes_checkpoints_that_delta_rs_and_lakelog_start_from(
    make_catalog: Callable[..., Catalog], helper: CheckpointProcess
) -> None:
    log = _topic(make_catalog, helper)
    _append(log, 2 * INTERVAL + 1)  # versions 1..9 after the create at 0
    assert helper.wait_idle()
    storage = log.storage
    assert helper.pid is not None and helper.pid != os.getpid()
    # The helper may have opened the table after more commits landed: never older.
    assert _last_checkpoint(storage, log) >= 2 * INTERVAL
    # Once it follows the table, it checkpoints exactly the version asked for.
    _append(log, 3 * INTERVAL - log.version)
    assert helper.wait_idle()
    assert _last_checkpoint(storage, log) == log.version == 3 * INTERVAL
    assert helper.written[log.table_path] == 3 * INTERVAL
    assert helper.failures == 0
    # Only the checkpoint is left to start from: both readers must use it.
    for v in range(3 * INTERVAL + 1):
        storage.delete(join(log.table_path, "_delta_log", commit_file(v)))
    table = DeltaTable(
        storage.delta_uri(log.table_path),
        storage_options=storage.delta_storage_options() or None,
    )
    assert table.version() == log.version
    assert len(table.file_uris()) == len(log.live_paths())
    assert table.to_pyarrow_table().num_rows == 5 * 3 * INTERVAL
    reopened = DeltaLog(storage, log.table_path).load()
    assert reopened.version == log.version
    assert set(reopened.files) == log.live_paths()
    assert reopened.txns == log.committer.state.txns


def test_a_killed_helper_is_started_again_for_the_next_checkpoint(
    make_catalog: Callable[..., Catalog],
    helper: CheckpointProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log, first = _checkpointed_once(make_catalog, helper)
    os.kill(first, signal.SIGKILL)
    # Dead, not dying: a helper still exiting takes the next request and breaks the
    # exchange instead, which is reported as a failed checkpoint and not as a restart.
    deadline = time.monotonic() + 30
    while helper.pid is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert helper.pid is None, "the killed helper did not exit"
    with caplog.at_level(logging.WARNING, logger="lakelog.delta.checkpoint_process"):
        _append(log, INTERVAL)
        assert helper.wait_idle()
    assert helper.restarts == 1
    assert helper.pid not in (None, first)
    assert f"checkpoint helper pid {first} (exit code -9) has exited" in caplog.text
    assert _last_checkpoint(log.storage, log) == 2 * INTERVAL


def test_a_checkpoint_that_cannot_be_written_is_reported_and_the_helper_keeps_serving(
    make_catalog: Callable[..., Catalog],
    helper: CheckpointProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = _topic(make_catalog, helper)
    with caplog.at_level(logging.WARNING, logger="lakelog.delta.checkpoint_process"):
        helper.request("topics/no-such-table", 3)
        assert helper.wait_idle()
    assert helper.failures == 1
    assert "checkpoint of topics/no-such-table at 3 failed" in caplog.text
    assert "no Delta table" in caplog.text
    _append(log, INTERVAL)
    assert helper.wait_idle()
    assert _last_checkpoint(log.storage, log) == INTERVAL


def test_close_stops_the_helper(
    make_catalog: Callable[..., Catalog], helper: CheckpointProcess
) -> None:
    log, pid = _checkpointed_once(make_catalog, helper)
    helper.close()
    assert helper.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    helper.request(log.table_path, 99)  # after close: skipped, logged, never raises


def test_close_does_not_wait_for_an_idle_helper_that_cannot_run(
    helper: CheckpointProcess, caplog: pytest.LogCaptureFixture
) -> None:
    # A helper still importing at low priority on a busy machine is, to the broker, one
    # that does not read the stop message. With no request outstanding it holds no
    # half-written checkpoint, so close kills it instead of waiting (a SIGSTOP stands in
    # for the busy machine: the stop message is never read).
    helper.start()
    deadline = time.monotonic() + 60
    while helper.pid is None and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = helper.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    with caplog.at_level(logging.WARNING, logger="lakelog.delta.checkpoint_process"):
        helper.close()
    assert "did not stop" not in caplog.text
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_update_until_stops_at_that_version_and_later_resumes(
    make_catalog: Callable[..., Catalog],
) -> None:
    """What lets the helper checkpoint exactly the version asked for."""
    catalog = make_catalog(checkpoint_interval=0)
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    _append(log, 5)
    delta = DeltaLog(catalog.storage, log.table_path)
    state = TableState()
    state.apply(0, delta.read_commit(0) or [])
    applied, reloaded = delta.update(state, until=3)
    assert [v for v, _ in applied] == [1, 2, 3] and not reloaded
    assert state.version == 3
    applied, _ = delta.update(state)
    assert [v for v, _ in applied] == [4, 5]
    assert state.files.keys() == log.live_paths()


def test_the_helper_reads_back_only_the_commits_its_writer_did_not_hand_it(
    make_catalog: Callable[..., Catalog], helper: CheckpointProcess
) -> None:
    log = _topic(make_catalog, helper)
    _append(log, INTERVAL)
    assert helper.wait_idle()
    # The create (version 0) is the catalog's, not this committer's: the one read back.
    assert helper.commits_read == 1
    _append(log, 2 * INTERVAL)
    assert helper.wait_idle()
    assert helper.commits_read == 1
    assert _last_checkpoint(log.storage, log) == 3 * INTERVAL
    assert DeltaLog(log.storage, log.table_path).load().files.keys() == log.live_paths()


def test_catch_up_takes_known_commits_and_reads_the_gaps_from_storage(
    make_catalog: Callable[..., Catalog],
) -> None:
    catalog = make_catalog(checkpoint_interval=0)
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    _append(log, 6)
    storage = catalog.storage
    delta = DeltaLog(storage, log.table_path)
    known = {v: storage.read_bytes(join(delta.log_path, commit_file(v))) for v in (2, 3, 5)}
    for v in known:  # storage cannot supply these: only the known bytes can
        storage.delete(join(delta.log_path, commit_file(v)))
    state = TableState()
    state.apply(0, delta.read_commit(0) or [])
    assert catch_up(delta, state, known, until=6) == 3  # versions 1, 4 and 6
    assert state.version == 6
    assert state.files.keys() == log.live_paths()
    # A commit neither known nor stored: it stops below it.
    behind = TableState()
    behind.apply(0, delta.read_commit(0) or [])
    assert catch_up(delta, behind, {2: known[2]}, until=6) == 1
    assert behind.version == 2


def test_start_runs_the_helper_before_any_checkpoint_is_asked_for(
    helper: CheckpointProcess,
) -> None:
    helper.start()
    deadline = time.monotonic() + 60
    while helper.pid is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert helper.pid is not None and helper.pid != os.getpid()
    assert helper.completed == helper.failures == 0
