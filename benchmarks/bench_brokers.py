"""Several brokers on one storage root: does a hot topic's produce capacity grow with brokers?

Brokers share a root without a coordinator; each commit to a topic is a
put-if-absent of the next ``_delta_log`` version, so brokers appending to one
topic race for versions and the losers commit again. This suite measures that,
with 1, 2 and 3 broker processes in the same run, in two regimes:

* **commit-bound**: 10-record requests from many clients, on an S3-protocol
  root (moto's standalone server) reached through a proxy that adds a fixed
  delay to every store request (:mod:`lakelog.testing.proxy`), as a distant
  store would. Commits, not CPU, limit throughput here.
* **CPU-bound**: 1,000-record requests on a local root: encoding and decoding
  limit throughput here.

In each regime and broker count the same load runs twice: every broker
appending to **one hot topic** (the figure), and each broker to **its own
topic** (the baseline: what the commit path does without races). In the
commit-bound regime every broker brings its own clients (the offered load
grows with the brokers; the question is whether the topic's capacity does);
in the CPU-bound one the same clients are spread over the brokers (the
machine is the limit). One client process per broker. Each broker count is a
cluster of its own: brokers are started for the run and stopped after it, so
a topic's commit leader is always a broker under load.

Per run: records/s and commits/s of the topic(s), lost commit races per
commit, produce latency p50/p99; per regime, the 3-broker / 1-broker ratios,
printed next to the targets a hot topic should reach (not asserted). After
every run the topics are read back from the root (no broker involved) and every
acknowledged record must be there once, at its acknowledged offset, with dense
offsets and nothing else stored.

Commits and lost races come from the brokers' per-topic counters
``lakelog_topic_commits_total`` / ``lakelog_topic_commit_races_lost_total``
when ``/metrics`` has them. Otherwise commits are the per-topic count of the
``lakelog_commit_seconds`` histogram (one sample per group commit), and lost
races on S3 are counted on the wire: commit PUTs the store refused because
the version existed (412 Precondition Failed, or 409), as the proxy saw them.
On a local root without the counters they are not measured.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing
import os
import re
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import psutil
import pyarrow as pa

from benchmarks.broker_admin import create_topic, metric_families, parse_metrics
from benchmarks.broker_load import (
    LoadResult,
    ProduceLoad,
    body_values,
    call,
    ready,
    run_produce,
)
from benchmarks.broker_load import target_of as load_target
from benchmarks.common import (
    Progress,
    Report,
    Result,
    config_for,
    load_note,
    machine_busy_seconds,
    percentile,
    ratio,
    settle_disk,
)
from benchmarks.servers import start_broker
from lakelog.catalog import Catalog
from lakelog.storage import S3Settings
from lakelog.testing.brokers import LOOPBACK, ServerProcess, wait_for
from lakelog.testing.proxy import TcpProxy
from lakelog.testing.s3 import MotoServer, start_moto
from server.commit_leader.router import choose_commit_leader

NAME = "brokers"
DESCRIPTION = (
    "1-3 brokers on one root: one hot topic vs one topic per broker, commit-bound "
    "(S3 with store latency) and CPU-bound (local); commits/s, lost races, latency"
)

HOT = "hot topic"
OWN = "one topic per broker"
SCALING = "3 brokers / 1 broker"

RECORDS = "records/s"
COMMITS = "commits/s"
RACES = "lost races per commit"
P50 = "p50"
P99 = "p99"
METRICS = (RECORDS, COMMITS, RACES, P50, P99)

#: Per-topic counters brokers may expose; the fallbacks are described in the module docstring.
TOPIC_COMMITS = "lakelog_topic_commits_total"
TOPIC_RACES = "lakelog_topic_commit_races_lost_total"
COMMIT_HISTOGRAM = "lakelog_commit_seconds_count"
#: Segments a commit had to write again because their predicted offsets were taken.
RENUMBERED = "lakelog_topic_renumbered_segments_total"

Params = dict[str, str | int | float | bool | None]


# -- configuration -----------------------------------------------------------


@dataclass(frozen=True)
class Regime:
    """What limits a hot topic: the store's round trips (S3) or CPU (local, big requests)."""

    key: str  # "commit-bound" or "cpu-bound"
    s3: bool
    records: int  # per request
    connections: int  # clients in total, spread over the brokers (or per broker, see below)
    #: Each broker brings ``connections`` clients of its own: the offered load grows with
    #: the brokers and the question is whether the topic's capacity does. Otherwise the
    #: same clients are spread over more brokers (the machine, not the load, is the limit).
    clients_per_broker: bool = False
    store_delay_ms: float = 0.0  # added to each store request (S3 only)
    #: targets: 3-broker / 1-broker hot-topic records/s at least, p99 at most, races at most
    min_scaling: float = 1.0
    max_p99_ratio: float | None = None
    max_races: float | None = None

    @property
    def title(self) -> str:
        where = (
            f"S3 (moto) +{self.store_delay_ms:g} ms per store request" if self.s3 else "local root"
        )
        clients = f"{self.connections} clients" + (" per broker" if self.clients_per_broker else "")
        return f"{self.key}: {self.records:,} records/request, {clients}, {where}"

    def clients(self, brokers: int) -> list[int]:
        """Clients per broker in a run with ``brokers`` brokers."""
        if self.clients_per_broker:
            return [self.connections] * brokers
        return spread(self.connections, brokers)


