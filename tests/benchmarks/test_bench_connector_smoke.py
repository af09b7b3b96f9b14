"""Smoke test of the connector benchmark: tiny size, well-formed output, never timing claims."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from benchmarks import bench_connector
from benchmarks.__main__ import SUITES, load_suite
from benchmarks.common import quiet, render_report


def _finite_positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def test_connector_suite_tiny(spark: SparkSession, tmp_path: Path) -> None:
    assert SUITES["connector"] == "benchmarks.bench_connector"
    assert load_suite("connector").NAME == "connector"
    report = bench_connector.run_config(bench_connector.CONFIGS["tiny"], tmp_path, quiet, spark)
    assert report.suite == "connector"
    benchmarks = {r.benchmark for r in report.results}
    assert benchmarks == {
        bench_connector.SCAN,
        bench_connector.SQL_SCAN,
        bench_connector.SELECTIVE,
        bench_connector.STREAM,
        bench_connector.LATENCY,
    }
    expected_baselines = {
        bench_connector.SCAN: {bench_connector.PARQUET, bench_connector.DATA_SOURCE},
        bench_connector.SQL_SCAN: {bench_connector.PARQUET},
        bench_connector.SELECTIVE: {
            bench_connector.FULL,
            bench_connector.PARQUET,
            bench_connector.DATA_SOURCE,
        },
        bench_connector.STREAM: {bench_connector.BATCH},
        bench_connector.LATENCY: {bench_connector.RATE},
    }
    for r in report.results:
        assert _finite_positive(r.value), r
        assert set(r.baselines) == expected_baselines[r.benchmark], r
        assert all(_finite_positive(v) for v in r.baselines.values()), r
        assert r.higher_is_better == (
            r.benchmark in {bench_connector.SCAN, bench_connector.SQL_SCAN, bench_connector.STREAM}
        )
    latency = [r for r in report.results if r.benchmark == bench_connector.LATENCY]
    assert [r.metric for r in latency] == ["e2e p50", "e2e p99", "trigger p50"]
    cfg = bench_connector.CONFIGS["tiny"]
    for r in latency:  # the rate source's own percentiles, from as many samples as appends
        assert r.params["rate_seconds"] == cfg.latency_appends, r
        assert int(r.params["rate_triggers_with_data"] or 0) > 0, r
    text = render_report(report)
    assert "== full scan" in text and "goal >= 0.95" in text
    assert "caught-up stream e2e p99 / rate source" in text and "goal <= 1.5" in text
    selective = next(r for r in report.results if r.benchmark == bench_connector.SELECTIVE)
    assert 0 < int(selective.params["files_listed"] or 0) < int(selective.params["segments"] or 0)
    assert list(tmp_path.iterdir()) == []  # scratch roots and checkpoints are removed


def test_rate_source_latency_counts_each_released_second() -> None:
    """A batch carrying two seconds gives two samples, each from the end of its own second."""
    seen = bench_connector._RateSeen(rows_per_second=200)
    seen.batches = [(101.25, 99.0, 2), (102.5, 101.0, 1)]  # (seen at, first second, seconds)
    assert seen.latencies_ms(since=0.0) == pytest.approx([1250.0, 250.0, 500.0])
    assert seen.latencies_ms(since=101.0) == pytest.approx([250.0, 500.0])
