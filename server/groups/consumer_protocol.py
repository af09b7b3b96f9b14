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


@functools.cache
def _subscription_readers() -> list[Callable[..., Any]]:
    """kio's readers of ``ConsumerProtocolSubscription``, one per version (as ``_readers``)."""
    from kio.schema.consumer_protocol_subscription.v0 import data as v0
    from kio.schema.consumer_protocol_subscription.v1 import data as v1
    from kio.schema.consumer_protocol_subscription.v2 import data as v2
    from kio.schema.consumer_protocol_subscription.v3 import data as v3
    from kio.serial import entity_reader

    return [entity_reader(v.ConsumerProtocolSubscription) for v in (v0, v1, v2, v3)]


#: The group protocol type of Kafka's consumers.
CONSUMER = "consumer"


def _read(raw: bytes, readers: list[Callable[..., Any]]) -> Any | None:
    """The entity the versioned bytes hold; None for bytes that are not one."""
    if len(raw) < _VERSION.size:
        return None
    (version,) = _VERSION.unpack_from(raw)
    if version < 0:
        return None
    read = readers[min(version, len(readers) - 1)]
    try:
        entity, _ = read(memoryview(raw), _VERSION.size)
    except Exception:  # kio raises several types for malformed bytes: not a consumer's
        return None
    return entity


def subscribed_topics(raw: bytes) -> set[str] | None:
    """The topics a consumer-protocol subscription (a member's JoinGroup metadata) names;
    None for bytes that are not one."""
    subscription = _read(raw, _subscription_readers())
    return None if subscription is None else {str(t) for t in subscription.topics}


def assigned_partitions(raw: bytes) -> list[TopicPartition] | None:
    """The partitions a consumer-protocol assignment names; None for bytes that are not one
    (another client's own protocol, or damaged)."""
    assignment = _read(raw, _readers())
    if assignment is None:
        return None
    return sorted(
        TopicPartition(str(t.topic), int(p))
        for t in assignment.assigned_partitions
        for p in t.partitions
    )
