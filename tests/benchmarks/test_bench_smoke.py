"""Smoke tests of the benchmark harness: tiny sizes, well-formed output, never timing claims."""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pytest

from benchmarks import bench_broker, bench_log, broker_admin, broker_load
from benchmarks.__main__ import SUITES, load_suite, main
from benchmarks.common import (
    Report,
    Result,
    cpu_times,
    format_number,
    machine_busy_seconds,
    percentile,
    quiet,
    random_binary,
    render_report,
    render_table,
    results_json,
)
from lakelog.testing.brokers import free_port
from server import codec
from server.rest_proxy import records_models

LOG_BENCHMARKS = {bench_log.APPEND, bench_log.COMMIT, bench_log.READ, bench_log.OPEN}


def _finite_positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return bench_log.run("tiny", tmp_path_factory.mktemp("bench"), quiet)


def test_log_suite_covers_every_benchmark(tiny_report: Report) -> None:
    assert tiny_report.suite == "log"
    assert {r.benchmark for r in tiny_report.results} == LOG_BENCHMARKS
    cfg = bench_log.CONFIGS["tiny"]
    append = [r for r in tiny_report.results if r.benchmark == bench_log.APPEND]
    variants = len(cfg.append_plan) * len(cfg.append_partitions)
    assert len(append) == 2 * variants  # records/s and MB/s each
    assert {r.unit for r in append} == {"records/s", "MB/s"}
    commits = [r for r in tiny_report.results if r.benchmark == bench_log.COMMIT]
    assert [r.metric for r in commits] == ["p50", "p99"] * len(cfg.commit_stages)
    opens = [r for r in tiny_report.results if r.benchmark == bench_log.OPEN]
    assert len(opens) == len(cfg.commit_stages)
    reads = [r for r in tiny_report.results if r.benchmark == bench_log.READ]
    assert len(reads) == len(cfg.read_plan)
    assert all(r.params["records"] == n * k for r, (n, k) in zip(reads, cfg.read_plan, strict=True))


def test_log_results_are_well_formed(tiny_report: Report) -> None:
    expected_baselines = {
        bench_log.APPEND: {
            bench_log.RAW,
            bench_log.RAW_FSYNC,
            bench_log.SEGMENT_FSYNC,
            bench_log.NAIVE,
        },
        bench_log.COMMIT: {bench_log.RAW, bench_log.RAW_FSYNC, bench_log.NAIVE},
        bench_log.READ: {bench_log.RAW},
        bench_log.OPEN: {bench_log.DELTA_OPEN},
    }
    for r in tiny_report.results:
        assert _finite_positive(r.value), r
        assert set(r.baselines) == expected_baselines[r.benchmark], r
        for name, value in r.baselines.items():
            assert _finite_positive(value), (r, name)
            assert _finite_positive(r.ratio(name)), (r, name)
        assert r.higher_is_better == (r.benchmark in {bench_log.APPEND, bench_log.READ})
        assert r.variant and r.metric and r.unit
    for p50, p99 in zip(
        *[
            [r for r in tiny_report.results if r.benchmark == bench_log.COMMIT and r.metric == m]
            for m in ("p50", "p99")
        ],
        strict=True,
    ):
        assert p50.variant == p99.variant
        assert p50.value <= p99.value
    assert tiny_report.notes


def test_report_renders_and_serializes(tiny_report: Report) -> None:
    text = render_report(tiny_report)
    for benchmark in LOG_BENCHMARKS:
        assert f"== {benchmark}" in text
    items = results_json([tiny_report], {"cpu_count": 2})
    decoded = json.loads(json.dumps(items, allow_nan=False))
    assert len(decoded) == len(tiny_report.results)
    for item in decoded:
        assert {"benchmark", "variant", "metric", "value", "unit", "baselines", "ratios"} <= set(
            item
        )
        assert item["suite"] == "log"
        assert item["machine"] == {"cpu_count": 2}
        assert set(item["ratios"]) == set(item["baselines"])


