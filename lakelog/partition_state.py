"""What the library, the HTTP API and the admin client say of one partition.

One type per answer, shared by all three (the broker's response models hold these very
dataclasses, the admin client reads them back from that JSON); standard library only,
so the client imports them without the storage machinery.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition's offsets and size at one table version."""

    partition: int
    #: The first offset a fetch can return (it moves on with retention).
    log_start_offset: int
    #: The offset the next appended record will get.
    high_watermark: int
    #: Bytes of the partition's live segment files.
    size_bytes: int
    num_segments: int
    #: Records stored (after compaction, fewer than the offsets the segments cover).
    num_records: int


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """Where a partition's records start and end (Kafka's log start offset and high watermark)."""

    partition: int
    log_start_offset: int
    high_watermark: int
