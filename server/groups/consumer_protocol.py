"""Kafka's consumer protocol, read where the broker shows what a group's members hold.

Kafka clients choose their group's assignment themselves and send it to the
coordinator as opaque bytes (``ConsumerProtocolAssignment``, a version then the
topics and partitions). Kafka's tools decode those bytes to show each member's
partitions; the HTTP describe of a group does the same. kio's generated schema
reads them; a version newer than kio knows is read as the newest it knows, as
Kafka's own reader does (newer versions only append fields).
"""

from __future__ import annotations

import struct

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment as AssignmentV0,
)
from kio.schema.consumer_protocol_assignment.v1.data import (
    ConsumerProtocolAssignment as AssignmentV1,
)
from kio.schema.consumer_protocol_assignment.v2.data import (
    ConsumerProtocolAssignment as AssignmentV2,
)
from kio.schema.consumer_protocol_assignment.v3.data import (
    ConsumerProtocolAssignment as AssignmentV3,
)
from kio.serial import entity_reader

from lakelog.structs import TopicPartition

_VERSION = struct.Struct(">h")
_READERS = [entity_reader(cls) for cls in (AssignmentV0, AssignmentV1, AssignmentV2, AssignmentV3)]

#: The group protocol type of Kafka's consumers.
CONSUMER = "consumer"


def assigned_partitions(raw: bytes) -> list[TopicPartition] | None:
    """The partitions a consumer-protocol assignment names; None for bytes that are not one
    (another client's own protocol, or damaged)."""
    if len(raw) < _VERSION.size:
        return None
    (version,) = _VERSION.unpack_from(raw)
    if version < 0:
        return None
    read = _READERS[min(version, len(_READERS) - 1)]
    try:
        assignment, _ = read(memoryview(raw), _VERSION.size)
    except Exception:  # kio raises several types for malformed bytes: not a consumer's
        return None
    return sorted(
        TopicPartition(str(t.topic), int(p))
        for t in assignment.assigned_partitions
        for p in t.partitions
    )
