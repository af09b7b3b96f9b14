"""DeleteRecords: move partitions' log start offsets forward, durably, in one Delta commit.

Kafka's rule: records before the new log start offset are unreadable at once
(fetches below it are OFFSET_OUT_OF_RANGE, ``earliest`` is the new start), and
their storage goes later. Here the new start is an app transaction of the topic's
table (``lakelog.log_start.<partition>``), so every broker and every reader of
the table sees it with the commit; the segments wholly below it are removed in
the same commit, and one it cuts through stays until retention or a later
deletion removes it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from lakelog.delta.actions import Action, Txn
from lakelog.delta.state import TableState
from lakelog.delta.writer_rules import check_data_removable
from lakelog.errors import OffsetOutOfRangeError, PolicyViolationError
from lakelog.offset_index import segment_from_add
from lakelog.segments import remove_action
from lakelog.topic_config import TopicConfig
from lakelog.topic_log import TopicLog
from lakelog.topic_table import log_start_txn, partition_txn

#: DeleteRecords' offset meaning "up to the high watermark" (Kafka's HIGH_WATERMARK).
HIGH_WATERMARK = -1


def target_offset(state: TableState, partition: int, offset: int) -> int:
    """The log start offset a deletion ``up to offset`` asks for, checked against the
    partition's high watermark in ``state`` (OFFSET_OUT_OF_RANGE naming the valid range)."""
    hwm = state.txn_version(partition_txn(partition))
    wanted = hwm if offset == HIGH_WATERMARK else offset
    if wanted < 0 or wanted > hwm:
        raise OffsetOutOfRangeError(
            f"cannot delete records of partition {partition} up to offset {offset}: "
            f"the offset must be between 0 and the high watermark {hwm} (or -1 for it)",
            high_watermark=hwm,
        )
    return wanted


def check_policy(topic: str, config: TopicConfig) -> None:
    """Records can be deleted only where Kafka's cleanup.policy deletes (POLICY_VIOLATION)."""
    if "delete" not in config.cleanup_policy:
        raise PolicyViolationError(
            f"records of topic {topic!r} cannot be deleted: its cleanup.policy is "
            f"{config.get('cleanup.policy')!r}, and DeleteRecords needs 'delete' in it"
        )


def deletion_actions(state: TableState, starts: Mapping[int, int], now_ms: int) -> list[Action]:
    """The actions that move each partition's log start to ``starts[partition]`` (never
    back): the new start, and the removal of every segment wholly below it. Pure."""
    actions: list[Action] = []
    moved: dict[int, int] = {}
    for partition, start in starts.items():
        if start > state.txn_version(log_start_txn(partition)):
            actions.append(Txn(log_start_txn(partition), start, now_ms))
            moved[partition] = start
    for add in state.files.values():
        segment = segment_from_add(add)
        new_start = moved.get(segment.partition)
        if new_start is not None and segment.end_offset <= new_start:
            actions.append(remove_action(segment, now_ms))
    return actions


def delete_records(topic_log: TopicLog, offsets: Mapping[int, int]) -> int | None:
    """Delete each partition's records before ``offsets[partition]`` (-1: all of them) in one
    commit; the new table version, or None when no log start had to move.

    Every offset is checked before anything is written, and again against the latest
    state if another writer commits first; one out of range fails the whole call.
    """
    check_policy(topic_log.name, topic_log.config)
    for partition in offsets:
        topic_log.check_partition(partition)
    now = int(time.time() * 1000)
    nothing_to_do = False
    committer = topic_log.committer

    def build(state: TableState) -> list[Action]:
        nonlocal nothing_to_do
        starts = {p: target_offset(state, p, offset) for p, offset in offsets.items()}
        actions = deletion_actions(state, starts, now)
        nothing_to_do = not actions
        if actions:  # a new log start removes data even where no file is removed
            check_data_removable(state, topic_log.name, committer.table_uri)
        return actions

    with committer.state_lock:
        build(committer.state)  # refuses a bad offset before the commit is attempted
    if nothing_to_do:
        return None
    return committer.commit(
        build, "DELETE RECORDS", {"partitions": ",".join(str(p) for p in sorted(offsets))}
    )