COMMIT_BOUND = Regime(
    "commit-bound",
    True,
    10,
    48,
    clients_per_broker=True,
    store_delay_ms=50.0,
    min_scaling=2.5,
    max_races=0.05,
)
CPU_BOUND = Regime("cpu-bound", False, 1_000, 12, min_scaling=1.0, max_p99_ratio=1.2)


@dataclass(frozen=True)
class BrokersBenchConfig:
    regimes: tuple[Regime, ...] = (COMMIT_BOUND, CPU_BOUND)
    broker_counts: tuple[int, ...] = (1, 2, 3)
    partitions: int = 6
    value_bytes: int = 100
    linger_ms: int = 5
    warmup_s: float = 1.0
    duration_s: float = 4.0
    distinct_bodies: int = 8
    seed: int = 0


CONFIGS: dict[str, BrokersBenchConfig] = {
    "tiny": BrokersBenchConfig(
        regimes=(
            Regime(
                "commit-bound",
                True,
                10,
                6,
                clients_per_broker=True,
                store_delay_ms=50.0,
                min_scaling=2.5,
            ),
            Regime("cpu-bound", False, 200, 3, max_p99_ratio=1.2),
        ),
        broker_counts=(1, 2),
        warmup_s=1.0,
        duration_s=1.0,
        distinct_bodies=2,
    ),
    "small": BrokersBenchConfig(warmup_s=2.0, duration_s=8.0),
    "large": BrokersBenchConfig(warmup_s=3.0, duration_s=20.0),
}


# -- the store ---------------------------------------------------------------


@dataclass
class Store:
    """A regime's root: its URL, what brokers and the read-back need to reach it."""

    url: str
    broker_env: dict[str, str] = field(default_factory=dict)
    broker_settings: dict[str, object] = field(default_factory=dict)
    read_settings: S3Settings | None = None
    proxy: TcpProxy | None = None
    #: The S3-protocol server's process: its CPU is part of the machine's load.
    store_pid: int | None = None


