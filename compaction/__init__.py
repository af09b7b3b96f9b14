"""Spark maintenance jobs: key compaction, retention, segment merging, vacuum, scheduling."""
