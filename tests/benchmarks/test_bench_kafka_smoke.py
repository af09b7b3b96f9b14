"""Smoke test of the Kafka listener benchmark: the tiny size runs, its figures well formed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import bench_kafka as bench
from benchmarks.__main__ import SUITES
from benchmarks.common import quiet, render_report

pytestmark = pytest.mark.integration  # the suite starts brokers


def test_kafka_suite_tiny(tmp_path: Path) -> None:
    assert SUITES["kafka"] == "benchmarks.bench_kafka"
    report = bench.run("tiny", tmp_path, quiet)
    assert report.suite == "kafka"
    cfg = bench.CONFIGS["tiny"]
    assert [(r.benchmark, r.metric) for r in report.results] == [
        (bench.PRODUCE, "throughput"),
        (bench.PRODUCE, "throughput"),
        (bench.LATENCY, "p50"),
        (bench.LATENCY, "p99"),
        (bench.FETCH, "throughput"),
        (bench.FETCH, "throughput"),
        (bench.E2E, "p50"),
        (bench.E2E, "p99"),
        (bench.COMMITS, "offered"),
        (bench.COMMITS, "throughput"),
        (bench.COMMITS, "p99 latency"),
        (bench.S3, "throughput"),
        (bench.S3, "p50"),
        (bench.S3, "p99"),
    ]
    expected = {
        bench.PRODUCE: {bench.MOCK, bench.HTTP_ARROW},
        bench.LATENCY: {bench.MOCK},
        bench.FETCH: {bench.MOCK, bench.HTTP_ARROW},
        bench.E2E: {bench.ACK},
        bench.COMMITS: {bench.NAIVE},
        bench.S3: {bench.LOCAL},
    }
    for result in report.results:
        assert math.isfinite(result.value) and result.value > 0, result
        assert set(result.baselines) == expected[result.benchmark], result
        assert all(math.isfinite(v) and v > 0 for v in result.baselines.values()), result
    idempotence = [r.params["idempotent"] for r in report.results if r.benchmark == bench.PRODUCE]
    assert idempotence == [False, True]
    fetches = [r for r in report.results if r.benchmark == bench.FETCH]
    assert [r.params["consumer"] for r in fetches] == list(bench.FETCH_CLIENTS)
    assert all(r.params["records"] == cfg.records for r in fetches)
    commits = [r for r in report.results if r.benchmark == bench.COMMITS]
    assert int(commits[0].params["commits"] or 0) > 0
    assert int(commits[0].params["naive_commits"] or 0) > 0
    for result in report.results:
        if result.benchmark in (bench.LATENCY, bench.E2E):
            p50 = result.params["broker_loop_lag_p50_ms"]
            p99 = result.params["broker_loop_lag_p99_ms"]
            assert isinstance(p50, float) and isinstance(p99, float), result.params
            assert p99 >= p50 >= 0
    assert sum("event loop ran what was due" in n for n in report.notes) == 2
    verdicts = [n for n in report.notes if "goal " in n]
    assert len(verdicts) == len(bench.GOALS) + 2  # produce throughput and fetch twice
    assert "kafka fetch throughput" in render_report(report)
    assert not list(tmp_path.iterdir()), "the scratch root was not removed"


def test_goal_verdicts() -> None:
    at_least = bench.Goal(10, "records/s", True)
    at_most = bench.Goal(10, "ms", False)
    assert at_least.verdict(10).endswith("met") and at_least.verdict(9).endswith("MISSED")
    assert at_most.verdict(10).endswith("met") and at_most.verdict(11).endswith("MISSED")
