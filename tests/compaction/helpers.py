"""Helpers shared by the compaction tests: reading a whole log, snapshotting a table."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from lakelog import Catalog
from lakelog.storage import join
from lakelog.testing.env import child_env
from lakelog.topic_log import TopicLog
from tests.fixtures import PROJECT
from tests.fixtures.roots import RootSpec

VENV_BIN = Path(sys.executable).parent

#: A fixed clock for time-based rules (2023-11-14T22:13:20Z).
T0 = 1_700_000_000_000
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR

Row = tuple[int, int, bytes | None, bytes | None, int]  # partition, offset, key, value, ts


def read_all(topic_log: TopicLog, refresh: bool = True) -> list[Row]:
    """Every record of every partition, from each partition's log start offset."""
    if refresh:
        topic_log.refresh()
    rows: list[Row] = []
    for p in range(topic_log.num_partitions):
        fetched = topic_log.read(
            p, topic_log.log_start_offset(p), max_records=10**7, max_bytes=2**40
        )
        rows += [
            (p, r.offset, r.key, r.value, r.timestamp_ms)
            for r in fetched.to_records(topic_log.name)
        ]
    return rows


@dataclass(frozen=True)
class TableSnapshot:
    version: int
    live: frozenset[str]


def snapshot(catalog: Catalog, topic: str) -> TableSnapshot:
    topic_log = catalog.topic(topic)
    topic_log.refresh()
    return TableSnapshot(topic_log.version, frozenset(topic_log.live_paths()))


def data_files(catalog: Catalog, topic: str) -> set[str]:
    """Table-relative paths of every segment file on storage, live or not."""
    topic_log = catalog.topic(topic)
    prefix = topic_log.table_path + "/"
    return {
        info.path[len(prefix) :]
        for info in catalog.storage.walk_files(topic_log.table_path)
        if info.path.endswith(".parquet") and "/_delta_log/" not in "/" + info.path
    }


def exists(catalog: Catalog, topic: str, path: str) -> bool:
    return catalog.storage.exists(join(catalog.topic(topic).table_path, path))


def subprocess_env(root: RootSpec | None = None) -> dict[str, str]:
    """Environment for a child lakelog/Spark process: this interpreter and this project,
    with no gateway of this process's Spark to attach to."""
    env = child_env(
        PROJECT,
        s3=None if root is None else root.s3,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    return env


def run(
    args: list[str], env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
