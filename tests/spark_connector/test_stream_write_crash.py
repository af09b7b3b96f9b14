"""Exactly-once streaming writes when the writing process is killed with SIGKILL.

Two tests, two guarantees:

- ``test_killed_streaming_query_restarts_exactly_once``: a real Structured
  Streaming query (Spark in local mode, in a process of its own) is killed
  mid-stream and restarted from its checkpoint; the topic holds every input row
  exactly once. This is what users of ``writeStream.format("lakelog")`` rely on.
- ``test_killed_writer_never_duplicates_a_micro_batch``: the sink's commit,
  driven without Spark, killed at random moments (inside the Delta commit
  included) and then replayed from micro-batch 0 each time, as if Spark had lost
  its commit log too: a micro-batch is all or nothing, and a repeat of any
  number of already-written micro-batches writes none of them twice. Spark
  replays at most the one batch in flight; this covers the commit itself, at
  points a whole query is too slow to be killed at.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from lakelog.catalog import Catalog
from lakelog.testing.env import child_env
from tests.compaction.helpers import subprocess_env
from tests.fixtures.brokers import PROJECT
from tests.spark_connector.helpers import log_rows
from tests.spark_connector.stream_commit_worker import RECORDS_PER_BATCH
from tests.spark_connector.stream_job import TOPIC

pytestmark = pytest.mark.integration  # streaming queries in processes that are killed

BATCHES = 30


def run_worker(root: str, kill_after: float | None) -> int:
    """Run the committing process; once it has committed a batch, SIGKILL it ``kill_after``
    seconds later (None: let it finish). Returns how many batches it reported committed."""
    env = child_env(PROJECT)
    args = [sys.executable, "-m", "tests.spark_connector.stream_commit_worker", root, "q1"]
    proc = subprocess.Popen(
        [*args, str(BATCHES)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    if kill_after is None:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        return len(out.split())
    first = proc.stdout.readline()  # the first micro-batch is committed
    time.sleep(kill_after)
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    return len((first + out).split())


def test_killed_writer_never_duplicates_a_micro_batch(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    catalog = Catalog(root)
    catalog.create_topic("out", 2)
    rng = random.Random(7)
    killed_mid_run = 0
    for _ in range(4):
        done = run_worker(root, kill_after=rng.uniform(0.0, 0.5))
        killed_mid_run += 0 < done < BATCHES
    assert run_worker(root, kill_after=None) == BATCHES
    rows = log_rows(catalog, "out")
    values = sorted(r[6] for r in rows)  # type: ignore[type-var]
    expected = sorted(f"{b}-{i}".encode() for b in range(BATCHES) for i in range(RECORDS_PER_BATCH))
    assert values == expected  # every micro-batch exactly once
    log = catalog.topic("out")
    assert log.txn_version("spark-query.q1") == BATCHES - 1
    for p in (0, 1):  # dense offsets: no batch was half-written
        assert [r[2] for r in rows if r[1] == p] == list(range(log.high_watermark(p)))
    assert killed_mid_run >= 1  # at least one kill landed while batches were being committed


# -- a real Structured Streaming query, killed and restarted from its checkpoint ----------

INPUT_FILES = 8
ROWS_PER_FILE = 20
#: The first run holds after the sink's commit of this micro-batch (see stream_job).
HELD_BATCH = 2
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def write_input(directory: Path) -> list[bytes]:
    """INPUT_FILES JSON files of ROWS_PER_FILE rows, oldest first; returns every value."""
    directory.mkdir()
    values: list[bytes] = []
    oldest = time.time() - 3600
    for f in range(INPUT_FILES):
        rows = [{"key": f"k{i % 7}", "value": f"{f}-{i}"} for i in range(ROWS_PER_FILE)]
        path = directory / f"part-{f:02d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (oldest + f, oldest + f))  # the file source reads the oldest first
        values += [r["value"].encode() for r in rows]
    return values


def latest_batch(checkpoint: Path, log: str) -> int:
    """The newest batch id of Spark's ``offsets`` (planned) or ``commits`` (done) log."""
    directory = checkpoint / log
    if not directory.exists():
        return -1
    return max((int(p.name) for p in directory.iterdir() if p.name.isdigit()), default=-1)


def session_members(session: int) -> list[psutil.Process]:
    """The live processes of a session (zombies are dead already, whoever reaps them)."""
    members = []
    for process in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error):
            if os.getsid(process.pid) == session and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
    return members