def test_cli_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out" / "results.json"
    argv = ["log", "--size", "tiny", "--json", str(out), "--workdir", str(tmp_path), "--quiet"]
    code = main(argv)
    assert code == 0
    printed = capsys.readouterr().out
    assert "machine: cpu_count=" in printed
    assert "deltalake=" in printed and "pyarrow=" in printed
    assert "== append throughput" in printed
    data = json.loads(out.read_text())
    assert isinstance(data, list) and data
    assert {d["benchmark"] for d in data} == LOG_BENCHMARKS
    assert all(d["machine"]["cpu_count"] for d in data)
    leftovers = [p for p in tmp_path.iterdir() if p.name != "out"]
    assert leftovers == []  # the temporary storage root is removed


def test_every_registered_suite_loads() -> None:
    for name in SUITES:
        suite = load_suite(name)
        registered = suite.NAME
        assert registered == name
        assert suite.DESCRIPTION


def test_unknown_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown size"):
        bench_log.run("huge", tmp_path, quiet)


def test_percentile() -> None:
    assert percentile([3.0], 99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 0) == 1.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 100) == 4.0
    assert percentile(list(map(float, range(101))), 99) == pytest.approx(99.0)
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_result_ratio_and_json() -> None:
    r = Result("b", "v", "m", 3.0, "ms", {"a": 1.5, "zero": 0.0}, higher_is_better=False)
    assert r.ratio("a") == 2.0
    assert r.ratio("zero") is None
    assert r.ratio("missing") is None
    item = r.to_json()
    assert item["ratios"] == {"a": 2.0, "zero": None}
    assert "machine" not in item
    json.dumps(item, allow_nan=False)


def test_formatting() -> None:
    assert format_number(1234567.8) == "1,234,568"
    assert format_number(12.345) == "12.3"
    assert format_number(0.01234) == "0.0123"
    assert format_number(None) == "-"
    assert format_number(math.inf) == "inf"
    lines = render_table(["name", "value"], [["a", "1"], ["long name", "22"]]).splitlines()
    assert lines[0] == "name       value"
    assert lines[2] == "a              1"
    assert lines[3] == "long name     22"
    with pytest.raises(ValueError):
        render_table(["a", "b"], [["only one"]])


def test_random_binary() -> None:
    values = random_binary(5, 100, np.random.default_rng(1))
    assert len(values) == 5
    assert {len(v.as_py()) for v in values} == {100}
    assert values[0].as_py() != values[1].as_py()


def test_report_find(tiny_report: Report) -> None:
    first = tiny_report.results[0]
    assert tiny_report.find(first.benchmark, first.variant, first.metric) is first
    assert tiny_report.find("no such benchmark", first.variant, first.metric) is None


# -- broker suite ----------------------------------------------------------------

BROKER_BENCHMARKS = {
    bench_broker.PRODUCE,
    bench_broker.LATENCY,
    bench_broker.E2E,
    bench_broker.FETCH,
    bench_broker.SHAPES,
}


def _finite_non_negative(value: float) -> bool:
    """A lakelog figure: always measured (a tiny window may see no produce request answered)."""
    return math.isfinite(value) and value >= 0


def _non_negative_or_nan(value: float) -> bool:
    """A baseline's figure: a baseline slower than a tiny window may have no sample in it."""
    return math.isnan(value) or value >= 0


@pytest.fixture(scope="module")
def broker_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return bench_broker.run("tiny", tmp_path_factory.mktemp("broker-bench"), quiet)


