"""The closed-loop load's window rule (pure, no broker)."""

from __future__ import annotations

import pytest

from benchmarks.broker_load import in_window

BEGIN, END = 10.0, 11.0


def test_an_answer_inside_the_window_counts_and_is_timed() -> None:
    counted, ms = in_window(10.2, 10.5, BEGIN, END)
    assert counted
    assert ms == pytest.approx(300.0)


def test_a_request_sent_in_the_window_is_timed_however_late_its_answer() -> None:
    counted, ms = in_window(10.5, 12.5, BEGIN, END)
    assert not counted
    assert ms == pytest.approx(2000.0)


def test_a_request_sent_before_the_window_counts_but_is_not_timed() -> None:
    assert in_window(9.5, 10.1, BEGIN, END) == (True, None)


def test_a_window_shorter_than_one_request_still_has_a_sample() -> None:
    """One client sending 1.2 s requests back to back from 9.5 s: the window is 1 s."""
    samples = []
    started = 9.5
    while started < END:
        done = started + 1.2
        samples.append(in_window(started, done, BEGIN, END)[1])
        started = done
    assert [ms for ms in samples if ms is not None] == [pytest.approx(1200.0)]
