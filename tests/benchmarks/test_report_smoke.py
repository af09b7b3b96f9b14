"""Smoke test of ``python -m benchmarks report``: every registered suite at size tiny.

Checks the outputs exist and hang together (JSON per size naming every suite,
PNG figures, markdown referencing them and the machine); never timing claims.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks import plots
from benchmarks.__main__ import SUITES, main
from benchmarks.common import Report
from benchmarks.report import SizeRun, merged, parse_args, parse_sizes

pytestmark = pytest.mark.integration  # the report runs every suite

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: the suites the smoke run reports: append/commit figures, and compaction scaling
REPORTED = ("log", "compaction")


def test_report_at_tiny_writes_json_figures_and_markdown(tmp_path: Path) -> None:
    out, img, doc = tmp_path / "results", tmp_path / "img", tmp_path / "docs" / "performance.md"
    # Two suites keep this quick: every suite has its own smoke test, and the default
    # selection is the whole registry (test_every_registered_suite_is_the_default).
    argv = ["report", "--sizes", "tiny", "--out", str(out), "--img-dir", str(img)]
    argv += ["--suites", ",".join(REPORTED)]
    status = main([*argv, "--doc", str(doc), "--workdir", str(tmp_path), "--quiet"])
    assert status == 0

    results = json.loads((out / "results-tiny.json").read_text())
    assert {r["suite"] for r in results} == set(REPORTED)
    assert all("machine" in r and r["baselines"] is not None for r in results)
    summary = json.loads((out / "report.json").read_text())
    assert set(summary["sizes"]["tiny"]["suites"]) == set(REPORTED)
    assert summary["sizes"]["tiny"]["failed"] == {}
    assert summary["machine"]["ram_gib"] > 0
    assert summary["machine"]["pyspark"]

    figures = sorted(img.glob("perf-tiny-*.png"))
    names = {p.name for p in figures}
    assert {"perf-tiny-throughput.png", "perf-tiny-latency.png"} <= names
    for png in figures:
        assert png.read_bytes()[:8] == PNG_MAGIC

    text = doc.read_text()
    for png in figures:
        assert f"](../img/{png.name})" in text
    for suite in REPORTED:
        assert f"### `{suite}` at size `tiny`" in text
    assert "cpu_model" in text and "pyspark" in text
    assert "../results/results-tiny.json" in text

    # --redraw measures nothing: the same tables and figures come back from the saved results.
    doc.unlink()
    for png in figures:
        png.unlink()
    redraw = ["report", "--redraw", "--out", str(out), "--img-dir", str(img), "--doc", str(doc)]
    assert main(redraw) == 0
    assert doc.read_text() == text
    assert sorted(img.glob("perf-tiny-*.png")) == figures


def test_every_registered_suite_is_the_default() -> None:
    assert parse_args(["--sizes", "tiny"], list(SUITES)).suites == list(SUITES)


def test_sizes_are_validated() -> None:
    assert parse_sizes("small, large") == ["small", "large"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown size"):
        parse_sizes("small,huge")
    with pytest.raises(argparse.ArgumentTypeError, match="repeats"):
        parse_sizes("small,small")


def test_unknown_suite_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--suites", "log,nope"])
    assert "unknown nope" in capsys.readouterr().err


def test_figure_selection_by_shape() -> None:
    """Pure selection logic: batch sizes, percentiles and scaling come from units and params."""
    base = {"suite": "s", "benchmark": "b", "variant": "v", "baselines": {"raw": 2.0}}
    rows = [
        {**base, "metric": "throughput", "unit": "records/s", "value": 1.0,
         "params": {"batch_records": 10}},
        {**base, "metric": "throughput", "unit": "records/s", "value": 3.0,
         "params": {"batch_records": 100}},
        {**base, "metric": "throughput", "unit": "MB/s", "value": 1.0,
         "params": {"batch_records": 10}},
        {**base, "metric": "e2e p99", "unit": "ms", "value": 5.0, "params": {}},
        {**base, "suite": "compaction", "metric": "duration", "unit": "s", "value": 1.0,
         "params": {"records": 1000}},
        {**base, "suite": "compaction", "metric": "duration", "unit": "s", "value": 4.0,
         "params": {"records": 4000}},
    ]  # fmt: skip
    throughput = plots.throughput_points(rows)
    assert throughput == {
        "s: b (x = batch_records)": {"lakelog": [(10, 1.0), (100, 3.0)], "raw": [(10, 2), (100, 2)]}
    }
    assert plots.percentile_of("e2e p99") == 99 and plots.percentile_of("median") is None
    assert [c for _, c, _ in plots.latency_bars(rows)["s: b"]] == ["lakelog", "raw"]
    scaling = plots.scaling_points(rows)
    assert scaling["b: duration [s] vs records"]["lakelog"] == [(1000, 1.0), (4000, 4.0)]


def test_add_replaces_only_the_suites_run_again() -> None:
    saved = SizeRun("small", [Report("log"), Report("groups")], {"soak": "trace"}, seconds=5)
    new = SizeRun("small", [Report("groups", notes=["new"])], {"compaction": "boom"}, seconds=2)
    run = merged(saved, new)
    assert [(r.suite, r.notes) for r in run.reports] == [("log", []), ("groups", ["new"])]
    assert run.failures == {"soak": "trace", "compaction": "boom"}
    # the durations recorded for the two runs (5 + 2) add up: bookkeeping, no clock involved
    assert run == SizeRun("small", run.reports, run.failures, run.figures, 7)
    assert merged(None, new) is new