@pytest.mark.integration  # the broker suite starts brokers
def test_broker_suite_covers_every_benchmark(broker_report: Report) -> None:
    cfg = bench_broker.CONFIGS["tiny"]
    assert broker_report.suite == "broker"
    assert {r.benchmark for r in broker_report.results} == BROKER_BENCHMARKS
    produce = [r for r in broker_report.results if r.benchmark == bench_broker.PRODUCE]
    assert len(produce) == 2 * len(cfg.produce_plan)  # records/s and MB/s each
    assert {r.unit for r in produce} == {"records/s", "MB/s"}
    assert [r.metric for r in broker_report.results if r.benchmark == bench_broker.LATENCY] == [
        "p50",
        "p99",
    ]
    e2e = [r for r in broker_report.results if r.benchmark == bench_broker.E2E]
    assert len(e2e) == 2 * len(cfg.e2e_formats)
    fetch = [r for r in broker_report.results if r.benchmark == bench_broker.FETCH]
    assert len(fetch) == 2 * 2 * len(cfg.fetch_formats)  # cache and storage, two units
    assert {r.params["source"] for r in fetch} == {"cache", "storage"}
    assert all(r.params["records"] == cfg.fetch_records for r in fetch)
    shapes = [r for r in broker_report.results if r.benchmark == bench_broker.SHAPES]
    assert [r.params["shape"] for r in shapes] == [p.label for p in cfg.shape_plan]
    fastest = max(r.value for r in shapes)
    for r in shapes:  # each beside the fastest shape, and the goal's shape where it has one
        assert r.baselines[bench_broker.FASTEST] == fastest
        goal = bench_broker.SHAPE_GOALS.get(str(r.params["shape"]))
        if goal is not None:
            (reference,) = [s for s in shapes if s.params["shape"] == goal[0]]
            assert r.baselines[bench_broker.GOAL_SHAPE] == reference.value
            # One round at this size: the round's paired ratio is the ratio of the two rates.
            assert r.params["paired_ratio"] == pytest.approx(r.value / reference.value)
        else:
            assert bench_broker.GOAL_SHAPE not in r.baselines
    assert any(n.startswith("goal v1-json-key >= 0.85x") for n in broker_report.notes)
    # Each shape's commits, timed by the broker phase by phase (lakelog_commit_phase_seconds).
    (keyed,) = [n for n in broker_report.notes if n.startswith("shape v1-json-key: ")]
    assert "ms per commit (stage " in keyed and ", wait " in keyed and ", commit " in keyed


def test_goal_ratios_pair_each_round_with_its_reference_round() -> None:
    assert bench_broker.paired_ratios([90.0, 80.0, 100.0], [100.0, 100.0, 0.0]) == [0.9, 0.8]


@pytest.mark.integration  # the broker suite starts brokers
def test_broker_results_are_well_formed(broker_report: Report) -> None:
    expected = {
        bench_broker.PRODUCE: {bench_broker.EMPTY, bench_broker.RAW, bench_broker.NAIVE},
        bench_broker.LATENCY: {bench_broker.EMPTY, bench_broker.NAIVE},
        bench_broker.E2E: {bench_broker.ACK},
        bench_broker.FETCH: {bench_broker.STATIC, bench_broker.RAW_READ},
        bench_broker.SHAPES: {bench_broker.FASTEST, bench_broker.GOAL_SHAPE},
    }
    for r in broker_report.results:
        assert set(r.baselines) <= expected[r.benchmark], r
        assert bench_broker.FASTEST in r.baselines or r.benchmark != bench_broker.SHAPES
        assert set(r.baselines) == expected[r.benchmark] or r.benchmark == bench_broker.SHAPES
        assert _finite_non_negative(r.value), r
        assert all(_non_negative_or_nan(v) for v in r.baselines.values()), r
        assert r.higher_is_better == (
            r.benchmark in {bench_broker.PRODUCE, bench_broker.FETCH, bench_broker.SHAPES}
        )
        assert r.variant and r.metric and r.unit
    for benchmark in (bench_broker.LATENCY, bench_broker.E2E):
        rows = [r for r in broker_report.results if r.benchmark == benchmark]
        for p50, p99 in zip(rows[::2], rows[1::2], strict=True):
            assert (p50.metric, p99.metric) == ("p50", "p99")
            assert p50.variant == p99.variant
            assert p50.value <= p99.value
    fetch = [r for r in broker_report.results if r.benchmark == bench_broker.FETCH]
    for r in fetch:  # the caught-up consumer is served from memory, the restarted one is not
        expected_hits = 1.0 if r.params["source"] == "cache" else 0.0
        assert r.params["cache_hit_fraction"] == expected_hits, r
    assert any(n.startswith("machine: ") for n in broker_report.notes)
    assert any(n.startswith("goal produce latency") for n in broker_report.notes)
    text = render_report(broker_report)
    for benchmark in BROKER_BENCHMARKS:
        assert f"== {benchmark}" in text
    json.dumps(results_json([broker_report], {"cpu_count": 2}), allow_nan=False)