@contextlib.contextmanager
def open_store(regime: Regime, workdir: Path) -> Iterator[Store]:
    """A fresh local root, or a bucket of a new moto server behind a delaying proxy."""
    if not regime.s3:
        root = workdir / f"root-{regime.key}"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        yield Store(str(root))
        return
    moto: MotoServer = start_moto(workdir)
    proxy = TcpProxy(LOOPBACK, moto.port)
    proxy.request_delay_s = regime.store_delay_ms / 1000
    proxy.start()
    try:
        bucket = moto.create_bucket()
        yield Store(
            f"s3://{bucket}/lakelog",
            broker_env=moto.settings(proxy.url).aws_variables(),
            broker_settings={"s3_endpoint_url": proxy.url},
            read_settings=moto.settings(),
            proxy=proxy,
            store_pid=moto.process.pid,
        )
    finally:
        proxy.stop()
        moto.stop()


def commit_put(topic: str) -> bytes:
    """The request line of a commit (a ``_delta_log`` version PUT) of ``topic``."""
    # A topic's table lives at topics/<name>/<table id>/ (the id tells apart a topic
    # deleted and created again under the same name).
    name = re.escape(topic.encode())
    return rb"^PUT \S*/topics/" + name + rb"/(?:[^/ ]+/)?_delta_log/\d+\.json[ ?]"


# -- counters ----------------------------------------------------------------


def topic_counter(metrics: Mapping[str, float], name: str, topic: str) -> float:
    """The samples of ``name`` labelled ``topic``, summed (0 if there is none)."""
    label = f'topic="{topic}"'
    return sum(
        value
        for key, value in metrics.items()
        if (key == name or key.startswith(name + "{")) and label in key
    )


def total_counter(
    before: Snapshot, after: Snapshot, name: str, topics: Sequence[str]
) -> float | None:
    """How much ``name`` grew over the window, summed over brokers and topics (None if absent)."""
    if not exposes(after, name):
        return None
    return sum(
        topic_counter(a, name, topic) - topic_counter(b, name, topic)
        for b, a in zip(before.metrics, after.metrics, strict=True)
        for topic in dict.fromkeys(topics)
    )


def exposes(snap: Snapshot, name: str) -> bool:
    """Whether any broker declares the family of sample ``name`` (or has a sample of it)."""
    family = name.removesuffix("_total").removesuffix("_count")
    return family in snap.families or any(
        key == name or key.startswith(name + "{") for m in snap.metrics for key in m
    )


#: Store requests counted on the wire, by kind (request-line patterns the proxy matches).
STORE_REQUESTS: dict[str, bytes] = {
    "PUT": rb"^PUT ",
    "GET": rb"^GET (?!\S*[?&]list-type=)",
    "LIST": rb"^GET \S*[?&]list-type=",
    "HEAD": rb"^HEAD ",
    "POST": rb"^POST ",
    "DELETE": rb"^DELETE ",
}

#: How an S3-protocol store refuses a conditional PUT of an object that exists.
REFUSED = (409, 412)


@dataclass(frozen=True)
class Snapshot:
    """What the brokers and the proxy had counted at one moment.

    ``refused``: per commit-PUT pattern the proxy counts, the PUTs the store
    refused (a version another writer took first).
    """

    metrics: tuple[dict[str, float], ...]
    refused: dict[bytes, int]
    at: float
    #: Metric families any broker declares (see ``broker_admin.metric_families``).
    families: frozenset[str] = frozenset()
    #: Store requests the proxy forwarded so far, per kind of ``STORE_REQUESTS``.
    requests: dict[str, int] = field(default_factory=dict)


def snapshot(brokers: Sequence[ServerProcess], proxy: TcpProxy | None) -> Snapshot:
    texts = [call(load_target(b), "GET", "/metrics").decode() for b in brokers]
    metrics = tuple(parse_metrics(t) for t in texts)
    families = frozenset(f for t in texts for f in metric_families(t))
    refused: dict[bytes, int] = {}
    requests: dict[str, int] = {}
    if proxy is not None:
        answers = dict(proxy.answers)
        counts = dict(proxy.counts)
        for pattern in counts:
            refused[pattern] = sum(answers.get((pattern, status), 0) for status in REFUSED)
        requests = {kind: counts.get(p, 0) for kind, p in STORE_REQUESTS.items()}
    return Snapshot(metrics, refused, time.monotonic(), families, requests)


