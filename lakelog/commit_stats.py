"""What one writer's commits to a topic went through, counted since the topic was opened.

Writers share a table with no coordinator, so contention shows only in the commit
loop; these counts let an operator see it and tests prove the paths handling it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class CommitStats:
    """Counts only grow; a snapshot is immutable (``TopicLog.commit_stats``)."""

    #: Table versions this writer committed.
    commits: int = 0
    #: Attempts that lost their version to another writer (found taken at once, or found
    #: to hold another writer's commit after a PUT that reported an error).
    lost_races: int = 0
    #: Commit attempts made again after a lost race. Fewer than ``lost_races`` by the
    #: commits given up at the commit timeout (CONCURRENT_TRANSACTIONS to the caller); an
    #: ambiguous PUT is never retried here: the caller's retry finds its outcome.
    retries: int = 0
    #: Segments written again at new offsets because their partition moved on after
    #: they were written (another writer won a version, or an earlier staged append
    #: of this writer failed).
    renumbered_segments: int = 0
    #: Commits whose PUT reported an error or a conflict although it had landed,
    #: recognised by their commit id instead of being written again.
    recognised_after_error: int = 0
    #: Retried idempotent requests answered with their first offsets from the memory of
    #: each producer's last batches (``lakelog.append.producer_state``).
    duplicates_from_memory: int = 0
    #: Retried idempotent requests whose first offsets were looked up in the segments.
    duplicates_from_log: int = 0
    #: Segments read for those lookups: each is a store round trip on an object store.
    duplicate_segment_reads: int = 0

    def __add__(self, other: CommitStats) -> CommitStats:
        """Counts of two writers (or two opens of one topic) together."""
        return CommitStats(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(CommitStats))
        )
