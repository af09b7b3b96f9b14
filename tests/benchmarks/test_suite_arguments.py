"""``python -m benchmarks`` takes several suites at once, as the docs' commands do."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import SUITES, parse_args


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
