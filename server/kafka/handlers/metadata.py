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

from lakelog.errors import (
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from lakelog.topic_config import CONSUMER_OFFSETS_TOPIC, INTERNAL_TOPICS
from server.kafka.authorization import allowed, describable, require
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered
from server.kafka.topic_ids import NO_TOPIC_ID, topic_uuid

log = logging.getLogger(__name__)

#: The leader epoch of every partition (Metadata, ListOffsets, OffsetForLeaderEpoch): the
#: leader never changes in Kafka's sense (no replica takes over), so it never grows.
LEADER_EPOCH = 0
#: Kafka's "not requested" value for authorized operations.
OPERATIONS_OMITTED = -(2**31)


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
    by_id = [t.topic_id for t in requested or () if t.name is None and _named_by_id(t)]
    found = await session.cluster.topic_ids.names(by_id) if by_id else {}
    names += [found[i] for i in by_id if i in found]
    # Metadata v0-v3 have no flag: Kafka creates for them whenever the broker allows.
    auto_create = broker.settings.auto_create_topics_enable and bool(
        getattr(body, "allow_auto_topic_creation", True)
    )
    topics = [await topic_answer(ctx, name, auto_create) for name in names]
    topics += [_unknown_id(i) for i in by_id if i not in found]
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
        # v13's top-level error: lakelog never asks a client to rebootstrap.
        error_code=0,
    )


def _named_by_id(topic: Any) -> bool:
    """A requested topic that Metadata v10+ names by its id alone."""
    return getattr(topic, "topic_id", NO_TOPIC_ID) not in (None, NO_TOPIC_ID)


def _unknown_id(topic_id: uuid.UUID) -> dict[str, Any]:
    """A topic requested by an id no topic has: UNKNOWN_TOPIC_ID, as Kafka answers."""
    return {
        "error_code": UnknownTopicIdError.code,
        "name": None,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": OPERATIONS_OMITTED,
    }


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
