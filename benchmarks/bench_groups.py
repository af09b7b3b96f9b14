"""Consumer groups: offset commit throughput and p99 latency, and rebalance time.

One broker subprocess over a temporary local root. The consumers are real
``lakelog.client.Consumer`` group members (one thread each, one process).

* commits: N members of one group (100 at ``large``) over a topic of N
  partitions each commit their partition's offset once a second for the
  run; figures are commits/s achieved and p99 commit latency. Baselines from
  the same run: the offered rate (N/s: what "every second" asks for) and the
  naive offsets table, one ``write_deltalake`` append per commit in-process
  (what the broker would cost without batching many commits into one Delta
  commit), measured for throughput and p99 latency.
* rebalance: a group of M-1 stable members (10 members at every size but
  tiny) is joined by an M-th; the time from that member's ``subscribe`` until
  every member polls with the new generation. Baseline: a one-member group's
  join (the fixed cost every rebalance pays). The broker runs with
  ``group_initial_rebalance_delay_ms=0`` so the figure is the protocol's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from benchmarks.bench_broker import HOST, Server, start_server
from benchmarks.common import Progress, Report, Result, config_for, percentile, rate, scratch_dir
from lakelog.client import AdminClient, Consumer, OffsetAndMetadata

NAME = "groups"
DESCRIPTION = "Consumer groups: offset commit throughput / p99 latency, rebalance time"
COMMITS = "offset commits"
REBALANCE = "rebalance"


@dataclass(frozen=True)
class GroupsBenchConfig:
    consumers: int
    commit_seconds: float
    rebalance_members: int
    rebalance_rounds: int
    naive_commits: int


CONFIGS = {
    "tiny": GroupsBenchConfig(3, 2.0, 3, 1, 20),
    "small": GroupsBenchConfig(20, 10.0, 10, 3, 200),
    "large": GroupsBenchConfig(100, 30.0, 10, 5, 500),
}
BROKER_SETTINGS = {
    "LAKELOG_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
    "LAKELOG_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
}
MEMBER = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 1_000, "fetch_threads": 1}


class Member:
    """A group member polling on its own thread; ``generation`` is what its last poll saw."""

    def __init__(self, url: str, group: str, topic: str, commit_every_s: float | None) -> None:
        self.consumer = Consumer(url, group_id=group, enable_auto_commit=False, **MEMBER)  # type: ignore[arg-type]
        self.commit_every_s = commit_every_s
        self.latencies: list[float] = []
        self.generation: int | None = None
        self.error: BaseException | None = None
        self.measuring = threading.Event()
        self._stop = threading.Event()
        self.subscribed_at = time.perf_counter()
        self.consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_commit = time.monotonic()
        offset = 0
        try:
            while not self._stop.is_set():
                self.consumer.poll(100)
                self.generation = self.consumer.generation_id
                if self.commit_every_s is None or time.monotonic() < next_commit:
                    continue
                next_commit += self.commit_every_s
                owned = sorted(self.consumer.assignment())
                if not owned or self.consumer.generation_id is None:
                    continue
                offset += 1
                started = time.perf_counter()
                self.consumer.commit({tp: OffsetAndMetadata(offset) for tp in owned})
                if self.measuring.is_set():
                    self.latencies.append(time.perf_counter() - started)
        except BaseException as exc:  # reported by the orchestrator
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.consumer.close(autocommit=False)
        if self.error is not None:
            raise RuntimeError(f"a benchmark member failed: {self.error!r}") from self.error


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"benchmark gave up waiting for {what}")
        time.sleep(0.01)


def bench_commits(
    cfg: GroupsBenchConfig, server: Server, root: Path, progress: Progress
) -> list[Result]:
    url = f"http://{HOST}:{server.port}"
    topic = "commits"
    with AdminClient(url) as admin:
        admin.create_topic(topic, cfg.consumers)
    progress(f"commits: {cfg.consumers} members joining")
    members = [Member(url, "bench-commits", topic, 1.0) for _ in range(cfg.consumers)]
    try:
        _wait(
            lambda: (
                all(m.consumer.assignment() for m in members)
                and len({m.generation for m in members}) == 1
            ),
            "every member to own a partition",
        )
        for m in members:
            m.measuring.set()
        time.sleep(cfg.commit_seconds)
        for m in members:
            m.measuring.clear()
    finally:
        for m in members:
            m.stop()
    latencies = [x for m in members for x in m.latencies]
    achieved = rate(len(latencies), cfg.commit_seconds)
    naive_rate, naive_p99 = naive_offsets_table(cfg, root, progress)
    params = {"consumers": cfg.consumers, "seconds": cfg.commit_seconds, "commits": len(latencies)}
    return [
        Result(
            COMMITS,
            f"{cfg.consumers} members, 1/s each",
            "throughput",
            achieved,
            "commits/s",
            {"offered": float(cfg.consumers), "naive Delta append": naive_rate},
            higher_is_better=True,
            params=params,
        ),
        Result(
            COMMITS,
            f"{cfg.consumers} members, 1/s each",
            "p99 latency",
            percentile(latencies, 99) * 1000 if latencies else float("nan"),
            "ms",
            {"naive Delta append": naive_p99 * 1000},
            higher_is_better=False,
            params=params,
        ),
    ]


def naive_offsets_table(
    cfg: GroupsBenchConfig, root: Path, progress: Progress
) -> tuple[float, float]:
    """One ``write_deltalake`` append per commit: commits/s and p99 latency in seconds."""
    progress(f"naive baseline: {cfg.naive_commits} single-row Delta appends")
    table_uri = str(root / "naive-offsets")
    times = []
    for i in range(cfg.naive_commits):
        row = pa.table({"key": [f"g\0commits\0{i % cfg.consumers}"], "offset": [i]})
        started = time.perf_counter()
        write_deltalake(table_uri, row, mode="append")
        times.append(time.perf_counter() - started)
    return rate(len(times), sum(times)), percentile(times, 99)


def join_time(url: str, group: str, topic: str, existing: list[Member]) -> tuple[float, Member]:
    """Seconds from a new member's subscribe until every member polled the new generation."""
    before = max((m.generation or 0) for m in existing) if existing else 0
    member = Member(url, group, topic, None)
    everyone = [*existing, member]
    _wait(
        lambda: (
            all(m.generation is not None and m.generation > before for m in everyone)
            and len({m.generation for m in everyone}) == 1
        ),
        "the rebalance to complete",
    )
    return time.perf_counter() - member.subscribed_at, member