@dataclass(frozen=True)
class Commits:
    """Commits and lost races of some topics over a window, and where the figures came from."""

    commits: float
    lost_races: float
    commits_source: str
    races_source: str


def count_commits(before: Snapshot, after: Snapshot, topics: Sequence[str]) -> Commits:
    def total(name: str) -> float | None:
        """Summed over brokers and topics; None if no broker exposes ``name``."""
        if not exposes(after, name):
            return None
        return sum(
            topic_counter(a, name, topic) - topic_counter(b, name, topic)
            for b, a in zip(before.metrics, after.metrics, strict=True)
            for topic in topics
        )

    commits = total(TOPIC_COMMITS)
    commits_source = TOPIC_COMMITS
    if commits is None:
        commits = total(COMMIT_HISTOGRAM) or 0.0
        commits_source = f"{COMMIT_HISTOGRAM} (one sample per group commit)"
    races = total(TOPIC_RACES)
    races_source = TOPIC_RACES
    if races is None:
        patterns = [commit_put(t) for t in topics]
        if all(p in after.refused for p in patterns):
            races = float(sum(after.refused[p] - before.refused.get(p, 0) for p in patterns))
            races_source = "commit PUTs the store refused (412/409), seen by the store proxy"
        else:
            races = math.nan
            races_source = "not measured (no per-topic race counter in /metrics, no proxy)"
    return Commits(commits, races, commits_source, races_source)


# -- read-back ---------------------------------------------------------------


Acknowledged = tuple[int, int, int, int]  # (body, partition, first offset, records)


def read_partitions(store: Store, topic: str) -> dict[int, pa.Table]:
    """Every stored (offset, value) of ``topic``, per partition, straight from the root."""
    catalog = Catalog(store.url, s3=store.read_settings)
    try:
        log = catalog.topic(topic)
        log.refresh()
        out = {}
        for partition in range(log.num_partitions):
            offset = log.log_start_offset(partition)
            hwm = log.high_watermark(partition)
            parts = []
            while offset < hwm:
                batch = log.read(partition, offset, max_records=50_000, max_bytes=64 << 20)
                parts.append(batch.records.select(["offset", "value"]))
                offset = batch.next_offset
            out[partition] = (
                pa.concat_tables(parts)
                if parts
                else pa.table(
                    {"offset": pa.array([], pa.int64()), "value": pa.array([], pa.binary())}
                )
            )
        return out
    finally:
        catalog.close()


def verify_topic(
    topic: str,
    stored: Mapping[int, pa.Table],
    acknowledged: Sequence[Acknowledged],
    values: Sequence[pa.Array],
) -> int:
    """Every acknowledged record is stored once at its offset, offsets are dense, nothing else.

    ``values[body]`` is what request body ``body`` sent. Returns the records
    checked; raises RuntimeError naming the first problem.
    """
    by_partition: dict[int, list[Acknowledged]] = {}
    for ack in acknowledged:
        by_partition.setdefault(ack[1], []).append(ack)
    for partition in set(stored) | set(by_partition):
        table = stored.get(partition)
        if table is None:
            raise RuntimeError(f"{topic}: partition {partition} was acknowledged but is not stored")
        offsets = table.column("offset").to_numpy()
        if len(offsets) and (offsets[0] != 0 or (offsets[1:] - offsets[:-1] != 1).any()):
            raise RuntimeError(f"{topic}[{partition}]: stored offsets are not dense from 0")
        cursor = 0
        column = table.column("value")
        for body, _, first, count in sorted(by_partition.get(partition, []), key=lambda a: a[2]):
            if first != cursor:
                what = "acknowledged twice" if first < cursor else "stored but not acknowledged"
                raise RuntimeError(f"{topic}[{partition}]: offsets {min(first, cursor)}.. {what}")
            if not column.slice(first, count).equals(pa.chunked_array([values[body]])):
                raise RuntimeError(f"{topic}[{partition}]: offsets {first}.. hold other values")
            cursor += count
        if cursor != len(offsets):
            raise RuntimeError(
                f"{topic}[{partition}]: {len(offsets) - cursor} records stored after the last "
                "acknowledged one"
            )
    return sum(a[3] for a in acknowledged)


