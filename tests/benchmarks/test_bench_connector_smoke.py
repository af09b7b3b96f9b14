"""Smoke test of the connector benchmark: tiny size, well-formed output, never timing claims."""

from __future__ import annotations

import math
from pathlib import Path

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
        bench_connector.SELECTIVE,
        bench_connector.STREAM,
        bench_connector.LATENCY,
    }
    expected_baselines = {
        bench_connector.SCAN: {bench_connector.PARQUET},
        bench_connector.SELECTIVE: {bench_connector.FULL, bench_connector.PARQUET},
        bench_connector.STREAM: {bench_connector.BATCH},
        bench_connector.LATENCY: {bench_connector.RATE},
    }
    for r in report.results:
        assert _finite_positive(r.value), r
        assert set(r.baselines) == expected_baselines[r.benchmark], r
        assert all(_finite_positive(v) for v in r.baselines.values()), r
        assert r.higher_is_better == (r.benchmark in {bench_connector.SCAN, bench_connector.STREAM})
    assert [r.metric for r in report.results if r.benchmark == bench_connector.LATENCY] == [
        "e2e p50",
        "e2e p99",
        "trigger p50",
    ]
    text = render_report(report)
    assert "== full scan" in text and "goal >= 0.8" in text
    assert list(tmp_path.iterdir()) == []  # scratch roots and checkpoints are removed
