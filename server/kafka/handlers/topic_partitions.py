"""DescribeTopicPartitions (KIP-966): Metadata's topic answers, a page of partitions at a time.

Each topic is answered as Metadata answers it (the same leaders, one replica,
always in sync, no eligible leader replicas to name); the paging is Kafka's:
topics in name order from the cursor's, at most ``response_partition_limit``
partitions (capped at Kafka's default ``max.request.partition.size.limit``),
and a next cursor naming the first partition left out.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lakelog.errors import InvalidRequestError, TopicAuthorizationFailedError
from lakelog.security.acl import Operation, ResourceType
from server.kafka.authorization import allowed, denied, describable
from server.kafka.context import RequestContext
from server.kafka.handlers.metadata import OPERATIONS_OMITTED, topic_answer
from server.kafka.topic_ids import NO_TOPIC_ID

#: Kafka's ``max.request.partition.size.limit`` default: the most partitions one answer holds.
MAX_PARTITIONS = 2000


def window(count: int, start: int, remaining: int) -> tuple[range, int | None]:
    """Which of a topic's ``count`` partitions fit from ``start`` in ``remaining``, and the
    first one left out (None: the topic is complete). Kafka's rule."""
    upper = min(count, start + remaining)
    return range(start, upper), upper if upper < count else None


async def describe_topic_partitions(ctx: RequestContext, body: Any) -> Any:
    cursor = body.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every = not body.topics
    refused: list[str] = []
    if every:
        names = await asyncio.to_thread(ctx.broker.catalog.list_topics)
        names = describable(ctx, ResourceType.TOPIC, [n for n in names if n >= cursor_topic])
    else:
        requested = list(dict.fromkeys(t.name for t in body.topics))
        names = [n for n in requested if n >= cursor_topic]
        if cursor is not None and cursor_topic not in names:
            problem = InvalidRequestError(
                f"the topic list must contain the cursor's topic {cursor_topic!r}"
            )
            return ctx.response(topics=[_refused(n, problem.code) for n in requested])
        hidden = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, names)
        refused = [n for n in names if n in hidden]
        names = [n for n in names if n not in hidden]
    # The cursor's partition counts only while its topic is describable (Kafka's rule).
    cursor_start = (
        int(cursor.partition_index)
        if cursor_topic
        and allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, cursor_topic, quiet=True)
        else 0
    )
    remaining = min(MAX_PARTITIONS, int(body.response_partition_limit))
    topics: list[dict[str, Any]] = []
    next_cursor = None
    for name in sorted(names):
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        if remaining < 0:
            continue
        answer = await topic_answer(ctx, name, False)
        if answer["error_code"]:
            # Listing every topic leaves out one that went away meanwhile.
            if not every:
                topics.append(answer)
            continue
        partitions = answer["partitions"]
        start = cursor_start if name == cursor_topic else 0
        chosen, next_index = window(len(partitions), start, remaining)
        answer["partitions"] = [
            {**partitions[p], "eligible_leader_replicas": [], "last_known_elr": []} for p in chosen
        ]
        topics.append(answer)
        if next_index is not None:
            next_cursor = {"topic_name": name, "partition_index": next_index}
            break
        remaining -= len(chosen)
    topics += [_refused(n, TopicAuthorizationFailedError.code) for n in refused]
    return ctx.response(topics=topics, next_cursor=next_cursor)


def _refused(name: str, code: int) -> dict[str, Any]:
    """A topic answered with an error only: no id, no partitions (Kafka discloses nothing)."""
    return {
        "error_code": code,
        "name": name,
        "topic_id": NO_TOPIC_ID,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": OPERATIONS_OMITTED,
    }
