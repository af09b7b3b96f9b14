"""Smoke test of the compaction benchmark: tiny size, well-formed output, never timing claims."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pyspark.sql import SparkSession

from benchmarks import bench_compaction
from benchmarks.__main__ import SUITES, load_suite
from benchmarks.common import quiet, render_report, results_json


def _finite_positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def test_compaction_suite_tiny(spark: SparkSession, tmp_path: Path) -> None:
    assert SUITES["compaction"] == "benchmarks.bench_compaction"
    assert load_suite("compaction").NAME == "compaction"
    cfg = bench_compaction.CONFIGS["tiny"]
    report = bench_compaction.run_config(cfg, tmp_path, quiet, spark)

    assert report.suite == "compaction"
    assert [(r.benchmark, r.params["records"]) for r in report.results] == [
        (bench, n)
        for n in cfg.sizes
        for bench in (bench_compaction.COMPACT, bench_compaction.GROWTH)
    ]
    for r in report.results:
        assert _finite_positive(r.value), r
        assert set(r.baselines) == {bench_compaction.CEILING, bench_compaction.NAIVE}, r
        assert all(_finite_positive(v) for v in r.baselines.values()), r
        assert r.higher_is_better == (r.benchmark == bench_compaction.COMPACT)
        assert r.params["keys"] == cfg.keys
    # What a report generator plots: one point per size, rate and time from the same run.
    points = [
        item for item in results_json([report], {}) if item["benchmark"] == bench_compaction.COMPACT
    ]
    for item in points:
        params = item["params"]
        assert isinstance(params, dict)
        assert math.isclose(
            float(params["records_per_s"]), float(params["records"]) / float(params["seconds"])
        )
        assert _finite_positive(item["ratios"][bench_compaction.CEILING])  # type: ignore[index]
    json.dumps(points, allow_nan=False)
    text = render_report(report)
    assert "== compaction throughput" in text and "time growth" in text
    assert list(tmp_path.iterdir()) == []  # scratch roots are removed
