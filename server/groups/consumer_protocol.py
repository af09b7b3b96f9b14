"""Kafka's consumer protocol, read where the broker shows what a group's members hold.

Kafka clients choose their group's assignment themselves and send it to the
coordinator as opaque bytes (``ConsumerProtocolAssignment``, a version then the
topics and partitions). Kafka's tools decode those bytes to show each member's
partitions; the HTTP describe of a group does the same. kio's generated schema
reads them; a version newer than kio knows is read as the newest it knows, as
Kafka's own reader does (newer versions only append fields).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any

from lakelog.structs import TopicPartition

_VERSION = struct.Struct(">h")


@functools.cache
def _readers() -> list[Callable[..., Any]]:
    """kio's readers, one per version; imported on first use, as the Kafka codecs are
    (importing kio loads hypothesis, which a broker that fails to start must not)."""
    from kio.schema.consumer_protocol_assignment.v0 import data as v0
    from kio.schema.consumer_protocol_assignment.v1 import data as v1
    from kio.schema.consumer_protocol_assignment.v2 import data as v2
    from kio.schema.consumer_protocol_assignment.v3 import data as v3
    from kio.serial import entity_reader

    return [entity_reader(v.ConsumerProtocolAssignment) for v in (v0, v1, v2, v3)]


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
    readers = _readers()
    read = readers[min(version, len(readers) - 1)]
    try:
        assignment, _ = read(memoryview(raw), _VERSION.size)
    except Exception:  # kio raises several types for malformed bytes: not a consumer's
        return None
    return sorted(
        TopicPartition(str(t.topic), int(p))
        for t in assignment.assigned_partitions
        for p in t.partitions
    )
