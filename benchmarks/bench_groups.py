"""Consumer groups: offset commit throughput and latency, and rebalance time.

One broker subprocess over a temporary local root. The consumers are real
``lakelog.client.Consumer`` group members (one thread each, one process).

* commits: N members of one group (100 at ``large``) over a topic of N
  partitions each commit their partition's offset. The baseline is the naive
  offsets table: one ``write_deltalake`` append per commit, serialized, in
  this process (what the broker would cost without batching many commits into
  one Delta commit, and without HTTP). One load generator drives both: N
  threads with the same schedule, at two paces, each with a warm-up and a
  measured window:

  - once a second each (open loop, first commits spread over the second):
    what the generator actually started per second (offered), what completed
    per second (throughput) and p99 latency;
  - back to back (closed loop, each thread commits again as soon as its
    commit returns): the saturated throughput and its p99 latency.

  Offered is measured, never taken from the configuration: a thread whose
  commit outlasts its interval sends the next one late, and offers less.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from benchmarks.common import Progress, Report, Result, config_for, percentile, rate, scratch_dir
from benchmarks.servers import start_broker
from lakelog.client import AdminClient, Consumer, OffsetAndMetadata
from lakelog.testing.brokers import ServerProcess, wait_for

NAME = "groups"
DESCRIPTION = "Consumer groups: offset commit throughput / p99 latency, rebalance time"
COMMITS = "offset commits"
REBALANCE = "rebalance"

NAIVE = "naive Delta append"
#: The two paces of the commit load: seconds between one thread's commits, or None (back to back).
ONCE_A_SECOND = 1.0
BACK_TO_BACK = None
#: Longest idle step of a load thread (a member's poll timeout while nothing is due).
IDLE_S = 0.1


@dataclass(frozen=True)
class GroupsBenchConfig:
    consumers: int
    commit_seconds: float
    rebalance_members: int
    rebalance_rounds: int
    #: untimed start of each commit load (first commits, Delta log growth settles)
    warmup_seconds: float


CONFIGS = {
    "tiny": GroupsBenchConfig(3, 2.0, 3, 1, 0.5),
    "small": GroupsBenchConfig(20, 10.0, 10, 3, 1.0),
    "large": GroupsBenchConfig(100, 30.0, 10, 5, 2.0),
}
BROKER_SETTINGS = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 1000}
MEMBER = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 1_000, "fetch_threads": 1}


# -- the load generator --------------------------------------------------------


class CommitThread:
    """One thread of the commit load: commits through ``commit`` when due, else ``idle``.

    The same class drives a lakelog member (``idle`` polls, keeping it in its
    group) and a naive committer (``idle`` sleeps), so both contenders meet the
    same schedule and are timed the same way. ``samples`` holds (started,
    finished) ``time.monotonic()`` pairs of every commit.
    """

    def __init__(
        self, commit: Callable[[int], None], idle: Callable[[float], None], name: str
    ) -> None:
        self._commit = commit
        self._idle = idle
        self._lock = threading.Lock()
        self._loading = False
        self._interval: float | None = None
        self._next_due = 0.0
        self._at_rest = threading.Event()
        self._at_rest.set()
        self._stop = threading.Event()
        self.samples: list[tuple[float, float]] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def load(self, interval: float | None, first_due: float) -> None:
        """Commit every ``interval`` seconds from ``first_due`` on (None: back to back)."""
        with self._lock:
            self._loading, self._interval, self._next_due = True, interval, first_due

    def stop_loading(self) -> None:
        """Start no further commit (the one in flight, if any, goes on)."""
        with self._lock:
            self._loading = False

    def unload(self, timeout_s: float = 120) -> None:
        """Stop committing and wait for the commit in flight, if any, to return."""
        self.stop_loading()
        if not self._at_rest.wait(timeout_s):
            raise RuntimeError(f"a commit of {self._thread.name} took over {timeout_s:g} s")

    def _next_idle(self) -> float | None:
        """Seconds to idle before looking again, or None: commit now."""
        with self._lock:
            if not self._loading:
                return IDLE_S
            wait = self._next_due - time.monotonic()
            if wait > 0:
                return min(wait, IDLE_S)
            if self._interval is not None:
                self._next_due += self._interval
            self._at_rest.clear()  # under the lock: ``unload`` then waits for this commit
            return None

    def _run(self) -> None:
        offset = 0
        try:
            while not self._stop.is_set():
                wait = self._next_idle()
                if wait is not None:
                    self._idle(wait)
                    continue
                offset += 1
                started = time.monotonic()
                try:
                    self._commit(offset)
                finally:
                    self._at_rest.set()
                self.samples.append((started, time.monotonic()))
        except BaseException as exc:  # reported by the orchestrator
            self.error = exc
            self._at_rest.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.check()

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"{self._thread.name} failed: {self.error!r}") from self.error


@dataclass(frozen=True)
class CommitFigures:
    """What one commit load measured over its window."""

    offered: float  # commits started per second inside the window
    achieved: float  # commits completed per second inside the window
    latencies: list[float]  # seconds of each commit started inside the window

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies, 99) * 1000 if self.latencies else float("nan")


def measure(
    threads: Sequence[CommitThread], interval: float | None, warmup_s: float, seconds: float
) -> CommitFigures:
    """Run one pace on every thread: ``warmup_s`` untimed, then a window of ``seconds``.

    Once a second, the threads' first commits are spread evenly over the
    interval, as independent consumers' would be; back to back, all start at once.
    """
    start = time.monotonic()
    for i, thread in enumerate(threads):
        stagger = interval * i / len(threads) if interval is not None else 0.0
        thread.load(interval, start + stagger)
    begin = start + warmup_s
    end = begin + seconds
    time.sleep(max(0.0, end - time.monotonic()))
    # Every thread stops first: a thread still loaded and behind its schedule would start
    # commit after commit while an unloaded one waits for its last.
    for thread in threads:
        thread.stop_loading()
    for thread in threads:
        thread.unload()
    samples: list[tuple[float, float]] = []
    for thread in threads:
        thread.check()
        samples += thread.samples
        thread.samples = []
    started = [(a, b) for a, b in samples if begin <= a < end]
    return CommitFigures(
        offered=rate(len(started), seconds),
        achieved=rate(sum(1 for _, b in samples if begin <= b < end), seconds),
        latencies=[b - a for a, b in started],
    )


# -- the contenders ------------------------------------------------------------


class Member:
    """A group member on its own load thread; ``generation`` is what its last poll saw."""

    def __init__(self, url: str, group: str, topic: str) -> None:
        self.consumer = Consumer(url, group_id=group, enable_auto_commit=False, **MEMBER)  # type: ignore[arg-type]
        self.generation: int | None = None
        self.subscribed_at = time.perf_counter()
        self.consumer.subscribe([topic])
        self.load = CommitThread(self._commit, self._poll, f"member of {group}")

    def _poll(self, seconds: float) -> None:
        self.consumer.poll(max(1, round(seconds * 1000)))
        self.generation = self.consumer.generation_id

    def _commit(self, offset: int) -> None:
        owned = sorted(self.consumer.assignment())
        if not owned:
            raise RuntimeError("a loaded member owns no partition (a rebalance during the load?)")
        self.consumer.commit({tp: OffsetAndMetadata(offset) for tp in owned})

    def stop(self) -> None:
        try:
            self.load.stop()
        finally:
            self.consumer.close(autocommit=False)


class NaiveOffsets:
    """The naive offsets table: one ``write_deltalake`` append per commit, one at a time."""

    def __init__(self, table_uri: str) -> None:
        self.table_uri = table_uri
        self._lock = threading.Lock()
        self._write("created", 0)  # the table exists before anything is timed

    def _write(self, key: str, offset: int) -> None:
        row = pa.table({"key": [key], "offset": [offset]})
        write_deltalake(self.table_uri, row, mode="append")

    def commit(self, key: str, offset: int) -> None:
        with self._lock:
            self._write(key, offset)


def _wait(condition: Callable[[], bool], what: str) -> None:
    """Polls every 10 ms: the rebalance time is read off this loop, so it must poll often."""
    wait_for(condition, what, timeout_s=300, interval_s=0.01)


PACES: tuple[tuple[float | None, str], ...] = (
    (ONCE_A_SECOND, "1/s each"),
    (BACK_TO_BACK, "back to back"),
)


def _lakelog_commits(
    cfg: GroupsBenchConfig, server: ServerProcess, progress: Progress
) -> dict[float | None, CommitFigures]:
    url = server.url
    topic = "commits"
    with AdminClient(url) as admin:
        admin.create_topic(topic, cfg.consumers)
    progress(f"commits: {cfg.consumers} members joining")
    members = [Member(url, "bench-commits", topic) for _ in range(cfg.consumers)]
    figures = {}
    try:
        _wait(
            lambda: (
                all(m.consumer.assignment() for m in members)
                and len({m.generation for m in members}) == 1
            ),
            "every member to own a partition",
        )
        for interval, label in PACES:
            progress(f"commits: lakelog, {cfg.consumers} members {label}")
            figures[interval] = measure(
                [m.load for m in members], interval, cfg.warmup_seconds, cfg.commit_seconds
            )
    finally:
        for m in members:
            m.stop()
    return figures


def _naive_commits(
    cfg: GroupsBenchConfig, root: Path, progress: Progress
) -> dict[float | None, CommitFigures]:
    table = NaiveOffsets(str(root / "naive-offsets"))
    threads = [
        CommitThread(partial(table.commit, f"g\0commits\0{i}"), time.sleep, f"naive {i}")
        for i in range(cfg.consumers)
    ]
    figures = {}
    try:
        for interval, label in PACES:
            progress(f"commits: {NAIVE}, {cfg.consumers} threads {label}")
            figures[interval] = measure(threads, interval, cfg.warmup_seconds, cfg.commit_seconds)
    finally:
        for t in threads:
            t.stop()
    return figures


def bench_commits(
    cfg: GroupsBenchConfig, server: ServerProcess, root: Path, progress: Progress
) -> list[Result]:
    lake = _lakelog_commits(cfg, server, progress)
    naive = _naive_commits(cfg, root, progress)
    results = []
    for interval, label in PACES:
        ours, theirs = lake[interval], naive[interval]
        variant = f"{cfg.consumers} members, {label}"
        params = {
            "consumers": cfg.consumers,
            "interval_s": interval,
            "warmup_s": cfg.warmup_seconds,
            "seconds": cfg.commit_seconds,
            "commits": len(ours.latencies),
            "naive_commits": len(theirs.latencies),
        }
        for metric, unit, value, baseline, higher in (
            ("offered", "commits/s", ours.offered, theirs.offered, True),
            ("throughput", "commits/s", ours.achieved, theirs.achieved, True),
            ("p99 latency", "ms", ours.p99_ms, theirs.p99_ms, False),
        ):
            results.append(
                Result(
                    COMMITS,
                    variant,
                    metric,
                    value,
                    unit,
                    {NAIVE: baseline},
                    higher_is_better=higher,
                    params=params,
                )
            )
    return results


def join_time(url: str, group: str, topic: str, existing: list[Member]) -> tuple[float, Member]:
    """Seconds from a new member's subscribe until every member polled the new generation."""
    before = max((m.generation or 0) for m in existing) if existing else 0
    member = Member(url, group, topic)
    everyone = [*existing, member]
    _wait(
        lambda: (
            all(m.generation is not None and m.generation > before for m in everyone)
            and len({m.generation for m in everyone}) == 1
        ),
        "the rebalance to complete",
    )
    return time.perf_counter() - member.subscribed_at, member


