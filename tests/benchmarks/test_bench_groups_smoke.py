"""Smoke test of the groups benchmark: the tiny size runs and reports well-formed figures."""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks import bench_groups
from benchmarks.__main__ import SUITES
from benchmarks.common import quiet, render_report


def test_groups_suite_tiny(tmp_path: Path) -> None:
    assert SUITES["groups"] == "benchmarks.bench_groups"
    report = bench_groups.run("tiny", tmp_path, quiet)
    assert report.suite == "groups"
    assert {(r.benchmark, r.metric) for r in report.results} == {
        (bench_groups.COMMITS, "throughput"),
        (bench_groups.COMMITS, "p99 latency"),
        (bench_groups.REBALANCE, "median time"),
    }
    for result in report.results:
        assert math.isfinite(result.value) and result.value > 0, result
        assert result.baselines and all(math.isfinite(v) for v in result.baselines.values())
    commits = report.find(bench_groups.COMMITS, "3 members, 1/s each", "throughput")
    assert commits is not None and int(commits.params["commits"] or 0) > 0
    assert "rebalance" in render_report(report)
    assert not list(tmp_path.iterdir()), "the scratch root was not removed"
