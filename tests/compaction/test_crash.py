"""A compaction job killed with SIGKILL mid-write leaves the table exactly as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from pyspark.sql import SparkSession

from compaction.compact import compact_topic
from compaction.vacuum import vacuum_topic
from lakelog import Catalog, Record
from tests.compaction.helpers import data_files, read_all, snapshot, subprocess_env
from tests.fixtures import PROJECT
from tests.fixtures.roots import RootSpec

PARTITIONS = 3
APPENDS = 60


@pytest.mark.slow
@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_sigkill_mid_compaction_then_rerun(
    root: RootSpec, catalog: Catalog, spark: SparkSession
) -> None:
    # segment.bytes below any segment's size: every segment is its own output group, so
    # the job writes ~180 files one after another and is caught in the middle of that.
    catalog.create_topic("big", PARTITIONS, {"cleanup.policy": "compact", "segment.bytes": "14"})
    log = catalog.topic("big")
    for a in range(APPENDS):
        log.append(
            [
                Record(f"v{a}-{i}".encode(), key=f"k{(a * 7 + i) % 40}".encode(), partition=i % 3)
                for i in range(30)
            ]
        )
    before_rows = read_all(log)
    before = snapshot(catalog, "big")
    files_before = data_files(catalog, "big")
    assert files_before == set(before.live)

    env = subprocess_env()
    env["LAKELOG_SPARK_DRIVER_JAVA_OPTIONS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    args = [sys.executable, "-m", "compaction.job", "--root", root.url, "--master", "local[2]"]
    args += ["compact", "--topic", "big", "--force", "--no-progress", "--no-history"]
    job = subprocess.Popen(
        args,
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the JVM and Python workers too
    )
    try:
        deadline = time.monotonic() + 180
        while not (data_files(catalog, "big") - files_before):
            if job.poll() is not None or time.monotonic() > deadline:
                output = job.stdout.read().decode(errors="replace") if job.stdout else ""
                pytest.fail(f"the job ended (or hung) before writing anything:\n{output}")
            time.sleep(0.01)
        os.killpg(job.pid, signal.SIGKILL)  # kill -9, driver, JVM and workers at once
        job.wait(timeout=30)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=30)
    assert job.returncode == -signal.SIGKILL

    # Nothing was committed: same Delta version, same live files, same records.
    assert snapshot(catalog, "big") == before
    assert read_all(catalog.topic("big")) == before_rows
    orphans = data_files(catalog, "big") - files_before
    assert orphans  # what the killed job wrote is invisible, left for vacuum

    # A rerun completes the job: the latest record per key. Every segment holds more than
    # segment.bytes, so none is active (Kafka would have rolled each): all are cleaned.
    report = compact_topic(catalog, "big", spark, force=True)
    assert report.status == "ok", report.message
    latest: dict[tuple[int, bytes | None], int] = {}
    for p, o, k, _, _ in before_rows:
        latest[(p, k)] = o
    expected = [r for r in before_rows if latest[(r[0], r[2])] == r[1]]
    assert read_all(log) == expected

    # Vacuum without grace deletes the killed job's orphans and the replaced segments.
    vacuum_topic(catalog, "big", grace_ms=0, orphan_grace_ms=0)
    assert data_files(catalog, "big") == set(snapshot(catalog, "big").live)
    assert read_all(log) == expected