def bench_rebalance(
    cfg: GroupsBenchConfig, server: ServerProcess, progress: Progress
) -> list[Result]:
    url = server.url
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
        server = start_broker(root, scratch, BROKER_SETTINGS)
        try:
            report.results += bench_commits(cfg, server, scratch, progress)
            report.results += bench_rebalance(cfg, server, progress)
        finally:
            server.stop()
    report.notes += commit_notes(report, cfg)
    return report


def commit_notes(report: Report, cfg: GroupsBenchConfig) -> list[str]:
    """Offered against completed for each contender, and what the columns mean."""
    notes = []
    for _, label in PACES:
        variant = f"{cfg.consumers} members, {label}"
        offered = report.find(COMMITS, variant, "offered")
        done = report.find(COMMITS, variant, "throughput")
        if offered is None or done is None:
            continue
        notes.append(
            f"commits {label}: lakelog completed {done.value:.1f} of {offered.value:.1f} "
            f"offered commits/s; {NAIVE} {done.baselines[NAIVE]:.1f} of "
            f"{offered.baselines[NAIVE]:.1f} (ratio {_x(done.ratio(NAIVE))})"
        )
    notes.append(
        f"offset commits: one load generator drives both contenders, {cfg.consumers} threads "
        "either committing once a second each (first commits spread over the second) or back "
        "to back; 'offered' = commits the generator started per second in the measured "
        "window, 'throughput' = commits completed in it. lakelog = group members committing "
        f"over HTTP to the broker; '{NAIVE}' = one write_deltalake append per commit, "
        "serialized, in-process (no HTTP)."
    )
    return notes


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"
