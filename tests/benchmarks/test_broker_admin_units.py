"""Commit figures the broker benchmark reads from two /metrics snapshots (pure logic)."""

from __future__ import annotations

from benchmarks.broker_admin import commit_stats

BEFORE = {
    "lakelog_batch_requests_count": 10.0,
    "lakelog_batch_requests_sum": 30.0,
    "lakelog_batch_records_sum": 3_000.0,
    'lakelog_commit_seconds_count{topic="t"}': 10.0,
    'lakelog_commit_seconds_sum{topic="t"}': 0.5,
}


def test_commit_figures_are_means_over_the_commits_between_the_snapshots() -> None:
    after = {
        "lakelog_batch_requests_count": 14.0,
        "lakelog_batch_requests_sum": 46.0,
        "lakelog_batch_records_sum": 19_000.0,
        'lakelog_commit_seconds_count{topic="t"}': 14.0,
        'lakelog_commit_seconds_sum{topic="t"}': 0.62,
        'lakelog_commit_phase_seconds_count{phase="stage",topic="t"}': 4.0,
        'lakelog_commit_phase_seconds_sum{phase="stage",topic="t"}': 0.08,
        'lakelog_commit_phase_seconds_count{phase="wait",topic="t"}': 4.0,
        'lakelog_commit_phase_seconds_sum{phase="wait",topic="t"}': 0.0,
        'lakelog_commit_phase_seconds_count{phase="commit",topic="t"}': 4.0,
        'lakelog_commit_phase_seconds_sum{phase="commit",topic="t"}': 0.04,
    }
    stats = commit_stats(BEFORE, after, "t")
    assert (stats.commits, stats.requests_per_commit, stats.records_per_commit) == (4, 4, 4_000)
    assert round(stats.commit_ms, 6) == 30.0
    assert {k: round(v, 6) for k, v in stats.phase_ms.items()} == {
        "stage": 20.0,
        "wait": 0.0,
        "commit": 10.0,
    }
    assert stats.commit_time() == "30.0 ms per commit (stage 20.0, wait 0.0, commit 10.0 ms)"


def test_a_broker_that_times_no_phases_shows_the_commit_time_alone() -> None:
    stats = commit_stats(BEFORE, BEFORE, "t")
    assert stats.phase_ms == {} and stats.commit_ms == 0.0
    assert stats.commit_time() == "0.0 ms per commit"
