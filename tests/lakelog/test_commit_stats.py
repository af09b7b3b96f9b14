"""A writer's commit counters: lost races and renumbered segments, made to happen on purpose.

Two catalogs on one root are two writers; one opened before the other's
append holds a stale snapshot, so its next commit loses the version it wants
(local + S3).
"""

from __future__ import annotations

from collections.abc import Callable

from lakelog import Catalog, CommitStats, Record


def test_lost_races_and_renumbered_segments_are_counted(
    make_catalog: Callable[..., Catalog],
) -> None:
    first = make_catalog()
    first.create_topic("t", 2)
    winner = first.topic("t")
    renumbering = make_catalog().topic("t")
    recommitting = make_catalog().topic("t")
    assert winner.commit_stats == CommitStats()

    winner.append([Record(b"w0", partition=0)])
    # Its partition moved on: the segment is written again at the new offset.
    assert renumbering.append([Record(b"r0", partition=0)]).offsets == [1]
    # Another partition moved on: the same segment is committed at the next version.
    assert recommitting.append([Record(b"c1", partition=1)]).offsets == [0]

    assert winner.commit_stats == CommitStats(commits=1)
    assert renumbering.commit_stats == CommitStats(
        commits=1, lost_races=1, retries=1, renumbered_segments=1
    )
    assert recommitting.commit_stats == CommitStats(commits=1, lost_races=1, retries=1)