class StreamJob:
    """``stream_job`` in a session of its own: its driver, JVM and Python workers."""

    def __init__(self, log_path: Path, *args: str) -> None:
        env = subprocess_env()
        env["LAKELOG_SPARK_DRIVER_JAVA_OPTIONS"] = FAST_JVM
        env["LAKELOG_SPARK_DRIVER_MEMORY"] = "1g"
        self.log_path = log_path
        with log_path.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.spark_connector.stream_job", *args],
                cwd=PROJECT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 240
        while not condition():
            if self.process.poll() is not None:
                pytest.fail(f"the query ended before {what}:\n{self.output()}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"timed out waiting for {what}:\n{self.output()}")
            time.sleep(0.01)

    def kill(self) -> None:
        """SIGKILL to every process of the query at once, as a crash of its machine.

        The driver and the JVM share the session's process group; PySpark's worker
        daemon makes a group of its own, so the session's members are killed too.
        """
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        while members := session_members(self.process.pid):
            for member in members:
                with contextlib.suppress(psutil.Error):
                    member.kill()
            psutil.wait_procs(members, timeout=10)
        self.process.wait(timeout=30)


def test_killed_streaming_query_restarts_exactly_once(tmp_path: Path) -> None:
    """A Structured Streaming query into a topic, SIGKILLed twice mid-stream and restarted
    from its checkpoint: the topic holds every input row exactly once.

    Kill 1 lands right after the sink committed micro-batch HELD_BATCH and before Spark
    recorded it, so the restart runs that batch again (the sink must skip it). Kill 2
    lands whenever a later micro-batch is in flight (planned, not recorded as done).
    """
    root, checkpoint, marker = tmp_path / "root", tmp_path / "checkpoint", tmp_path / "held"
    catalog = Catalog(str(root))
    catalog.create_topic(TOPIC, 2)
    expected = write_input(tmp_path / "input")
    args = [str(root), str(tmp_path / "input"), str(checkpoint)]
    log = catalog.topic(TOPIC)

    def written() -> list[bytes]:
        return [r[6] or b"" for r in log_rows(catalog, TOPIC)]

    def committed_batch() -> int | None:
        """The last micro-batch the sink committed (its Delta app transaction version)."""
        log.refresh()
        return log.txn_version(app_id())

    def app_id() -> str:
        """The sink's Delta app id for this query: Spark's query id from the checkpoint."""
        return "spark-query." + str(json.loads((checkpoint / "metadata").read_text())["id"])

    # Kill 1: the sink has committed HELD_BATCH, Spark's commit log has not.
    hold = ["--hold-after-commit", str(HELD_BATCH), str(marker)]
    first = StreamJob(tmp_path / "first.log", *args, *hold)
    try:
        first.wait_until(marker.exists, f"the sink to commit micro-batch {HELD_BATCH}")
    finally:
        first.kill()
    assert latest_batch(checkpoint, "offsets") == HELD_BATCH  # planned and in flight,
    assert latest_batch(checkpoint, "commits") == HELD_BATCH - 1  # not recorded as done,
    assert len(written()) == (HELD_BATCH + 1) * ROWS_PER_FILE  # yet written: some of the input

    # Kill 2: restarted from the checkpoint (re-running HELD_BATCH first), killed while a
    # later micro-batch is in flight.
    second = StreamJob(tmp_path / "second.log", *args)
    try:
        second.wait_until(
            lambda: (
                latest_batch(checkpoint, "commits") > HELD_BATCH
                and latest_batch(checkpoint, "offsets") > latest_batch(checkpoint, "commits")
            ),
            "a micro-batch in flight after the replayed one",
        )
    finally:
        second.kill()
    in_flight = latest_batch(checkpoint, "offsets")
    done = latest_batch(checkpoint, "commits")
    assert HELD_BATCH < done < in_flight < INPUT_FILES
    # The sink may or may not have committed the batch in flight; nothing else is there.
    assert len(written()) in ((done + 1) * ROWS_PER_FILE, (in_flight + 1) * ROWS_PER_FILE)

    # The last run finishes the input present at its start, and stops.
    third = StreamJob(tmp_path / "third.log", *args, "--available-now")
    try:
        assert third.process.wait(timeout=300) == 0, third.output()
    finally:
        third.kill()
    assert latest_batch(checkpoint, "commits") == INPUT_FILES - 1
    assert sorted(written()) == sorted(expected)  # every row exactly once
    assert committed_batch() == INPUT_FILES - 1  # the sink's record of the query's progress
    rows = log_rows(catalog, TOPIC)
    for p in (0, 1):  # dense offsets: no micro-batch was half-written
        assert [r[2] for r in rows if r[1] == p] == list(range(log.high_watermark(p)))
    catalog.close()