def bench_rebalance(cfg: GroupsBenchConfig, server: Server, progress: Progress) -> list[Result]:
    url = f"http://{HOST}:{server.port}"
    topic = "rebalance"
    with AdminClient(url) as admin:
        admin.create_topic(topic, cfg.rebalance_members * 2)
    singles: list[float] = []
    joins: list[float] = []
    for round_ in range(cfg.rebalance_rounds):
        progress(f"rebalance round {round_ + 1}/{cfg.rebalance_rounds}")
        seconds, alone = join_time(url, f"bench-single-{round_}", topic, [])
        singles.append(seconds)
        alone.stop()
        group = f"bench-rebalance-{round_}"
        members: list[Member] = []
        try:
            for _ in range(cfg.rebalance_members - 1):
                members.append(join_time(url, group, topic, members)[1])
            seconds, last = join_time(url, group, topic, members)
            members.append(last)
            joins.append(seconds)
        finally:
            for m in members:
                m.stop()
    params = {"members": cfg.rebalance_members, "rounds": cfg.rebalance_rounds}
    return [
        Result(
            REBALANCE,
            f"{cfg.rebalance_members}-member group, one joins",
            "median time",
            sorted(joins)[len(joins) // 2] * 1000,
            "ms",
            {"1-member join": sorted(singles)[len(singles) // 2] * 1000},
            higher_is_better=False,
            params=params,
        )
    ]


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``groups`` suite at a named size (tiny, small, large)."""
    cfg = config_for(CONFIGS, size)
    logging.getLogger("lakelog").setLevel(logging.WARNING)
    report = Report(NAME)
    with scratch_dir(workdir, "groups") as scratch:
        root = scratch / "root"
        args = ["-m", "server", "--root", str(root), "--host", HOST, "--log-level", "warning"]
        server = start_server("broker", args, scratch, BROKER_SETTINGS)
        try:
            report.results += bench_commits(cfg, server, scratch, progress)
            report.results += bench_rebalance(cfg, server, progress)
        finally:
            server.stop()
    commits = report.find(COMMITS, f"{cfg.consumers} members, 1/s each", "throughput")
    if commits is not None:
        report.notes.append(
            f"{cfg.consumers} members committing once a second achieved "
            f"{commits.value:.1f} commits/s (offered {cfg.consumers}/s)"
        )
    return report
