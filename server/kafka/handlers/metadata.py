"""Metadata: the live brokers on the client's listener, and each topic's partitions and leaders.

A topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether or
not it exists. ``__consumer_offsets`` is created on the first request naming
it, as in Kafka, so a producer learns at once that it may not write there.
A missing topic is created when the broker's ``auto_create_topics_enable`` and
the request's ``allow_auto_topic_creation`` are both on and the principal may
CREATE it (Kafka's rule); it is answered with its partitions at once, since
its table is durable before the answer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from lakelog.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from lakelog.topic_config import CONSUMER_OFFSETS_TOPIC, INTERNAL_TOPICS
from server.kafka.authorization import allowed, describable, require
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered

log = logging.getLogger(__name__)

#: The leader epoch of every partition (Metadata, ListOffsets, OffsetForLeaderEpoch): the
#: leader never changes in Kafka's sense (no replica takes over), so it never grows.
LEADER_EPOCH = 0
#: Kafka's "not requested" value for authorized operations.
OPERATIONS_OMITTED = -(2**31)
NO_TOPIC_ID = uuid.UUID(int=0)


def topic_uuid(topic_id: str) -> uuid.UUID:
    """A topic's id as the UUID Kafka clients expect; lakelog ids that are not UUIDs map stably."""
    try:
        return uuid.UUID(topic_id)
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"lakelog-topic:{topic_id}")


async def metadata(ctx: RequestContext, body: Any) -> Any:
    session = ctx.session
    broker = session.broker
    requested = body.topics
    if requested is None or (ctx.version == 0 and not requested):
        names = describable(
            ctx, ResourceType.TOPIC, await asyncio.to_thread(broker.catalog.list_topics)
        )
    else:
        names = [t.name for t in requested if t.name is not None]
    # Metadata v0-v3 have no flag: Kafka creates for them whenever the broker allows.
    auto_create = broker.settings.auto_create_topics_enable and bool(
        getattr(body, "allow_auto_topic_creation", True)
    )
    topics = [await topic_answer(ctx, name, auto_create) for name in names]
    cluster = session.cluster
    return ctx.response(
        brokers=[
            {"node_id": n.node_id, "host": n.host, "port": n.port, "rack": None}
            for n in cluster.nodes(session.listener)
        ],
        cluster_id=broker.settings.cluster_id,
        controller_id=cluster.controller_id(),
        topics=topics,
        cluster_authorized_operations=OPERATIONS_OMITTED,
    )


async def topic_answer(ctx: RequestContext, name: str, auto_create: bool) -> dict[str, Any]:
    session = ctx.session
    answer: dict[str, Any] = {
        "error_code": 0,
        "name": name,
        "topic_id": NO_TOPIC_ID,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [],
        "topic_authorized_operations": OPERATIONS_OMITTED,
    }
    topic_log = None
    with answered(answer, f"metadata of topic {name!r}"):
        require(ctx, Operation.DESCRIBE, ResourceType.TOPIC, name)
        if name == CONSUMER_OFFSETS_TOPIC:
            await asyncio.to_thread(session.broker.groups.offsets.table, True)
        try:
            topic_log = await session.broker.topic(name)
        except UnknownTopicOrPartitionError:
            if not auto_create:
                raise
            await _create(ctx, name)
            topic_log = await session.broker.topic(name)
    if topic_log is None:
        return answer
    leaders = [
        session.cluster.leader(name, p, session.listener) for p in range(topic_log.num_partitions)
    ]
    answer["topic_id"] = topic_uuid(topic_log.topic_id)
    answer["partitions"] = [
        {
            "error_code": 0,
            "partition_index": p,
            "leader_id": leader,
            "leader_epoch": LEADER_EPOCH,
            "replica_nodes": [leader],
            "isr_nodes": [leader],
            "offline_replicas": [],
        }
        for p, leader in enumerate(leaders)
    ]
    return answer


async def _create(ctx: RequestContext, name: str) -> None:
    """Create ``name`` with the broker's defaults; a topic another request created first is
    as good (TOPIC_AUTHORIZATION_FAILED without CREATE, INVALID_TOPIC_EXCEPTION for a bad
    name: the errors Kafka answers)."""
    if not allowed(ctx, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True):
        require(ctx, Operation.CREATE, ResourceType.TOPIC, name)
    catalog = ctx.broker.catalog
    try:
        await asyncio.to_thread(catalog.create_topic, name, ctx.broker.settings.num_partitions)
    except TopicAlreadyExistsError:
        log.debug("auto-create of topic %r: another request created it first", name)
