"""CreateTopics, DeleteTopics and CreatePartitions: the catalog's topic admin over Kafka.

Each topic of a request is answered on its own (error code and message per
topic), through the same catalog calls as the HTTP admin routes, so both
front ends accept and refuse the same things. ``validate_only`` runs every
check of the real change against the root's current state and writes
nothing.

Where lakelog differs from Kafka:

* Brokers own no partitions (the storage root keeps the data and its
  copies), so replica ``assignments`` are refused with INVALID_REQUEST. A
  replication factor of -1 or any positive number is accepted, as over HTTP;
  the answer (v5+) reports 1, the one replica Metadata shows per partition.
* ``num_partitions`` -1 means 1, the HTTP default (Kafka's ``num.partitions``).
* The request's timeout is not waited on: a creation or deletion is done,
  durably, when the answer is sent.

ACLs are Kafka's (CreateTopics: CREATE on the cluster or else on the topic); a
refused topic is answered TOPIC_AUTHORIZATION_FAILED and left unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lakelog.errors import InvalidRequestError
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from server.kafka.authorization import allowed, require
from server.kafka.config_entries import topic_entries
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, check_configs, refuse_repeated, repeated
from server.kafka.handlers.metadata import NO_TOPIC_ID, topic_uuid

#: Partitions of a topic created with ``num_partitions`` -1 (the HTTP API's default).
DEFAULT_PARTITIONS = 1
#: What a created topic's replication factor is reported as: one replica per partition.
REPORTED_REPLICATION_FACTOR = 1
NO_ASSIGNMENTS = (
    "replica assignments cannot be used: lakelog brokers own no partitions "
    "(the storage root keeps the copies)"
)


async def create_topics(ctx: RequestContext, body: Any) -> Any:
    twice = repeated(t.name for t in body.topics)
    on_cluster = allowed(ctx, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True)
    results = []
    for topic in body.topics:
        answer: dict[str, Any] = {
            "name": topic.name,
            "topic_id": NO_TOPIC_ID,
            "error_code": 0,
            "error_message": None,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": None,
        }
        with answered(answer, f"create topic {topic.name!r}"):
            if topic.name in twice:
                raise refuse_repeated(f"topic {topic.name!r}")
            if not on_cluster:
                require(ctx, Operation.CREATE, ResourceType.TOPIC, topic.name)
            answer.update(await _create(ctx, topic, bool(body.validate_only)))
        results.append(answer)
    return ctx.response(topics=results)


async def _create(ctx: RequestContext, topic: Any, validate_only: bool) -> dict[str, Any]:
    catalog = ctx.broker.catalog
    if topic.assignments:
        raise InvalidRequestError(f"{NO_ASSIGNMENTS}; give num_partitions instead")
    partitions = DEFAULT_PARTITIONS if topic.num_partitions == -1 else int(topic.num_partitions)
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


async def delete_topics(ctx: RequestContext, body: Any) -> Any:
    broker = ctx.broker
    twice = repeated(body.topic_names)
    results = []
    for name in body.topic_names:
        answer: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        with answered(answer, f"delete topic {name!r}"):
            if name in twice:
                raise refuse_repeated(f"topic {name!r}")
            require(ctx, Operation.DELETE, ResourceType.TOPIC, name)
            await asyncio.to_thread(broker.catalog.delete_topic, name)
            broker.cache.forget(name)
        results.append(answer)
    return ctx.response(responses=results)


async def create_partitions(ctx: RequestContext, body: Any) -> Any:
    catalog = ctx.broker.catalog
    twice = repeated(t.name for t in body.topics)
    results = []
    for topic in body.topics:
        answer: dict[str, Any] = {"name": topic.name, "error_code": 0, "error_message": None}
        with answered(answer, f"create partitions of {topic.name!r}"):
            if topic.name in twice:
                raise refuse_repeated(f"topic {topic.name!r}")
            require(ctx, Operation.ALTER, ResourceType.TOPIC, topic.name)
            if topic.assignments:
                raise InvalidRequestError(f"{NO_ASSIGNMENTS}; give the new count only")
            if body.validate_only:
                await asyncio.to_thread(catalog.check_create_partitions, topic.name, topic.count)
            else:
                await asyncio.to_thread(catalog.create_partitions, topic.name, int(topic.count))
        results.append(answer)
    return ctx.response(results=results)
