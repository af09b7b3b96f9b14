"""Several OS processes appending to one topic, and appenders killed with SIGKILL.

Both tests prove that the race they are about happened, not only that the
log looks right afterwards: the concurrent writers report their lost commit
races and renumbered segments (``TopicLog.commit_stats``), and the kill must
fall between an append's segment writes and its commit, which leaves segment
files no Delta commit references.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from lakelog import Catalog, CommitStats, Record
from lakelog.cli import main as lakelog_cli
from lakelog.storage import join
from tests.fixtures.brokers import root_env
from tests.fixtures.roots import RootSpec

pytestmark = pytest.mark.slow

#: Appends per concurrent writer: enough for the writers to overlap many times.
CONCURRENT_BATCHES = 30
#: SIGKILLs allowed until one falls between an append's segment writes and its commit.
MAX_KILLS = 6
#: Records the two appenders must have had acknowledged before they are killed.
ACKS_BEFORE_KILL = 60


def _spawn(
    root: RootSpec,
    worker: str,
    acks: Path,
    batches: int,
    env: dict[str, str],
    *options: str,
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
            *options,
        ],
        env=env,
        stderr=subprocess.PIPE,
    )


def _open_gate(gate: Path, workers: list[str], procs: list[subprocess.Popen[bytes]]) -> None:
    """Wait until every worker has opened the topic, then let them all append at once."""
    deadline = time.monotonic() + 120
    while not all((gate / f"{w}.ready").exists() for w in workers):
        for proc in procs:
            if proc.poll() is not None:
                _, err = proc.communicate()
                raise AssertionError(f"a worker exited before the start: {err.decode()}")
        assert time.monotonic() < deadline, "the workers never got ready"
        time.sleep(0.01)
    (gate / "go").touch()


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


def test_concurrent_processes_get_dense_unique_offsets(root: RootSpec, tmp_path: Path) -> None:
    catalog = Catalog(root.url, s3=root.s3)
    catalog.create_topic("t", 3)
    env = root_env(root)
    names = ["w0", "w1", "w2"]
    gate = tmp_path / "gate"
    gate.mkdir()
    ack_files = [tmp_path / f"acks-{w}" for w in names]
    stats_files = [tmp_path / f"stats-{w}.json" for w in names]
    procs = [
        _spawn(root, w, acks, CONCURRENT_BATCHES, env, "--gate", str(gate), "--stats", str(stats))
        for w, acks, stats in zip(names, ack_files, stats_files, strict=True)
    ]
    _open_gate(gate, names, procs)
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()
    acked = _read_acks(ack_files)
    assert len(acked) == len(names) * CONCURRENT_BATCHES * 6
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
    # The writers did race: versions were lost to another writer, and segments
    # renumbered after those losses, so the dense offsets above came out of the
    # re-numbering path, not out of writers that happened to take turns.
    stats = [CommitStats(**json.loads(path.read_text())) for path in stats_files]
    writers = [value.split("-")[0] for _, value in contents[0]]
    switches = sum(1 for a, b in itertools.pairwise(writers) if a != b)
    print(f"commit stats {stats}; writer switches in partition 0: {switches}")
    assert [s.commits for s in stats] == [CONCURRENT_BATCHES] * len(names)
    assert sum(s.lost_races for s in stats) > 0, stats
    assert sum(s.renumbered_segments for s in stats) > 0, stats


def _orphan_segments(root: RootSpec) -> set[str]:
    """Files in the topic's table directory that no add action of its Delta log names.

    Nothing in these tests removes a segment, so the adds of the current
    snapshot are every add the log ever had.
    """
    catalog = Catalog(root.url, s3=root.s3)
    try:
        log = catalog.topic("t")
        log.refresh()
        live = {join(log.table_path, path) for path in log.live_paths()}
        delta_log = join(log.table_path, "_delta_log") + "/"
        stored = {
            f.path
            for f in catalog.storage.walk_files(log.table_path)
            if not f.path.startswith(delta_log)
        }
        return stored - live
    finally:
        catalog.close()


def _kill_appenders(root: RootSpec, env: dict[str, str], tmp_path: Path, round_: int) -> list[Path]:
    """Start two appenders, SIGKILL both after some acknowledgements; their ack files."""
    ack_files = [tmp_path / f"acks-{name}{round_}" for name in "ab"]
    procs = [
        _spawn(root, f"{name}{round_}", path, 0, env)
        for name, path in zip("ab", ack_files, strict=True)
    ]
    deadline = time.monotonic() + 120
    while len(_read_acks(ack_files)) < ACKS_BEFORE_KILL:
        for proc in procs:
            if proc.poll() is not None:
                _, err = proc.communicate()
                raise AssertionError(f"an appender died before the kill: {err.decode()}")
        assert time.monotonic() < deadline, "the appenders acknowledged too little"
        time.sleep(0.05)
    for proc in procs:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    return ack_files


def test_sigkill_loses_nothing_acknowledged_and_shows_no_half_batch(
    root: RootSpec,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    catalog = Catalog(root.url, s3=root.s3)
    catalog.create_topic("t", 3)
    env = root_env(root)
    # Kill until a kill falls inside an append, between its segment writes and its
    # commit: the segments it leaves, named by no commit, are the proof.
    ack_files: list[Path] = []
    orphans: set[str] = set()
    kills = 0
    while not orphans:
        assert kills < MAX_KILLS, f"none of {kills} kills fell between segment writes and commit"
        ack_files += _kill_appenders(root, env, tmp_path, kills)
        kills += 1
        orphans = _orphan_segments(root)
    with capsys.disabled():  # capsys is here for the doctor's report
        print(f"{kills} kill(s); {len(orphans)} uncommitted segment(s) left: {sorted(orphans)}")
    acked = _read_acks(ack_files)
    assert len(acked) >= ACKS_BEFORE_KILL * kills
    contents = _log_contents(Catalog(root.url, s3=root.s3))
    _assert_dense_and_holds(contents, acked)
    batches: dict[str, int] = defaultdict(int)
    for rows in contents.values():
        for _, value in rows:
            worker, batch, _ = value.split("-")
            batches[f"{worker}-{batch}"] += 1
    assert set(batches.values()) == {6}, "a batch is only partly visible"

    # The operator's clean-up deletes exactly those leftovers; every record stays.
    if root.s3 is not None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = lakelog_cli(["doctor", "--root", root.url, "--json", "--repair", "--grace-seconds", "0"])
    report = json.loads(capsys.readouterr().out)
    assert {f["path"] for f in report["repaired"]} == orphans, report
    assert code == 0, report
    assert _orphan_segments(root) == set()
    assert _log_contents(Catalog(root.url, s3=root.s3)) == contents

    # The table is still writable after the crash.
    follow = catalog.topic("t")
    follow.refresh()
    hwm = follow.high_watermark(0)
    result = follow.append([Record(b"after", partition=0)])
    assert result.offsets == [hwm]
