"""The multi-broker suite's pure parts (read-back check, counters) and the store proxy's counting.

No broker and no store: these run in a blink; the suite itself is smoke-tested in
test_bench_brokers_smoke.py.
"""

from __future__ import annotations

import http.client
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from benchmarks import bench_brokers, broker_admin, plots
from benchmarks.bench_brokers import Snapshot, count_commits, spread, topic_counter, verify_topic
from benchmarks.broker_admin import LOOP_LAG, histogram_quantile, loop_lag_ms
from lakelog.testing.brokers import LOOPBACK
from lakelog.testing.proxy import TcpProxy

VALUES = [pa.array([b"a0", b"a1"], pa.binary()), pa.array([b"b0", b"b1", b"b2"], pa.binary())]


def stored(*values: bytes) -> pa.Table:
    return pa.table(
        {"offset": pa.array(range(len(values)), pa.int64()), "value": pa.array(values, pa.binary())}
    )


def test_read_back_accepts_every_ack_once_in_order() -> None:
    table = {0: stored(b"b0", b"b1", b"b2", b"a0", b"a1"), 1: stored(b"a0", b"a1")}
    acks = [(0, 0, 3, 2), (1, 0, 0, 3), (0, 1, 0, 2)]
    assert verify_topic("t", table, acks, VALUES) == 7


@pytest.mark.parametrize(
    ("table", "acks", "problem"),
    [
        # a record acknowledged at an offset that holds another value
        ({0: stored(b"b0", b"b1", b"b2")}, [(0, 0, 0, 2), (0, 0, 2, 1)], "other values"),
        # two acknowledgements for the same offsets
        ({0: stored(b"a0", b"a1")}, [(0, 0, 0, 2), (0, 0, 0, 2)], "acknowledged twice"),
        # a record stored that nobody acknowledged, before and after the acknowledged ones
        ({0: stored(b"x", b"a0", b"a1")}, [(0, 0, 1, 2)], "not acknowledged"),
        ({0: stored(b"a0", b"a1", b"x")}, [(0, 0, 0, 2)], "after the last"),
        # an acknowledged partition with nothing stored (lost)
        ({}, [(0, 3, 0, 2)], "not stored"),
        # a gap in the stored offsets
        (
            {0: pa.table({"offset": pa.array([0, 2], pa.int64()), "value": VALUES[0]})},
            [(0, 0, 0, 2)],
            "not dense",
        ),
    ],
)
def test_read_back_names_each_problem(
    table: dict[int, pa.Table], acks: list[tuple[int, int, int, int]], problem: str
) -> None:
    with pytest.raises(RuntimeError, match=problem):
        verify_topic("t", table, acks, VALUES)


def test_topic_counters_and_their_fallbacks() -> None:
    metrics = {
        'lakelog_commit_seconds_count{topic="hot"}': 7.0,
        'lakelog_commit_seconds_count{topic="cold"}': 2.0,
    }
    assert topic_counter(metrics, bench_brokers.COMMIT_HISTOGRAM, "hot") == 7.0
    assert topic_counter(metrics, bench_brokers.COMMIT_HISTOGRAM, "new") == 0.0
    assert topic_counter(metrics, bench_brokers.TOPIC_COMMITS, "hot") == 0.0

    put = bench_brokers.commit_put("hot")
    before = Snapshot(({'lakelog_commit_seconds_count{topic="hot"}': 1.0}, {}), {put: 1}, 0.0)
    after = Snapshot(
        (
            {'lakelog_commit_seconds_count{topic="hot"}': 5.0},
            {'lakelog_commit_seconds_count{topic="hot"}': 3.0},
        ),
        {put: 5},
        1.0,
    )
    counted = count_commits(before, after, ["hot"])
    assert (counted.commits, counted.lost_races) == (7.0, 4.0)
    assert "proxy" in counted.races_source

    named = {
        'lakelog_topic_commits_total{topic="hot"}': 6.0,
        'lakelog_topic_commit_races_lost_total{topic="hot"}': 3.0,
        'lakelog_commit_seconds_count{topic="hot"}': 99.0,
    }
    counted = count_commits(Snapshot(({},), {}, 0.0), Snapshot((named,), {}, 1.0), ["hot"])
    assert (counted.commits, counted.lost_races) == (6.0, 3.0)
    assert counted.races_source == bench_brokers.TOPIC_RACES

    local = count_commits(Snapshot(({},), {}, 0.0), Snapshot((metrics,), {}, 1.0), ["hot"])
    assert local.commits == 7.0 and local.races_source.startswith("not measured")

    # Declared but never incremented (no race yet): zero, not "not exposed".
    declared = frozenset({"lakelog_topic_commits", "lakelog_topic_commit_races_lost"})
    quiet_races = count_commits(
        Snapshot(({},), {}, 0.0),
        Snapshot(({'lakelog_topic_commits_total{topic="hot"}': 2.0},), {}, 1.0, declared),
        ["hot"],
    )
    assert (quiet_races.commits, quiet_races.lost_races) == (2.0, 0.0)
    assert quiet_races.races_source == bench_brokers.TOPIC_RACES

    # A broker that has not committed yet counts zero beside one that has.
    two = count_commits(Snapshot(({}, {}), {}, 0.0), Snapshot((metrics, {}), {}, 1.0), ["hot"])
    assert two.commits == 7.0

    text = "# HELP lakelog_topic_commits c\n# TYPE lakelog_topic_commits counter\nx_total 1\n"
    assert broker_admin.metric_families(text) == {"lakelog_topic_commits"}


