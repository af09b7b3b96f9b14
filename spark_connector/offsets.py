"""Turning offset options into concrete offsets per partition (pure; lookups are passed in).

Semantics are Spark's Kafka source: ``earliest`` is the log start offset,
``latest`` the high watermark (``-2``/``-1`` in per-partition JSON), and a
timestamp means the first offset whose record is at or after it. Partitions
the JSON does not name take the default.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from lakelog.errors import InvalidConfigError, OffsetOutOfRangeError
from lakelog.structs import TopicPartition
from spark_connector.options import (
    EARLIEST,
    LATEST,
    Bound,
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetSpec,
    PartitionTimestamps,
    ReadOptions,
    SpecificOffsets,
    option_error,
)
from spark_connector.planning import PartitionSnapshot

log = logging.getLogger(__name__)

#: (topic, partition, timestamp_ms) -> first offset at or after it, None if there is none.
TimestampLookup = Callable[[str, int, int], int | None]


def resolve(
    bound: Bound | None,
    default: OffsetSpec,
    snapshots: Sequence[PartitionSnapshot],
    lookup: TimestampLookup,
    *,
    is_start: bool,
    timestamp_strategy: str = "error",
) -> dict[TopicPartition, int]:
    """One offset per snapshot; out-of-range values are left to ``check_start``/``check_end``."""
    spec = bound.spec if bound is not None else default
    named: dict[TopicPartition, int] = {}
    if isinstance(spec, SpecificOffsets | PartitionTimestamps):
        assert bound is not None
        named = spec.as_dict()
        if unknown := sorted(set(named) - {s.key for s in snapshots}):
            listed = ", ".join(f"{t}-{p}" for t, p in unknown)
            raise option_error(
                bound.option, f"names partitions that are not subscribed or do not exist: {listed}"
            )
    out: dict[TopicPartition, int] = {}
    for snap in snapshots:
        edges = {EARLIEST: snap.log_start, LATEST: snap.high_watermark}
        fallback = edges[EARLIEST if isinstance(default, Earliest) else LATEST]
        if isinstance(spec, Earliest | Latest):
            out[snap.key] = edges[EARLIEST if isinstance(spec, Earliest) else LATEST]
            continue
        if isinstance(spec, SpecificOffsets):
            value = named.get(snap.key)
            out[snap.key] = fallback if value is None else edges.get(value, value)
            continue
        assert bound is not None
        stamp = spec.timestamp_ms if isinstance(spec, GlobalTimestamp) else named.get(snap.key)
        found = None if stamp is None else lookup(snap.topic, snap.partition, stamp)
        if stamp is None:
            out[snap.key] = fallback
        elif found is not None:
            out[snap.key] = found
        elif not is_start or timestamp_strategy == "latest":
            out[snap.key] = snap.high_watermark
        else:
            raise option_error(
                bound.option,
                f"no record of {snap.topic}-{snap.partition} has a timestamp at or after "
                f"{stamp}; set startingOffsetsByTimestampStrategy=latest to start at the "
                "end of such partitions instead",
            )
    return out


def _check_not_past_end(option: str, offset: int, snap: PartitionSnapshot) -> None:
    if offset > snap.high_watermark:
        raise OffsetOutOfRangeError(
            f"option '{option}': offset {offset} of {snap.topic}-{snap.partition} is past "
            f"its end (high watermark {snap.high_watermark})"
        )


def start_offsets(
    opts: ReadOptions, snapshots: Sequence[PartitionSnapshot], lookup: TimestampLookup
) -> dict[TopicPartition, int]:
    """Where a batch or stream starts in each partition, resolved and checked."""
    starts = resolve(
        opts.starting,
        opts.default_start,
        snapshots,
        lookup,
        is_start=True,
        timestamp_strategy=opts.timestamp_strategy,
    )
    option = opts.starting.option if opts.starting else "startingOffsets"
    return check_start(starts, snapshots, option, opts.fail_on_data_loss)


def check_start(
    starts: Mapping[TopicPartition, int],
    snapshots: Sequence[PartitionSnapshot],
    option: str,
    fail_on_data_loss: bool,
) -> dict[TopicPartition, int]:
    """Starts within each partition's log; below the log start is data loss (fail or skip)."""
    out = dict(starts)
    for snap in snapshots:
        start = starts[snap.key]
        _check_not_past_end(option, start, snap)
        if start < snap.log_start:
            out[snap.key] = data_loss(
                snap, start, fail_on_data_loss, f"option '{option}' asks for offset {start}"
            )
    return out


def data_loss(snap: PartitionSnapshot, wanted: int, fail: bool, context: str) -> int:
    """The offset to continue from when ``wanted`` is below the log start (or fail)."""
    message = (
        f"{context} of {snap.topic}-{snap.partition}, but offsets {wanted}..{snap.log_start - 1} "
        f"are no longer in the log (log start offset {snap.log_start}: removed by retention)"
    )
    if fail:
        raise OffsetOutOfRangeError(
            f"{message}. Some data may have been lost; set failOnDataLoss=false to skip to "
            "the log start instead of failing"
        )
    log.warning("%s; skipping to %d (failOnDataLoss=false)", message, snap.log_start)
    return snap.log_start


def check_end(
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    snapshots: Sequence[PartitionSnapshot],
    option: str,
) -> None:
    """Ends within each partition's log and not before its start."""
    for snap in snapshots:
        end = ends[snap.key]
        _check_not_past_end(option, end, snap)
        if end < starts[snap.key]:
            raise InvalidConfigError(
                f"option '{option}': {snap.topic}-{snap.partition} would end at {end}, before "
                f"its start offset {starts[snap.key]}"
            )
