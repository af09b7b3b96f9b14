"""Smoke test of the typed Spark SQL benchmark: the tiny size runs, its figure well formed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from benchmarks import bench_typed_sql as bench
from benchmarks.__main__ import SUITES
from benchmarks.bench_schemas import framed_orders
from benchmarks.common import quiet, render_report

pytestmark = pytest.mark.integration  # a broker subprocess and Spark


def test_typed_sql_suite_tiny(spark: SparkSession, tmp_path: Path) -> None:
    """The suite reuses the session's SparkSession; the two aggregates agree (it checks)."""
    assert SUITES["typed-sql"] == "benchmarks.bench_typed_sql"
    report = bench.run("tiny", tmp_path, quiet)
    (result,) = report.results
    assert (result.benchmark, result.variant, result.higher_is_better) == (
        bench.AGGREGATE,
        bench.TYPED,
        False,
    )
    assert set(result.baselines) == {bench.FROM_JSON}
    assert math.isfinite(result.value) and result.value > 0
    assert "orders: typed" in "\n".join(report.notes)
    assert bench.AGGREGATE in render_report(report)
    assert [p.name for p in tmp_path.iterdir()] == []


def test_the_json_orders_are_the_avro_orders() -> None:
    framed = framed_orders(7, 3)
    assert [o.startswith(b'{"id":') for o in bench.json_orders(framed)] == [True] * 3