def test_broker_suite_is_registered() -> None:
    assert SUITES["broker"] == "benchmarks.bench_broker"
    with pytest.raises(ValueError, match="unknown size"):
        bench_broker.run("huge", Path("."), quiet)


def test_stamps_survive_json_and_arrow() -> None:
    cfg = bench_broker.CONFIGS["tiny"]
    values = broker_load.make_values(3, cfg.value_bytes, np.random.default_rng(2), True)
    body = broker_load.json_body(values, 1)
    positions = broker_load.stamp_positions(body)
    assert len(positions) == 3
    sent = broker_load.stamped(body, positions, 123_456_789)
    doc = json.loads(sent)
    assert [r["partition"] for r in doc["records"]] == [1, 1, 1]
    fetched = json.dumps({"records": [{"value": r["value"]} for r in doc["records"]]}).encode()
    assert broker_load.read_stamps(fetched, "json") == [(123_456_789, broker_load.MAGIC)] * 3
    raw = [base64.b64decode(r["value"]) for r in doc["records"]]
    assert all(len(v) == cfg.value_bytes for v in raw)
    assert [v[12:] for v in raw] == [v[12:] for v in values.to_pylist()]  # the rest untouched
    arrow = broker_load.arrow_body(pa.array(raw, pa.binary()), 0)
    assert broker_load.read_stamps(arrow, "arrow") == [(123_456_789, broker_load.MAGIC)] * 3
    stop = broker_load.read_stamps(
        json.dumps({"records": json.loads(bench_broker.stop_body(cfg))["records"]}).encode(),
        "json",
    )
    assert [magic for _, magic in stop] == [broker_load.STOP]


@pytest.mark.parametrize("plan", bench_broker.SHAPE_PLAN, ids=lambda p: p.label)
def test_every_shape_body_takes_the_fast_path(plan: bench_broker.ShapePlan) -> None:
    # The shapes measure the broker's usual path for each API: bodies the fast decoders
    # take, with keys (or partitions, or neither) as the shape says.
    rng = np.random.default_rng(3)
    values = broker_load.make_values(5, 100, rng, False)
    keys = broker_load.make_keys(5, rng) if plan.placement == "key" else None
    partitions = {"partition": [2] * 5, "spread": [0, 1, 2, 3, 0]}.get(plan.placement)
    body = broker_load.shaped_body(plan.api, plan.fmt, values, partitions, keys)
    raw_values = values.to_pylist()
    if plan.api == "v1" and plan.fmt == "arrow":
        batch = codec.parse_arrow_stream(body)
        got_keys, got_values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
        got_partitions = batch.column("partition").to_pylist()
    elif plan.api == "v1":
        decoded = codec.decode_produce_json(body)
        assert decoded is not None
        batch = decoded.batch
        got_keys, got_values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
        got_partitions = batch.column("partition").to_pylist()
    elif plan.api in ("v2-binary", "v2-json"):
        fmt: Literal["base64", "json"] = "base64" if plan.api == "v2-binary" else "json"
        columns = records_models.decode_v2(body, fmt, with_partition=True)
        assert columns is not None
        got_keys, got_values = columns.keys.to_pylist(), columns.values.to_pylist()
        named = columns.partitions.tolist() if columns.partitions is not None else None
        got_partitions = named or [None] * len(columns)
        if fmt == "json":  # embedded JSON: stored as the compact text of what was sent
            raw_values = [
                json.dumps({"data": v.hex()}, separators=(",", ":")).encode() for v in raw_values
            ]
            keys = [json.dumps(k.decode()).encode() for k in keys] if keys is not None else None
    else:
        stream = records_models.decode_v3_stream(body)
        assert stream is not None
        got_keys, got_values = stream.keys.to_pylist(), stream.values.to_pylist()
        got_partitions = stream.partitions
    assert got_values == raw_values
    assert got_keys == (keys if keys is not None else [None] * 5)
    expected: list[int | None] = list(partitions) if partitions is not None else [None] * 5
    assert got_partitions == expected
    if plan.api != "v1":
        assert broker_load.produce_path(plan.api, "t") != "/v1/topics/t/records?acks=all"


