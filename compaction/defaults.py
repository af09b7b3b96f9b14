"""Defaults shared by the jobs, the CLI and the scheduler (no heavy imports here).

The CLI registers its commands whenever ``lakelog`` starts, so what it needs
to build its parsers must not pull in Spark or delta-rs.
"""

from __future__ import annotations

#: Every job, in the order ``maintain`` runs them: removing expired segments
#: first means compaction and merging do not rewrite data about to be dropped;
#: vacuum last deletes what the others removed once the grace period is over.
JOBS = ("retention", "compact", "merge", "vacuum")

#: How long files removed from a table are kept for readers of older snapshots
#: (Delta's own default retention).
DEFAULT_GRACE_MS = 7 * 24 * 3600 * 1000

#: Minimum age before a never-committed file is deleted: longer than any
#: append or maintenance job can take between writing a file and committing it.
DEFAULT_ORPHAN_GRACE_MS = 24 * 3600 * 1000
