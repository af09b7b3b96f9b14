"""The description of one partition, as the library, the HTTP API and the admin client see it.

One type for all three: ``TopicLog.partition_state`` builds it, the broker
answers it as JSON (``server/models.py``'s ``PartitionInfo`` has exactly
these fields) and the admin client reads it back from that JSON. Standard
library only, so the client can import it without the storage machinery.
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
