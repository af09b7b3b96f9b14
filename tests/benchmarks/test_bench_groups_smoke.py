"""Smoke test of the groups benchmark: the tiny size runs and reports well-formed figures."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from benchmarks import bench_groups
from benchmarks.__main__ import SUITES
from benchmarks.common import quiet, render_report

pytestmark = pytest.mark.integration  # the suite starts brokers


def test_groups_suite_tiny(tmp_path: Path) -> None:
    assert SUITES["groups"] == "benchmarks.bench_groups"
    report = bench_groups.run("tiny", tmp_path, quiet)
    assert report.suite == "groups"
    cfg = bench_groups.CONFIGS["tiny"]
    paces = ("1/s each", "back to back")
    assert [(r.benchmark, r.variant, r.metric) for r in report.results] == [
        *(
            (bench_groups.COMMITS, f"{cfg.consumers} members, {pace}", metric)
            for pace in paces
            for metric in ("offered", "throughput", "p99 latency")
        ),
        (bench_groups.REBALANCE, f"{cfg.rebalance_members}-member group, one joins", "median time"),
    ]
    for result in report.results:
        assert math.isfinite(result.value) and result.value > 0, result
        assert result.baselines and all(math.isfinite(v) for v in result.baselines.values())
    for pace in paces:  # both contenders carried the load: offered and completed are measured
        commits = report.find(bench_groups.COMMITS, f"{cfg.consumers} members, {pace}", "offered")
        assert commits is not None and set(commits.baselines) == {bench_groups.NAIVE}
        assert int(commits.params["commits"] or 0) > 0
        assert int(commits.params["naive_commits"] or 0) > 0
    assert "rebalance" in render_report(report)
    assert not list(tmp_path.iterdir()), "the scratch root was not removed"


def test_offered_is_what_the_generator_sent() -> None:
    """Commits that outlast their interval are sent late: offered falls below the schedule."""
    threads = [
        bench_groups.CommitThread(lambda _: time.sleep(0.5), time.sleep, f"t{i}") for i in range(2)
    ]
    try:
        figures = bench_groups.measure(threads, interval=0.1, warmup_s=0.2, seconds=1.5)
    finally:
        for t in threads:
            t.stop()
    scheduled = 2 / 0.1  # commits/s the configuration asks for
    assert 0 < figures.offered < scheduled / 2  # at most one commit per 0.5 s per thread
    assert figures.latencies and min(figures.latencies) >= 0.5