def test_commit_put_matches_only_the_topics_log_versions() -> None:
    pattern = re.compile(bench_brokers.commit_put("hot"))
    assert pattern.search(
        b"PUT /bucket/lakelog/topics/hot/_delta_log/00000000000000000003.json HTTP/1.1"
    )
    for line in (
        b"PUT /b/lakelog/topics/hot/_delta_log/00000000000000000100.checkpoint.parquet HTTP/1.1",
        b"PUT /bucket/lakelog/topics/hot/p=0/segment.parquet HTTP/1.1",
        b"PUT /bucket/lakelog/topics/hotter/_delta_log/00000000000000000003.json HTTP/1.1",
        b"GET /bucket/lakelog/topics/hot/_delta_log/00000000000000000003.json HTTP/1.1",
    ):
        assert not pattern.search(line), line


def test_clients_are_spread_over_brokers() -> None:
    assert spread(48, 3) == [16, 16, 16]
    assert spread(7, 3) == [3, 2, 2]
    assert spread(2, 3) == [1, 1, 1]


class _Ok(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(404 if self.path == "/missing" else 200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_proxy_counts_and_delays_each_request_once(
    http_server: http.server.ThreadingHTTPServer,
) -> None:
    proxy = TcpProxy(LOOPBACK, http_server.server_address[1])
    proxy.request_delay_s = 0.05
    proxy.count_requests(rb"^GET /counted ")
    proxy.count_requests(rb"^GET /missing ")
    proxy.start()
    try:
        conn = http.client.HTTPConnection(LOOPBACK, proxy.port, timeout=10)
        for path in ("/counted", "/other", "/counted", "/missing"):  # one keep-alive connection
            conn.request("GET", path)
            conn.getresponse().read()
        conn.close()
    finally:
        proxy.stop()
    assert proxy.counts == {rb"^GET /counted ": 2, rb"^GET /missing ": 1}
    assert proxy.answers == {(rb"^GET /counted ", 200): 2, (rb"^GET /missing ", 404): 1}
    assert proxy.delayed_requests == 4  # each request held back once, keep-alive or not


def test_broker_figures_are_drawn_against_the_broker_count(tmp_path: Path) -> None:
    def result(brokers: int, unit: str, value: float, **extra: object) -> dict[str, object]:
        return {
            "suite": "brokers",
            "benchmark": "commit-bound",
            "variant": f"{brokers} brokers",
            "metric": unit,
            "unit": unit,
            "value": value,
            "baselines": {bench_brokers.OWN: 2 * value},
            "params": {"brokers": brokers, "records_per_request": 10, **extra},
        }

    results = [
        *(result(n, "records/s", 100.0 * n) for n in (1, 2, 3)),
        *(result(n, "commits/s", 10.0) for n in (1, 2, 3)),
        result(3, "x", 3.0, versus_brokers=1),
    ]
    panels = plots.broker_points(results)
    assert panels == {
        "brokers: commit-bound [records/s]": {
            "lakelog": [(1.0, 100.0), (2.0, 200.0), (3.0, 300.0)],
            bench_brokers.OWN: [(1.0, 200.0), (2.0, 400.0), (3.0, 600.0)],
        },
        "brokers: commit-bound [commits/s]": {
            "lakelog": [(1.0, 10.0), (2.0, 10.0), (3.0, 10.0)],
            bench_brokers.OWN: [(1.0, 20.0), (2.0, 20.0), (3.0, 20.0)],
        },
    }
    assert plots.throughput_points(results) == {}  # not drawn against the request size too
    drawn = plots.plot_broker_scaling(results, tmp_path / "brokers.png", "tiny")
    assert drawn is not None and drawn.stat().st_size > 0


def test_histogram_quantile_interpolates_within_the_bucket_as_prometheus_does() -> None:
    name = "lag_seconds"

    def snapshot(counts: dict[str, float]) -> dict[str, float]:
        return {f'{name}_bucket{{le="{le}"}}': value for le, value in counts.items()}

    before = snapshot({"0.001": 10, "0.01": 10, "0.1": 10, "+Inf": 10})
    # 100 observations: 50 below 1 ms, 40 in 1-10 ms, 9 in 10-100 ms, 1 beyond.
    after = snapshot({"0.001": 60, "0.01": 100, "0.1": 109, "+Inf": 110})
    assert histogram_quantile(before, after, name, 0.5) == pytest.approx(0.001)
    assert histogram_quantile(before, after, name, 0.25) == pytest.approx(0.0005)
    assert histogram_quantile(before, after, name, 0.7) == pytest.approx(0.001 + 0.009 * 0.5)
    assert histogram_quantile(before, after, name, 0.95) == pytest.approx(0.01 + 0.09 * 5 / 9)
    assert histogram_quantile(before, after, name, 0.999) == pytest.approx(0.1)
    assert histogram_quantile(after, after, name, 0.5) is None
    assert histogram_quantile({}, {}, name, 0.5) is None
    figures = loop_lag_ms(
        {}, {f'{LOOP_LAG}_bucket{{le="0.002"}}': 4, f'{LOOP_LAG}_bucket{{le="+Inf"}}': 4}
    )
    assert figures == {"broker_loop_lag_p50_ms": 1.0, "broker_loop_lag_p99_ms": 1.98}
