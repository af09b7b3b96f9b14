"""Records that fail validation on produce, as records of a dead-letter topic. Pure.

A dead-lettered record keeps its key, value, timestamp and headers byte for byte,
so it can be read back and produced again once fixed; headers appended after its
own say why it was refused and where it was sent. It is partitioned as the
dead-letter topic partitions its key, not by its source partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from lakelog.append import AppendResult
from lakelog.produce_batch import ProduceBatch

#: The headers a dead-lettered record carries after its own.
REASON_HEADER = "lakelog.dead.letter.reason"
TOPIC_HEADER = "lakelog.dead.letter.topic"
PARTITION_HEADER = "lakelog.dead.letter.partition"

#: A dead-lettered record's partition and offset in its produce answer: not in the topic.
NOT_STORED = -1


def dead_letter_batch(rows: ProduceBatch, bad: Mapping[int, str], topic: str) -> ProduceBatch:
    """The records of ``rows`` at the indexes of ``bad`` with its reasons in headers.

    The source partition header is there only for records that named one.
    """
    order = sorted(bad)
    taken = rows.take(order)
    headers = taken.column("headers").to_pylist()
    partitions = taken.column("partition").to_pylist()
    extended = []
    for index, own, partition in zip(order, headers, partitions, strict=True):
        added = [
            {"key": REASON_HEADER, "value": bad[index].encode()},
            {"key": TOPIC_HEADER, "value": topic.encode()},
        ]
        if partition is not None:
            added.append({"key": PARTITION_HEADER, "value": str(partition).encode()})
        extended.append([*(own or []), *added])
    return ProduceBatch.from_columns(
        num_rows=len(order),
        timestamp=taken.column("timestamp"),
        key=taken.column("key"),
        value=taken.column("value"),
        headers=extended,
    )


def merge_results(n: int, good: Sequence[int], kept: AppendResult | None) -> AppendResult:
    """One answer for a request whose records at ``good`` were stored (``kept``) and whose
    others were dead-lettered: those are answered with partition and offset -1."""
    partitions = np.full(n, NOT_STORED, np.int64)
    offsets = np.full(n, NOT_STORED, np.int64)
    stamps = np.full(n, NOT_STORED, np.int64)
    if kept is None:
        return AppendResult(partitions, offsets, stamps, [], NOT_STORED)
    where = np.asarray(good, np.int64)
    kept_partitions, kept_offsets, kept_stamps = kept.arrays()
    partitions[where] = kept_partitions
    offsets[where] = kept_offsets
    stamps[where] = kept_stamps
    return AppendResult(partitions, offsets, stamps, kept.batches, kept.version, kept.duplicate)


def stored_offsets(offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The offsets of a produce answer that name stored records."""
    kept: npt.NDArray[np.int64] = offsets[offsets != NOT_STORED]
    return kept