def process_cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds a process has used so far (None without a pid or once it is gone)."""
    if pid is None:
        return None
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(times.user + times.system)


# -- one run -----------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """What one load (one layout, some brokers) measured."""

    records_per_s: float
    commits_per_s: float
    races_per_commit: float
    p50_ms: float
    p99_ms: float
    params: Params


def broker_name(index: int) -> str:
    return f"broker{index}"


def own_topics(n: int) -> list[str]:
    """One topic per broker, each led by the broker that produces to it.

    The baseline is a topic's commit path without sharing: a broker handing its
    own topic to another broker would measure the handoff instead.
    """
    ids = [broker_name(i) for i in range(n)]
    names = []
    for i in range(n):
        name = next(
            candidate
            for k in itertools.count()
            if choose_commit_leader(candidate := f"own-{n}-{i}-{k}", ids) == ids[i]
        )
        names.append(name)
    return names


def wait_for_cluster(brokers: Sequence[ServerProcess], timeout_s: float = 60.0) -> None:
    """Until every broker's registry view (``lakelog_live_brokers``) holds all of them."""

    def live(broker: ServerProcess) -> float:
        text = httpx.get(f"{broker.url}/metrics", timeout=10).text
        return parse_metrics(text).get("lakelog_live_brokers", 0.0)

    wait_for(
        lambda: all(live(b) == len(brokers) for b in brokers),
        f"all {len(brokers)} brokers to see each other",
        timeout_s,
    )


