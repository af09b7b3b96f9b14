"""Smoke test of the multi-broker suite: the tiny size runs end to end and every figure is there.

Figures at this size mean nothing (sub-second windows); the test checks names,
finiteness and that the read-back of every acknowledged record ran, never speed.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from benchmarks import bench_brokers
from benchmarks.__main__ import SUITES
from benchmarks.common import Report, quiet, render_report, results_json

pytestmark = pytest.mark.integration  # the suite starts brokers

CONFIG = bench_brokers.CONFIGS["tiny"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return bench_brokers.run("tiny", tmp_path_factory.mktemp("brokers-bench"), quiet)


def _measured(result_params: object, metric: str) -> bool:
    """Lost races may be unmeasurable only where the brokers expose no race counter."""
    assert isinstance(result_params, dict)
    return metric != bench_brokers.RACES or not str(result_params["races_source"]).startswith(
        "not measured"
    )


def test_every_figure_exists_and_is_finite(report: Report) -> None:
    assert report.suite == "brokers"
    for regime in CONFIG.regimes:
        for n in CONFIG.broker_counts:
            variant = f"{n} broker{'s' if n > 1 else ''}"
            for metric in bench_brokers.METRICS:
                r = report.find(regime.title, variant, metric)
                assert r is not None, (regime.key, variant, metric)
                assert set(r.baselines) == {bench_brokers.OWN}
                if _measured(r.params, metric):
                    assert math.isfinite(r.value) and r.value >= 0, r
                    assert math.isfinite(r.baselines[bench_brokers.OWN]), r
            hot = report.find(regime.title, variant, bench_brokers.RECORDS)
            assert hot is not None
            assert hot.params["records_verified"], hot  # the read-back ran and found records
        high, low = max(CONFIG.broker_counts), min(CONFIG.broker_counts)
        for metric in ("records/s ratio", "commits/s ratio", "p99 ratio"):
            r = report.find(regime.title, f"{high} brokers / {low} broker", metric)
            assert r is not None and math.isfinite(r.value), (regime.key, metric)


def test_s3_regime_counts_lost_races(report: Report) -> None:
    """On S3 lost races are always measured: from the brokers' counter, or on the wire."""
    regime = next(r for r in CONFIG.regimes if r.s3)
    for n in CONFIG.broker_counts:
        variant = f"{n} broker{'s' if n > 1 else ''}"
        r = report.find(regime.title, variant, bench_brokers.RACES)
        assert r is not None and math.isfinite(r.value), r
        assert r.value == 0 or n > 1  # one writer never loses a race


def test_notes_state_targets_and_sources(report: Report) -> None:
    for regime in CONFIG.regimes:
        assert any(n.startswith(f"target {regime.key}:") for n in report.notes)
        assert any(n.startswith(f"{regime.key}: commits from") for n in report.notes)
    text = render_report(report)
    assert bench_brokers.OWN in text
    json.dumps(results_json([report], {"cpu_count": 2}), allow_nan=False)


def test_suite_is_registered() -> None:
    assert SUITES["brokers"] == "benchmarks.bench_brokers"
    with pytest.raises(ValueError, match="unknown size"):
        bench_brokers.run("huge", Path("."), quiet)


def test_the_command_line_narrows_the_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--regime`` / ``--brokers`` (through their environment variables) cut the config."""
    monkeypatch.setenv("LAKELOG_BENCH_REGIME", "commit-bound")
    monkeypatch.setenv("LAKELOG_BENCH_BROKER_COUNTS", "1,3")
    cut = bench_brokers.narrowed(bench_brokers.CONFIGS["small"])
    assert [r.key for r in cut.regimes] == ["commit-bound"]
    assert cut.broker_counts == (1, 3)
    monkeypatch.setenv("LAKELOG_BENCH_REGIME", "disk-bound")
    with pytest.raises(ValueError, match="unknown regime 'disk-bound'"):
        bench_brokers.narrowed(CONFIG)
    monkeypatch.setenv("LAKELOG_BENCH_REGIME", "")
    monkeypatch.setenv("LAKELOG_BENCH_BROKER_COUNTS", "one")
    with pytest.raises(ValueError, match="broker counts must be integers"):
        bench_brokers.narrowed(CONFIG)


def test_store_request_kinds_tell_listings_from_reads() -> None:
    kinds = {k: re.compile(p) for k, p in bench_brokers.STORE_REQUESTS.items()}
    listing = b"GET /bucket?list-type=2&prefix=lakelog%2F HTTP/1.1"
    read = b"GET /bucket/lakelog/topics/t/_delta_log/00000000000000000001.json HTTP/1.1"
    assert [k for k, p in kinds.items() if p.search(listing)] == ["LIST"]
    assert [k for k, p in kinds.items() if p.search(read)] == ["GET"]
