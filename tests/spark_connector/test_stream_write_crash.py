"""Exactly-once streaming writes when the committing process is killed with SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from lakelog.catalog import Catalog
from tests.fixtures.brokers import PROJECT
from tests.spark_connector.helpers import log_rows
from tests.spark_connector.stream_commit_worker import RECORDS_PER_BATCH

BATCHES = 30


def run_worker(root: str, kill_after: float | None) -> int:
    """Run the committing process; once it has committed a batch, SIGKILL it ``kill_after``
    seconds later (None: let it finish). Returns how many batches it reported committed."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
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
