"""Replacing live segments by rewritten ones in one Delta commit, offsets unchanged.

The end of compaction, merging, retention and the doctor's repair: "remove these
segments, add those" in one commit, only if every input is still live (appends
only add segments; another job that removed an input makes it commit nothing).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Collection, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.delta.actions import Action
from lakelog.delta.state import TableState
from lakelog.errors import ConcurrentCommitError
from lakelog.offset_index import Segment
from lakelog.segments import SegmentReader, add_action, remove_action, write_segment
from lakelog.storage import join
from lakelog.topic_log import TopicLog
from lakelog.typed_columns import segment_schema

log = logging.getLogger(__name__)


def commit_rewrite(
    topic_log: TopicLog,
    inputs: list[Segment],
    outputs: list[Segment],
    operation: str,
    extra: list[Action] | None = None,
    data_change: bool = True,
) -> int:
    """Replace ``inputs`` by ``outputs`` in one commit, if the inputs are all still live;
    returns the version. On failure unreferenced outputs are deleted, the error raised."""
    input_paths = {s.path for s in inputs}
    now = int(time.time() * 1000)

    def build(state: TableState) -> list[Action]:
        gone = [p for p in input_paths if p not in state.files]
        if gone:
            raise ConcurrentCommitError(
                f"{len(gone)} segment(s) of {topic_log.name!r} were rewritten or removed by "
                "another job while this one ran; nothing was committed, run it again"
            )
        actions: list[Action] = [remove_action(s, now, data_change) for s in inputs]
        actions += [add_action(s, data_change=data_change) for s in outputs]
        actions += extra or []
        return actions

    try:
        return topic_log.committer.commit(build, operation, {"segments": str(len(inputs))})
    except BaseException:
        discard_uncommitted(topic_log, outputs)
        raise


def discard_uncommitted(topic_log: TopicLog, outputs: list[Segment]) -> None:
    """Delete new files a failed commit left behind, unless the commit landed after all.

    A PUT that failed in transit may have been stored, so only files the refreshed log
    does not reference are deleted; if it cannot be read, they are left for vacuum.
    """
    if not outputs:
        return
    try:
        topic_log.refresh()
        live = topic_log.live_paths()
    except Exception:
        log.warning(
            "cannot tell whether the commit to %s landed; leaving %d new segment(s) for vacuum",
            topic_log.name,
            len(outputs),
            exc_info=True,
        )
        return
    for segment in outputs:
        if segment.path not in live:
            topic_log.storage.delete(join(topic_log.table_path, segment.path))


def drop_records(topic_log: TopicLog, doomed: Mapping[str, Collection[int]]) -> int:
    """Rewrite segments without the given offsets, all in one commit; returns its version.

    ``doomed`` maps a live segment's path to offsets it holds. Each new segment covers
    its predecessor's range, so offsets and watermarks are unchanged and a fetch of a
    dropped offset lands on the next record, as after compaction.
    """
    topic_log.refresh()
    live = {s.path: s for p in range(topic_log.num_partitions) for s in topic_log.segments(p)}
    missing = sorted(set(doomed) - set(live))
    if missing:
        raise ConcurrentCommitError(
            f"segment(s) {', '.join(missing)} of {topic_log.name!r} are no longer live "
            "(compacted or removed since they were checked); check again"
        )
    inputs = [live[path] for path in sorted(doomed)]
    reader = SegmentReader(topic_log.storage, topic_log.table_path)
    outputs: list[Segment] = []
    try:
        for segment in inputs:
            typed = topic_log.typed_fields
            rows = reader.read(segment, segment.base_offset, sys.maxsize, typed=typed)
            rows = rows.cast(segment_schema(typed))
            unwanted = pa.array(sorted(doomed[segment.path]), pa.int64())
            kept = rows.filter(pc.invert(pc.is_in(rows.column("offset"), value_set=unwanted)))
            outputs.append(
                write_segment(
                    topic_log.storage,
                    topic_log.table_path,
                    segment.partition,
                    kept,
                    topic_log.compression,
                    base_offset=segment.base_offset,
                    last_offset=segment.last_offset,
                )
            )
    except BaseException:
        for written in outputs:
            topic_log.storage.delete(join(topic_log.table_path, written.path))
        raise
    return commit_rewrite(topic_log, inputs, outputs, "DELETE")