def spread(total: int, parts: int) -> list[int]:
    """``total`` clients over ``parts`` brokers, as evenly as possible, at least one each."""
    return [max(1, total // parts + (1 if i < total % parts else 0)) for i in range(parts)]


def measure(
    cfg: BrokersBenchConfig,
    regime: Regime,
    store: Store,
    brokers: Sequence[ServerProcess],
    topics: Sequence[str],
    pool: ProcessPoolExecutor,
) -> Run:
    """Load ``brokers`` (broker i appends to ``topics[i]``), count, then read every topic back."""
    for topic in dict.fromkeys(topics):
        create_topic(brokers[0], topic, cfg.partitions)
        if store.proxy is not None:
            store.proxy.count_requests(commit_put(topic))
    if store.proxy is not None:
        for pattern in STORE_REQUESTS.values():
            if pattern not in store.proxy.counts:
                store.proxy.count_requests(pattern)
    start_at = time.monotonic() + 1.0
    loads = [
        ProduceLoad(
            target=load_target(broker),
            path=f"/v1/topics/{topic}/records?acks=all",
            fmt="json",
            records=regime.records,
            partitions=cfg.partitions,
            value_bytes=cfg.value_bytes,
            connections=connections,
            distinct_bodies=cfg.distinct_bodies,
            seed=cfg.seed + i,
            start_at=start_at,
            warmup_s=cfg.warmup_s,
            duration_s=cfg.duration_s,
            keep_offsets=True,
        )
        for i, (broker, topic, connections) in enumerate(
            zip(brokers, topics, regime.clients(len(brokers)), strict=True)
        )
    ]
    settle_disk()
    futures = [pool.submit(run_produce, load) for load in loads]
    begin = start_at + cfg.warmup_s
    time.sleep(max(begin - time.monotonic(), 0.0))
    before = snapshot(brokers, store.proxy)
    busy_before = machine_busy_seconds()
    store_before = process_cpu_seconds(store.store_pid)
    time.sleep(max(begin + cfg.duration_s - time.monotonic(), 0.0))
    after = snapshot(brokers, store.proxy)
    busy_after = machine_busy_seconds()
    store_after = process_cpu_seconds(store.store_pid)
    results = [f.result() for f in futures]
    for load, got in zip(loads, results, strict=True):
        if got.errors:
            raise RuntimeError(f"{load.path}: {len(got.errors)} failed requests: {got.errors[0]}")
    total = LoadResult(seconds=cfg.duration_s)
    for got in results:
        total.merge(got)
    window = after.at - before.at
    ids = [broker_name(i) for i in range(len(brokers))]
    leader = ids.index(choose_commit_leader(topics[0], ids))
    counted = count_commits(before, after, list(dict.fromkeys(topics)))
    checked = 0
    values = [v for load in loads for v in body_values(load)]
    for topic in dict.fromkeys(topics):
        acks = [
            (i * cfg.distinct_bodies + body, partition, first, count)
            for i, (load, got) in enumerate(zip(loads, results, strict=True))
            if load.path == f"/v1/topics/{topic}/records?acks=all"
            for body, partition, first, count in got.acknowledged
        ]
        checked += verify_topic(topic, read_partitions(store, topic), acks, values)
    records_per_s = total.records / cfg.duration_s
    busy = (
        (busy_after - busy_before) / window
        if busy_before is not None and busy_after is not None and window > 0
        else math.nan
    )
    params: Params = {
        "brokers": len(brokers),
        "topics": len(set(topics)),
        "records_per_request": regime.records,
        "clients": sum(regime.clients(len(brokers))),
        "partitions": cfg.partitions,
        "store_delay_ms": regime.store_delay_ms,
        "seconds": cfg.duration_s,
        "commits": counted.commits,
        "lost_races": counted.lost_races,
        "records_per_commit": total.records / counted.commits if counted.commits else math.nan,
        "commits_source": counted.commits_source,
        "races_source": counted.races_source,
        "broker_cores": sum(r.server_cores for r in results),
        "client_cores": sum(r.client_cores for r in results),
        "machine_busy_cores": busy,
        "records_verified": checked,
        "store_requests_per_commit": (
            ", ".join(
                f"{kind} {(n - before.requests.get(kind, 0)) / counted.commits:.2f}"
                for kind, n in after.requests.items()
            )
            if after.requests and counted.commits
            else None
        ),
        "store_cores": (
            (store_after - store_before) / window
            if store_before is not None and store_after is not None and window > 0
            else None
        ),
        "renumbered_segments": total_counter(before, after, RENUMBERED, topics),
        "p50_by_broker": ", ".join(
            f"{broker_name(i)}"
            f"{' (leader)' if len(set(topics)) == 1 and len(brokers) > 1 and i == leader else ''}"
            f" {percentile(got.latencies_ms, 50):.0f} ms"
            for i, got in enumerate(results)
            if got.latencies_ms
        ),
    }
    lat = total.latencies_ms
    return Run(
        records_per_s,
        counted.commits / window if window > 0 else math.nan,
        counted.lost_races / counted.commits if counted.commits else math.nan,
        percentile(lat, 50) if lat else math.nan,
        percentile(lat, 99) if lat else math.nan,
        {
            k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in params.items()
        },
    )


def figures(regime: Regime, hot: dict[int, Run], own: dict[int, Run]) -> list[Result]:
    """Per broker count: each metric of the hot topic, with one topic per broker as baseline."""
    results = []
    for n, run in hot.items():
        base = own[n]
        for metric, unit, value, baseline, higher in (
            (RECORDS, "records/s", run.records_per_s, base.records_per_s, True),
            (COMMITS, "commits/s", run.commits_per_s, base.commits_per_s, True),
            (RACES, "races/commit", run.races_per_commit, base.races_per_commit, False),
            (P50, "ms", run.p50_ms, base.p50_ms, False),
            (P99, "ms", run.p99_ms, base.p99_ms, False),
        ):
            results.append(
                Result(
                    f"{regime.title}",
                    f"{n} broker{'s' if n > 1 else ''}",
                    metric,
                    value,
                    unit,
                    {OWN: baseline},
                    higher_is_better=higher,
                    params={**run.params, "regime": regime.key},
                )
            )
    low, high = min(hot), max(hot)
    for metric, attribute, higher in (
        (f"{RECORDS} ratio", "records_per_s", True),
        (f"{COMMITS} ratio", "commits_per_s", True),
        (f"{P99} ratio", "p99_ms", False),
    ):
        grown = ratio(getattr(hot[high], attribute), getattr(hot[low], attribute))
        own_grown = ratio(getattr(own[high], attribute), getattr(own[low], attribute))
        results.append(
            Result(
                f"{regime.title}",
                f"{high} brokers / {low} broker",
                metric,
                math.nan if grown is None else grown,
                "x",
                {OWN: math.nan if own_grown is None else own_grown},
                higher_is_better=higher,
                params={"regime": regime.key, "brokers": high, "versus_brokers": low},
            )
        )
    return results


def target_note(regime: Regime, hot: dict[int, Run]) -> str:
    """The regime's targets next to what the hot topic did (printed, never asserted)."""
    low, high = min(hot), max(hot)
    scaling = ratio(hot[high].records_per_s, hot[low].records_per_s)
    parts = [
        f"target {regime.key}: hot-topic records/s {high}/{low} brokers "
        f"{'-' if scaling is None else f'{scaling:.2f}x'} (target >= {regime.min_scaling:g}x: "
        f"{'met' if scaling is not None and scaling >= regime.min_scaling else 'NOT met'})"
    ]
    if regime.max_p99_ratio is not None:
        p99 = ratio(hot[high].p99_ms, hot[low].p99_ms)
        met = p99 is not None and p99 <= regime.max_p99_ratio
        parts.append(
            f"p99 {high}/{low} brokers {'-' if p99 is None else f'{p99:.2f}x'} "
            f"(target <= {regime.max_p99_ratio:g}x: {'met' if met else 'NOT met'})"
        )
    if regime.max_races is not None:
        races = max((r.races_per_commit for r in hot.values()), default=math.nan)
        met = math.isfinite(races) and races <= regime.max_races
        parts.append(
            f"lost races per commit, worst {races:.2f} (target <= {regime.max_races:g}: "
            f"{'met' if met else 'NOT met'})"
        )
    return "; ".join(parts)


def run_regime(
    cfg: BrokersBenchConfig,
    regime: Regime,
    workdir: Path,
    pool: ProcessPoolExecutor,
    progress: Progress,
) -> tuple[list[Result], list[str]]:
    hot: dict[int, Run] = {}
    own: dict[int, Run] = {}
    notes = []
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(open_store(regime, workdir))
        brokers: list[ServerProcess] = []

        @stack.callback
        def stop_brokers() -> None:
            for broker in brokers:
                broker.stop()

        for n in cfg.broker_counts:
            # A cluster of n brokers: brokers of other runs are stopped (their registry
            # entries go with them), so a topic's commit leader is one of these n.
            for broker in brokers:
                broker.stop()
            brokers.clear()
            progress(f"{regime.key}: starting {n} broker(s) on {store.url}")
            for i in range(n):
                brokers.append(
                    start_broker(
                        store.url,
                        workdir,
                        {
                            "broker_id": broker_name(i),
                            "linger_ms": cfg.linger_ms,
                            "heartbeat_interval_ms": 500,
                            **store.broker_settings,
                        },
                        name=broker_name(i),
                        env=store.broker_env,
                    )
                )
            wait_for_cluster(brokers)
            progress(f"{regime.key}: {n} broker(s), {HOT}")
            hot[n] = measure(cfg, regime, store, brokers, [f"hot-{n}"] * n, pool)
            progress(f"{regime.key}: {n} broker(s), {OWN}")
            own[n] = measure(cfg, regime, store, brokers, own_topics(n), pool)
    for runs, layout in ((hot, HOT), (own, OWN)):
        for n, run in runs.items():
            notes.append(
                f"{regime.key}, {n} broker(s), {layout}: {run.params['commits']:.0f} commits "
                f"({run.params['records_per_commit'] or 0:,.0f} records each), "
                f"{run.params['lost_races'] if run.params['lost_races'] is not None else 'unknown'}"
                " lost races; brokers "
                f"{run.params['broker_cores'] or 0:.2f} cores, machine busy "
                f"{run.params['machine_busy_cores'] or 0:.2f} of {os.cpu_count()} cores; "
                f"{run.params['records_verified']:,} acknowledged records read back"
                f"; the store's server {run.params['store_cores'] or 0:.2f} cores"
                f"; p50 per broker's clients: {run.params['p50_by_broker']}"
                f"; segments renumbered at commit: {run.params['renumbered_segments']}"
                + (
                    f"; store requests per commit: {run.params['store_requests_per_commit']}"
                    if run.params.get("store_requests_per_commit")
                    else ""
                )
            )
    first = next(iter(hot.values()))
    notes.insert(
        0,
        f"{regime.key}: commits from {first.params['commits_source']}; lost races from "
        f"{first.params['races_source']}",
    )
    notes.insert(0, target_note(regime, hot))
    return figures(regime, hot, own), notes


def run_config(cfg: BrokersBenchConfig, workdir: Path, progress: Progress) -> Report:
    report = Report(NAME)
    start = time.perf_counter()
    load_before = os.getloadavg()[0]
    spawn = multiprocessing.get_context("spawn")
    notes: list[str] = []
    with ProcessPoolExecutor(max(cfg.broker_counts), mp_context=spawn) as pool:
        warming = [pool.submit(ready, 0.5) for _ in range(max(cfg.broker_counts))]
        for f in warming:
            f.result()
        for regime in cfg.regimes:
            results, regime_notes = run_regime(cfg, regime, workdir, pool, progress)
            report.results += results
            notes += regime_notes
    report.notes = [
        load_note(load_before, os.getloadavg()[0])
        + f"; brokers, the store and the clients share {os.cpu_count()} cores, so CPU "
        "contention between them is part of these figures",
        *notes,
    ]
    report.seconds = time.perf_counter() - start
    return report


def narrowed(cfg: BrokersBenchConfig) -> BrokersBenchConfig:
    """``cfg`` cut to the regime and broker counts the command line asked for, if any.

    ``python -m benchmarks brokers --regime commit-bound --brokers 1,3`` sets
    ``LAKELOG_BENCH_REGIME`` / ``LAKELOG_BENCH_BROKER_COUNTS``: a quicker run of
    just the figures being worked on.
    """
    regimes = cfg.regimes
    wanted = os.environ.get("LAKELOG_BENCH_REGIME")
    if wanted:
        regimes = tuple(r for r in cfg.regimes if r.key == wanted)
        if not regimes:
            keys = ", ".join(r.key for r in cfg.regimes)
            raise ValueError(f"unknown regime {wanted!r}; choose from {keys}")
    counts = cfg.broker_counts
    listed = os.environ.get("LAKELOG_BENCH_BROKER_COUNTS")
    if listed:
        try:
            counts = tuple(int(n) for n in listed.split(","))
        except ValueError:
            raise ValueError(f"broker counts must be integers like 1,3, not {listed!r}") from None
        if not counts or min(counts) < 1:
            raise ValueError(f"broker counts must be at least 1, not {listed!r}")
    return replace(cfg, regimes=regimes, broker_counts=counts)


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``brokers`` suite at a named size (tiny, small, large)."""
    return run_config(narrowed(config_for(CONFIGS, size)), workdir, progress)
