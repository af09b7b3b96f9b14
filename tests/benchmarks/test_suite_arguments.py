"""``python -m benchmarks`` takes several suites at once, as the docs' commands do."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import SUITES, parse_args
from benchmarks.bench_broker import PHASES, selected_phases


def test_several_suites_run_in_the_order_given() -> None:
    assert parse_args(["log", "broker", "--size", "tiny"]).suites == ["log", "broker"]


def test_all_names_every_suite() -> None:
    assert "all" in parse_args(["all"]).suites
    assert set(SUITES) >= {"log", "broker"}


def test_an_unknown_suite_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["log", "nope"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_broker_phases_default_to_every_phase() -> None:
    assert parse_args(["broker"]).phases is None
    assert selected_phases(None) == PHASES
    assert selected_phases("") == PHASES


def test_broker_phases_pick_some() -> None:
    assert parse_args(["broker", "--phases", "shapes"]).phases == "shapes"
    assert selected_phases("shapes") == ("shapes",)
    assert selected_phases(" produce , latency ") == ("produce", "latency")


def test_an_unknown_broker_phase_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"unknown broker phase\(s\) nope"):
        selected_phases("shapes,nope")


def test_phases_needing_the_saturation_need_the_produce_phase() -> None:
    with pytest.raises(ValueError, match="latency, e2e need the produce phase"):
        selected_phases("latency,e2e")


def test_an_unknown_phase_on_the_command_line_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["broker", "--phases", "shapes,nope"])
    assert exit_info.value.code == 2
    assert "unknown broker phase(s) nope" in capsys.readouterr().err
