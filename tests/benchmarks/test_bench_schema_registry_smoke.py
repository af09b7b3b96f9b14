"""Smoke test of the Schema Registry benchmark: the tiny size runs and reports its figures."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import bench_schema_registry as bench
from benchmarks.__main__ import SUITES
from benchmarks.common import quiet, render_report

pytestmark = pytest.mark.integration  # the suite starts a broker


def test_schema_registry_suite_tiny(tmp_path: Path) -> None:
    assert SUITES["schema-registry"] == "benchmarks.bench_schema_registry"
    report = bench.run("tiny", tmp_path, quiet)
    assert [r.metric for r in report.results] == ["p50 latency", "p99 latency", "answered"]
    for result in report.results:
        assert math.isfinite(result.value) and result.value > 0, result
        assert set(result.baselines) == {bench.HEALTHZ, bench.TYPES}
    assert "schemas/ids" in render_report(report)
    assert not list(tmp_path.iterdir()), "the scratch root was not removed"
