"""Several OS processes appending to one topic, and appenders killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from lakelog import Catalog, Record
from tests.fixtures.roots import RootSpec

pytestmark = pytest.mark.slow


def _spawn(
    root: RootSpec, worker: str, acks: Path, batches: int, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.lakelog.append_worker",
            "--root",
            root.url,
            "--topic",
            "t",
            "--worker",
            worker,
            "--batches",
            str(batches),
            "--acks",
            str(acks),
        ],
        env=env,
        stderr=subprocess.PIPE,
    )


def _env(root: RootSpec, request: pytest.FixtureRequest) -> dict[str, str]:
    env: dict[str, str] = request.getfixturevalue("s3_env") if root.s3 else dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def _read_acks(paths: list[Path]) -> list[tuple[int, int, str]]:
    acked = []
    for path in paths:
        if path.exists():
            for line in path.read_text().splitlines():
                p, o, v = line.split(" ", 2)
                acked.append((int(p), int(o), v))
    return acked


def _log_contents(catalog: Catalog) -> dict[int, list[tuple[int, str]]]:
    log = catalog.topic("t")
    log.refresh()
    contents: dict[int, list[tuple[int, str]]] = {}
    for p in range(log.num_partitions):
        hwm = log.high_watermark(p)
        rows = log.read(p, 0, max_records=10**9, max_bytes=2**62).to_records("t") if hwm else []
        contents[p] = [(r.offset, (r.value or b"").decode()) for r in rows]
    return contents


def _assert_dense_and_holds(
    contents: dict[int, list[tuple[int, str]]], acked: list[tuple[int, int, str]]
) -> None:
    for p, rows in contents.items():
        offsets = [o for o, _ in rows]
        assert offsets == list(range(len(rows))), f"partition {p} offsets not dense"
        values = [v for _, v in rows]
        assert len(set(values)) == len(values), f"partition {p} has a record twice"
    for p, o, v in acked:
        assert contents[p][o] == (o, v), f"acknowledged {v} missing at {p}/{o}"


def test_concurrent_processes_get_dense_unique_offsets(
    root: RootSpec, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    catalog = Catalog(root.url, s3=root.s3)
    catalog.create_topic("t", 3)
    env = _env(root, request)
    workers = 3
    batches = 15
    ack_files = [tmp_path / f"acks{w}" for w in range(workers)]
    procs = [_spawn(root, f"w{w}", ack_files[w], batches, env) for w in range(workers)]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()
    acked = _read_acks(ack_files)
    assert len(acked) == workers * batches * 6
    contents = _log_contents(catalog)
    assert sum(len(rows) for rows in contents.values()) == len(acked)
    _assert_dense_and_holds(contents, acked)
    # Order per producer is preserved within each partition.
    for rows in contents.values():
        per_worker: dict[str, list[int]] = defaultdict(list)
        for _, value in rows:
            worker, batch, _ = value.split("-")
            per_worker[worker].append(int(batch))
        for sequence in per_worker.values():
            assert sequence == sorted(sequence)


def test_sigkill_loses_nothing_acknowledged_and_shows_no_half_batch(
    root: RootSpec, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    catalog = Catalog(root.url, s3=root.s3)
    catalog.create_topic("t", 3)
    env = _env(root, request)
    ack_files = [tmp_path / "acks-a", tmp_path / "acks-b"]
    procs = [_spawn(root, name, path, 0, env) for name, path in zip("ab", ack_files, strict=True)]
    deadline = time.monotonic() + 120
    while len(_read_acks(ack_files)) < 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    for proc in procs:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    acked = _read_acks(ack_files)
    assert len(acked) >= 60
    contents = _log_contents(Catalog(root.url, s3=root.s3))
    _assert_dense_and_holds(contents, acked)
    batches: dict[str, int] = defaultdict(int)
    for rows in contents.values():
        for _, value in rows:
            worker, batch, _ = value.split("-")
            batches[f"{worker}-{batch}"] += 1
    assert set(batches.values()) == {6}, "a batch is only partly visible"
    # The table is still writable after the crash.
    follow = catalog.topic("t")
    follow.refresh()
    hwm = follow.high_watermark(0)
    result = follow.append([Record(b"after", partition=0)])
    assert result.offsets == [hwm]
