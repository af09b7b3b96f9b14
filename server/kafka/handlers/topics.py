"""CreateTopics, DeleteTopics and CreatePartitions: the catalog's topic admin over Kafka.

Each topic is answered on its own, through the same catalog calls as the HTTP
admin routes; where this differs from Kafka (replica assignments, defaults,
timeouts) is in docs/kafka-protocol.md, "Admin APIs".
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from lakelog.errors import (
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    LakelogError,
    UnknownTopicOrPartitionError,
)
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from server.kafka.authorization import allowed, require
from server.kafka.config_entries import topic_entries
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, check_configs, refuse_repeated, repeated
from server.kafka.topic_ids import NO_TOPIC_ID, topic_uuid, unknown_topic_id

#: The first DeleteTopics version that names topics by id (KIP-516).
TOPIC_IDS_VERSION = 6
#: What a created topic's replication factor is reported as: one replica per partition.
REPORTED_REPLICATION_FACTOR = 1


def check_assignments(replicas: list[list[int]], live: frozenset[int]) -> None:
    """Replica assignments are accepted as Kafka accepts them (each partition's replicas
    distinct, live brokers) and then have no effect: every broker serves every partition
    from the storage root, which keeps the copies. Pure."""
    for index, brokers in enumerate(replicas):
        if not brokers:
            raise InvalidReplicaAssignmentError(f"partition {index} is assigned no replica")
        if len(set(brokers)) != len(brokers):
            raise InvalidReplicaAssignmentError(
                f"partition {index} names a broker twice in its replicas {brokers}"
            )
        unknown = sorted(set(brokers) - live)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"unknown broker(s) {unknown} in the replica assignment of partition {index}; "
                f"the live brokers are {sorted(live)}"
            )


def _live_nodes(ctx: RequestContext) -> frozenset[int]:
    return frozenset(n.node_id for n in ctx.session.cluster.nodes(ctx.session.listener))


def created_partitions(ctx: RequestContext, topic: Any) -> int:
    """A created topic's partition count: ``num_partitions`` (-1: the broker's
    ``num_partitions``), or one per assigned partition, numbered 0 to n-1 (Kafka's rules)."""
    if not topic.assignments:
        default = ctx.broker.settings.num_partitions
        return default if topic.num_partitions == -1 else int(topic.num_partitions)
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise InvalidRequestError(
            "both num_partitions or replication_factor and replica assignments were given; "
            "give one of them (-1 for the others)"
        )
    indexes = sorted(int(a.partition_index) for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise InvalidReplicaAssignmentError(
            f"assigned partitions {indexes} are not the consecutive 0-based sequence Kafka needs"
        )
    check_assignments([list(a.broker_ids) for a in topic.assignments], _live_nodes(ctx))
    return len(indexes)


async def _each_topic(
    entries: Any,
    names: list[str],
    verb: str,
    act: Callable[[Any], Awaitable[dict[str, Any] | None]],
    **fields: Any,
) -> list[dict[str, Any]]:
    """Each topic answered on its own, ``fields`` then what ``act`` returns; a topic named
    twice is INVALID_REQUEST on every entry."""
    twice = repeated(names)
    results = []
    for name, entry in zip(names, entries, strict=True):
        answer: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None, **fields}
        with answered(answer, f"{verb} {name!r}"):
            if name in twice:
                raise refuse_repeated(f"topic {name!r}")
            answer.update(await act(entry) or {})
        results.append(answer)
    return results


async def create_topics(ctx: RequestContext, body: Any) -> Any:
    on_cluster = allowed(ctx, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True)

    async def create(topic: Any) -> dict[str, Any]:
        if not on_cluster:
            require(ctx, Operation.CREATE, ResourceType.TOPIC, topic.name)
        return await _create(ctx, topic, bool(body.validate_only))

    results = await _each_topic(
        body.topics,
        [t.name for t in body.topics],
        "create topic",
        create,
        topic_id=NO_TOPIC_ID,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )
    return ctx.response(topics=results)


async def _create(ctx: RequestContext, topic: Any, validate_only: bool) -> dict[str, Any]:
    catalog = ctx.broker.catalog
    partitions = created_partitions(ctx, topic)
    replication_factor = int(topic.replication_factor)
    check_configs(topic.configs)
    # A null value leaves the config at its default.
    configs = {e.name: e.value for e in topic.configs if e.value is not None}
    if validate_only:
        config = await asyncio.to_thread(
            catalog.check_new_topic, topic.name, partitions, configs, replication_factor
        )
        topic_id = NO_TOPIC_ID
    else:
        created = await asyncio.to_thread(
            catalog.create_topic, topic.name, partitions, configs, replication_factor
        )
        config, topic_id = created.config, topic_uuid(created.topic_id)
    return {
        "topic_id": topic_id,
        "num_partitions": partitions,
        "replication_factor": REPORTED_REPLICATION_FACTOR,
        "configs": topic_entries(config),
    }


@dataclass(frozen=True)
class _Deletion:
    """A topic DeleteTopics names: by name, or (v6) by id, ``name`` then the id's topic."""

    name: str | None
    topic_id: uuid.UUID
    refusal: LakelogError | None = None


async def delete_topics(ctx: RequestContext, body: Any) -> Any:
    """v6 names each topic by name or by id, never both (INVALID_REQUEST, as Kafka
    answers); an id no topic has is UNKNOWN_TOPIC_ID. Answers carry the name and id."""
    broker = ctx.broker
    topic_ids = ctx.session.cluster.topic_ids

    async def delete(entry: _Deletion) -> dict[str, Any]:
        if entry.refusal is not None:
            raise entry.refusal
        if entry.name is None:
            raise unknown_topic_id(entry.topic_id)
        require(ctx, Operation.DELETE, ResourceType.TOPIC, entry.name)
        topic_id = entry.topic_id
        if ctx.version >= TOPIC_IDS_VERSION and topic_id == NO_TOPIC_ID:
            # The catalog's refusal (internal topic, no such topic) is the answer.
            with contextlib.suppress(UnknownTopicOrPartitionError):
                topic_id = await topic_ids.topic_id(entry.name)
        await asyncio.to_thread(broker.catalog.delete_topic, entry.name)
        broker.cache.forget(entry.name)
        return {"topic_id": topic_id}

    if ctx.version < TOPIC_IDS_VERSION:
        entries = [_Deletion(name, NO_TOPIC_ID) for name in body.topic_names]
    else:
        entries = await _deletions(ctx, body.topics)
    keys = [e.name or str(e.topic_id) for e in entries]
    results = await _each_topic(entries, keys, "delete topic", delete, topic_id=NO_TOPIC_ID)
    for result, entry in zip(results, entries, strict=True):
        result["name"] = entry.name
        if result["topic_id"] == NO_TOPIC_ID:
            result["topic_id"] = entry.topic_id
    return ctx.response(responses=results)


async def _deletions(ctx: RequestContext, topics: Any) -> list[_Deletion]:
    """The topics of a v6 request, an id's by the name of the topic that has it."""
    by_id = [t.topic_id for t in topics if t.name is None and _has_id(t)]
    found = await ctx.session.cluster.topic_ids.names(by_id) if by_id else {}
    entries = []
    for t in topics:
        if t.name is not None and _has_id(t):
            both = InvalidRequestError("give a topic's name or its id, not both")
            entries.append(_Deletion(t.name, t.topic_id, both))
        elif t.name is None and not _has_id(t):
            neither = InvalidRequestError("a topic to delete needs its name or its id")
            entries.append(_Deletion(None, NO_TOPIC_ID, neither))
        elif t.name is None:
            entries.append(_Deletion(found.get(t.topic_id), t.topic_id))
        else:
            entries.append(_Deletion(t.name, NO_TOPIC_ID))
    return entries


def _has_id(topic: Any) -> bool:
    """Does the request give the topic's id? (kio reads the zero UUID, "none", as None.)"""
    return topic.topic_id not in (None, NO_TOPIC_ID)


async def create_partitions(ctx: RequestContext, body: Any) -> Any:
    catalog = ctx.broker.catalog

    async def add(topic: Any) -> None:
        require(ctx, Operation.ALTER, ResourceType.TOPIC, topic.name)
        if topic.assignments:
            current = (await asyncio.to_thread(catalog.describe_topic, topic.name)).partitions
            added = int(topic.count) - len(current)
            if added != len(topic.assignments):
                raise InvalidReplicaAssignmentError(
                    f"the partitions grow by {added} but {len(topic.assignments)} "
                    "assignments were given"
                )
            check_assignments([list(a.broker_ids) for a in topic.assignments], _live_nodes(ctx))
        if body.validate_only:
            await asyncio.to_thread(catalog.check_create_partitions, topic.name, topic.count)
        else:
            await asyncio.to_thread(catalog.create_partitions, topic.name, int(topic.count))

    names = [t.name for t in body.topics]
    results = await _each_topic(body.topics, names, "create partitions of", add)
    return ctx.response(results=results)
