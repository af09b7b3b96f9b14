"""Smoke test of the Kafka codec benchmark: the tiny size runs and reports well-formed figures."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import bench_kafka_codec as bench
from benchmarks.__main__ import SUITES
from benchmarks.common import quiet, render_report

# kafka-python loads its message schemas with importlib.resources calls Python deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:(open_text|read_text) is deprecated:DeprecationWarning"
)


def test_kafka_codec_suite_tiny(tmp_path: Path) -> None:
    assert SUITES["kafka-codec"] == "benchmarks.bench_kafka_codec"
    report = bench.run("tiny", tmp_path, quiet)
    assert report.suite == "kafka-codec"
    operations = ("decode", "encode")
    messages = [
        (r.variant.split(",")[0], r.metric) for r in report.results if r.benchmark == bench.MESSAGES
    ]
    assert messages == [
        (message, op)
        for message in ("Produce v9 request", "Fetch v12 response", "Metadata v12 response")
        for op in operations
    ]
    records = [
        (str(r.params["compression"]), r.metric)
        for r in report.results
        if r.benchmark == bench.RECORDS
    ]
    assert records == [(c, op) for c in bench.COMPRESSION for op in operations]
    fetch = [r for r in report.results if r.benchmark == bench.FETCH_ENCODE]
    assert [r.params["headers"] for r in fetch] == [False, True]
    assert all(set(r.baselines) == {bench.PER_RECORD} for r in fetch)
    for result in report.results:
        assert math.isfinite(result.value) and result.value > 0, result
        assert all(math.isfinite(v) and v > 0 for v in result.baselines.values()), result
        assert not result.higher_is_better
        if result.benchmark == bench.MESSAGES:
            assert set(result.baselines) == {bench.KAFKA_PYTHON}
    uncompressed = [r for r in report.results if r.params.get("compression") == "none"]
    assert all(set(r.baselines) == {bench.KAFKA_PYTHON, bench.KIO} for r in uncompressed)
    # The codecs lakelog uses read back exactly what was written; other libraries may not.
    failed = [n for n in report.notes if n.startswith("CHECK FAILED")]
    assert not [n for n in failed if bench.AIOKAFKA in n or "kio does not read back" in n], failed
    assert not [n for n in failed if "fetch encode" in n], failed
    text = render_report(report)
    for api, _key in bench.LISTENER_APIS:
        assert f"\n{api} (" in text
    assert "us/record" in text and "us/message" in text


def test_version_lists_are_written_as_ranges() -> None:
    assert bench.format_versions([]) == "-"
    assert bench.format_versions([0]) == "0"
    assert bench.format_versions([3, 4, 5, 6]) == "3-6"
    assert bench.format_versions([5, 0, 1, 2, 9]) == "0-2,5,9"


def test_every_listener_api_is_covered_by_the_message_codec() -> None:
    """kio encodes and decodes some version of every API the listener answers."""
    versions = bench.kio_versions()
    assert all(versions.get(key) for _name, key in bench.LISTENER_APIS)