def test_refused_records_are_counted_as_errors() -> None:
    ok_v2 = b'{"offsets":[{"partition":0,"offset":1,"error_code":null,"error":null}]}'
    bad_v2 = b'{"offsets":[{"partition":null,"offset":null,"error_code":1,"error":"x"}]}'
    assert broker_load.refused_records("v2-binary", ok_v2, 1) is None
    assert broker_load.refused_records("v2-json", bad_v2, 1) is not None
    assert broker_load.refused_records("v3-stream", b'{"error_code":200}\n' * 2, 2) is None
    assert broker_load.refused_records("v3", b'{"error_code":400}\n', 1) is not None
    assert broker_load.refused_records("v1", b"anything", 9) is None


def test_metrics_parsing_and_commit_stats() -> None:
    text = "\n".join(
        [
            "# HELP lakelog_batch_requests Produce requests per group commit",
            "lakelog_batch_requests_count 4.0",
            "lakelog_batch_requests_sum 10.0",
            "lakelog_batch_records_sum 1000.0",
            'lakelog_commit_seconds_sum{topic="t"} 0.2',
            'lakelog_commit_seconds_count{topic="t"} 4.0',
        ]
    )
    after = broker_admin.parse_metrics(text)
    assert after["lakelog_batch_requests_count"] == 4.0
    assert after['lakelog_commit_seconds_sum{topic="t"}'] == 0.2
    stats = broker_admin.commit_stats({}, after, "t")
    assert stats.commits == 4.0
    assert stats.requests_per_commit == 2.5
    assert stats.records_per_commit == 250.0
    assert stats.commit_ms == pytest.approx(50.0)


def test_process_helpers() -> None:
    own = cpu_times(os.getpid())
    assert own is not None and own.total >= own.main_thread >= 0
    busy = machine_busy_seconds()
    assert busy is not None and busy >= 0
    assert 0 < free_port() < 65536


BURN = "import sys, time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"


@pytest.mark.integration  # starts child processes
def test_process_cpu_counts_its_children_live_and_reaped() -> None:
    """A broker's helper process works for the broker: its CPU is the broker's."""
    before = cpu_times(os.getpid())
    subprocess.run([sys.executable, "-c", BURN], check=True)  # reaped: cutime/cstime
    reaped = cpu_times(os.getpid())
    live = subprocess.Popen(
        [sys.executable, "-c", BURN + "print('done', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert live.stdout is not None and live.stdout.readline() == b"done\n"
        running = cpu_times(os.getpid())
    finally:
        live.communicate(b"")
    assert before is not None and reaped is not None and running is not None
    assert reaped.total - before.total >= 0.25  # 0.3 s burnt, counted in clock ticks
    assert running.total - reaped.total >= 0.25
