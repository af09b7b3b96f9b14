"""Fetch's ACL rule: READ on each topic; a partition of a topic the principal may not read
is answered TOPIC_AUTHORIZATION_FAILED with no records (and is not read at all)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lakelog.errors import TopicAuthorizationFailedError
from lakelog.security.acl import Operation, ResourceType
from server.kafka.authorization import allowed
from server.kafka.context import RequestContext


def unreadable_topics(ctx: RequestContext, topics: Iterable[str]) -> frozenset[str]:
    """The topics of a Fetch the principal may not READ (each checked once)."""
    return frozenset(
        name
        for name in dict.fromkeys(topics)
        if not allowed(ctx, Operation.READ, ResourceType.TOPIC, name)
    )


def refused_partition(partition: int) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "error_code": TopicAuthorizationFailedError.code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
