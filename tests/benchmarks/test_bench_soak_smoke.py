"""Smoke test of the soak suite: a few seconds of real brokers, clients and maintenance.

It checks the harness (every figure present and sane, zero loss, the memory
chart) and the slope helper, never a speed or a memory figure itself.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks import bench_soak
from benchmarks.__main__ import main

pytestmark = pytest.mark.integration  # the suite starts brokers


def test_slope_of_a_line_and_of_a_flat_series() -> None:
    rising = [(t * 60.0, int((100 + 3 * t) * (1 << 20))) for t in range(10)]
    assert bench_soak.slope_mib_per_min(rising) == pytest.approx(3.0)
    assert bench_soak.slope_mib_per_min([(0.0, 5), (60.0, 5)]) == 0.0
    assert bench_soak.slope_mib_per_min([(0.0, 5)]) == 0.0


def test_tiny_soak_runs_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAKELOG_BENCH_MINUTES", raising=False)
    out = tmp_path / "soak.json"
    code = main(
        ["soak", "--minutes", "0.2", "--workdir", str(tmp_path), "--json", str(out), "--quiet"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "zero loss: yes" in printed, printed
    figures = {r["metric"]: r["value"] for r in json.loads(out.read_text())}
    assert figures["lost"] == 0
    assert figures["acknowledged"] > 0
    assert figures["produce"] > 0 and figures["consume"] > 0
    for broker in ("broker0", "broker1"):
        assert figures[f"{broker} rss start"] > 0
        assert math.isfinite(figures[f"{broker} rss slope"])
    assert (tmp_path / "soak-memory.png").stat().st_size > 0
