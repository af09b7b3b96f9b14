"""Smoke test of the typed-topic produce benchmark: the tiny size runs, its figures well formed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import bench_schemas as bench
from benchmarks.__main__ import SUITES
from benchmarks.common import quiet, render_report

pytestmark = pytest.mark.integration  # the suite starts a broker


def test_schemas_suite_tiny(tmp_path: Path) -> None:
    assert SUITES["schemas"] == "benchmarks.bench_schemas"
    report = bench.run("tiny", tmp_path, quiet)
    assert report.suite == "schemas"
    result, decode = report.results
    assert (result.benchmark, result.variant, result.metric) == (
        bench.PRODUCE,
        bench.VALIDATED,
        "throughput",
    )
    assert result.value > 0 and math.isfinite(result.value)
    assert set(result.baselines) == {bench.PLAIN}
    assert result.ratio(bench.PLAIN) is not None
    assert (decode.benchmark, decode.variant, decode.higher_is_better) == (
        bench.DECODE,
        bench.COLUMNAR,
        False,
    )
    assert set(decode.baselines) == {bench.PER_RECORD}
    assert decode.value > 0 and decode.baselines[bench.PER_RECORD] > 0
    assert "validated and typed" in "\n".join(report.notes)
    assert bench.PRODUCE in render_report(report)
    assert [p.name for p in tmp_path.iterdir()] == []
