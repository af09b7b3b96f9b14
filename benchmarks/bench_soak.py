"""Soak: brokers, producers and consumers for minutes with retention and compaction running.

Two brokers share a local root. Idempotent producers (``lakelog.client``)
write a compacted topic and a topic with a short retention; consumers follow
both from the start and record every (partition, offset, value) they see.
Meanwhile ``lakelog maintain`` (retention, compaction, merge, vacuum: the
Spark jobs, as a subprocess, as cron would run them) runs again and again.
The brokers' resident memory is sampled every second.

Reported: produce and consume throughput, each broker's RSS at start and end
and its slope after a warm-up (MiB per minute; no growth means about 0), the
number of maintenance runs, and losses: acknowledged records the consumers
never saw at their acknowledged offset (must be 0). A PNG of memory over time
is written next to the JSON results when matplotlib is installed.

Duration: ``--size tiny`` 0.4 min, ``small`` 3, ``large`` 15; ``--minutes N``
(``LAKELOG_BENCH_MINUTES``) overrides it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import Progress, Report, Result, config_for
from benchmarks.servers import project_env, start_broker
from lakelog.client import AdminClient, Consumer, Producer, RecordMetadata, TopicPartition
from lakelog.testing.brokers import ServerProcess

NAME = "soak"
DESCRIPTION = "minutes of produce + consume with retention and compaction; memory trend, loss"

MINUTES = {"tiny": 0.4, "small": 3.0, "large": 15.0}
PARTITIONS = 2
TOPICS = {
    "soak-compacted": {
        "cleanup.policy": "compact",
        "min.compaction.lag.ms": "0",
        "segment.ms": "2000",
    },
    "soak-retained": {"retention.ms": "20000"},
}
VALUE_BYTES = 200


def minutes_for(size: str) -> float:
    override = os.environ.get("LAKELOG_BENCH_MINUTES")
    return float(override) if override else config_for(MINUTES, size)


@dataclass
class Ledger:
    """Acknowledged and consumed records of one topic (thread-safe enough: GIL-atomic ops)."""

    acked: dict[tuple[int, int], bytes] = field(default_factory=dict)
    seen: dict[tuple[int, int], bytes] = field(default_factory=dict)
    failed: int = 0

    def lost(self) -> int:
        return sum(1 for at, value in self.acked.items() if self.seen.get(at) != value)


def rss_bytes(pid: int) -> int | None:
    """Resident set size from /proc (None once the process is gone)."""
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def slope_mib_per_min(samples: Sequence[tuple[float, int]]) -> float:
    """Least-squares slope of RSS over time, in MiB per minute."""
    if len(samples) < 2:
        return 0.0
    ts = [t / 60 for t, _ in samples]
    ys = [r / (1 << 20) for _, r in samples]
    mt, my = sum(ts) / len(ts), sum(ys) / len(ys)
    var = sum((t - mt) ** 2 for t in ts)
    return 0.0 if var == 0 else sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / var


class Soak:
    def __init__(self, root: Path, workdir: Path, minutes: float, progress: Progress) -> None:
        self.root = root
        self.workdir = workdir
        self.seconds = minutes * 60
        self.progress = progress
        self.stop = threading.Event()
        self.ledgers = {t: Ledger() for t in TOPICS}
        self.memory: dict[str, list[tuple[float, int]]] = {}
        self.maintenance_runs = 0
        self.maintenance_failures = 0
        self.consumed = 0
        self.started = time.monotonic()

    def start_brokers(self) -> list[ServerProcess]:
        settings = {"linger_ms": 5, "heartbeat_interval_ms": 500}
        return [start_broker(self.root, self.workdir, settings, f"broker{i}") for i in range(2)]

    def produce(self, urls: list[str], topic: str) -> None:
        ledger = self.ledgers[topic]
        with Producer(urls, linger_ms=5, delivery_timeout_ms=60_000) as producer:
            n = 0
            pending: list[Future[RecordMetadata]] = []
            while not self.stop.is_set():
                value = f"{topic}-{n}-".encode().ljust(VALUE_BYTES, b"x")
                future = producer.send(topic, value, key=f"k{n % 500}".encode())
                future.add_done_callback(self._on_ack(ledger, value))
                pending.append(future)
                n += 1
                if len(pending) >= 2_000:
                    pending[0].result(timeout=60)
                    pending = [f for f in pending if not f.done()]
            producer.flush(timeout=120)

    @staticmethod
    def _on_ack(ledger: Ledger, value: bytes) -> Callable[[Future[RecordMetadata]], None]:
        def settled(future: Future[RecordMetadata]) -> None:
            if future.exception() is not None:
                ledger.failed += 1
                return
            meta = future.result()
            ledger.acked[(meta.partition, meta.offset)] = value

        return settled

    def consume(self, urls: list[str], topic: str, done: threading.Event) -> None:
        ledger = self.ledgers[topic]
        with Consumer(urls, auto_offset_reset="earliest") as consumer:
            consumer.assign(TopicPartition(topic, p) for p in range(PARTITIONS))
            idle = 0
            while not done.is_set() or idle < 3:
                got = consumer.poll(500)
                idle = 0 if got else idle + 1
                for tp, records in got.items():
                    for r in records:
                        ledger.seen[(tp.partition, r.offset)] = r.value or b""
                        self.consumed += 1

    def maintain(self) -> None:
        """``lakelog maintain`` again and again, as a scheduler would (each run is a Spark job).

        The run still going when the soak ends is terminated (a killed job is
        one more fault the log must take) and counted as neither done nor failed.
        """
        command = [sys.executable, "-m", "lakelog.cli", "maintain", "--root", str(self.root)]
        env = project_env()
        while not self.stop.is_set():
            log_path = self.workdir / f"maintain-{self.maintenance_runs}.log"
            with log_path.open("wb") as out:
                job = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
            while job.poll() is None:
                if self.stop.wait(0.5):
                    job.terminate()
                    job.wait(timeout=60)
                    return
            self.maintenance_runs += 1
            if job.returncode != 0:
                self.maintenance_failures += 1
                self.progress(f"maintain failed: {log_path.read_text(errors='replace')[-500:]}")

    def sample(self, brokers: list[ServerProcess]) -> None:
        while not self.stop.wait(1.0):
            now = time.monotonic() - self.started
            for b in brokers:
                rss = rss_bytes(b.process.pid)
                if rss is not None:
                    self.memory.setdefault(b.name, []).append((now, rss))


def run(size: str, workdir: Path, progress: Progress) -> Report:
    minutes = minutes_for(size)
    root = workdir / "root"
    soak = Soak(root, workdir, minutes, progress)
    brokers = soak.start_brokers()
    urls = [b.url for b in brokers]
    report = Report(NAME)
    try:
        with AdminClient(urls) as admin:
            for topic, configs in TOPICS.items():
                admin.create_topic(topic, PARTITIONS, configs)
        consumers_done = threading.Event()
        threads = [threading.Thread(target=soak.sample, args=(brokers,), daemon=True)]
        threads += [
            threading.Thread(target=soak.produce, args=(urls, t), daemon=True) for t in TOPICS
        ]
        consumers = [
            threading.Thread(target=soak.consume, args=(urls, t, consumers_done), daemon=True)
            for t in TOPICS
        ]
        maintainer = threading.Thread(target=soak.maintain, daemon=True)
        soak.started = time.monotonic()
        for t in [*threads, *consumers, maintainer]:
            t.start()
        while time.monotonic() - soak.started < soak.seconds:
            time.sleep(min(10.0, soak.seconds))
            progress(
                f"{time.monotonic() - soak.started:.0f} s: acked "
                f"{sum(len(x.acked) for x in soak.ledgers.values())}, consumed {soak.consumed}, "
                f"maintenance runs {soak.maintenance_runs}"
            )
        soak.stop.set()
        for t in threads:
            t.join(timeout=180)
        elapsed = time.monotonic() - soak.started  # producers flushed: the measured window
        consumers_done.set()
        for t in consumers:
            t.join(timeout=180)
        maintainer.join(timeout=120)
    finally:
        soak.stop.set()
        for b in brokers:
            b.stop()
    acked = sum(len(x.acked) for x in soak.ledgers.values())
    lost = sum(x.lost() for x in soak.ledgers.values())
    params = {"minutes": minutes, "brokers": len(brokers), "value_bytes": VALUE_BYTES}

    def add(metric: str, value: float, unit: str, higher: bool = True) -> None:
        report.add(
            Result(NAME, "2 brokers", metric, value, unit, higher_is_better=higher, params=params)
        )

    add("produce", acked / elapsed, "records/s")
    add("consume", soak.consumed / elapsed, "records/s")
    add("acknowledged", acked, "records")
    add("lost", lost, "records", higher=False)
    add("failed sends", sum(x.failed for x in soak.ledgers.values()), "records", higher=False)
    add("maintenance runs", soak.maintenance_runs, "runs")
    add("maintenance failures", soak.maintenance_failures, "runs", higher=False)
    for name, samples in sorted(soak.memory.items()):
        warm = samples[len(samples) // 5 :]
        add(f"{name} rss start", samples[0][1] / (1 << 20), "MiB", higher=False)
        add(f"{name} rss end", samples[-1][1] / (1 << 20), "MiB", higher=False)
        add(f"{name} rss slope", slope_mib_per_min(warm), "MiB/min", higher=False)
    report.notes.append(f"zero loss: {'yes' if lost == 0 else f'NO, {lost} lost'}")
    chart = draw_memory(soak.memory, workdir.parent / "soak-memory.png")
    if chart is not None:
        report.notes.append(f"memory over time: {chart}")
    return report


def draw_memory(memory: dict[str, list[tuple[float, int]]], path: Path) -> Path | None:
    """RSS over time per broker as a PNG; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, samples in sorted(memory.items()):
        ax.plot([t for t, _ in samples], [r / (1 << 20) for _, r in samples], label=name)
    ax.set_xlabel("seconds")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title("broker memory during the soak")
    ax.legend()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
