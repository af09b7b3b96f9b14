"""Kafka REST Proxy API v3: topics, partitions, replicas and topic configs under ``/v3``.

Decisions:

* Creating a topic that exists answers HTTP 400, as the REST Proxy does;
  ``validate_only`` checks everything and answers 200 without creating.
  ``replicas_assignments`` is refused (400): lakelog places no replicas.
* Listings show only what the caller may DESCRIBE, as ``/v1/topics`` does; the
  other routes check their ACL before anything happens.
* No reassignment is ever in progress (see ``v3_resources``): the listings
  are empty and one partition's reassignment is 404, as the REST Proxy
  answers for a partition that is not being moved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from fastapi import Request
from fastapi.responses import Response

from lakelog.catalog import TopicDescription
from lakelog.errors import LakelogError, TopicAlreadyExistsError
from lakelog.security.acl import ResourceType
from lakelog.topic_config import CONFIG_DEFS, TopicConfig, validate_topic_name
from server.broker import Broker
from server.kafka.cluster import node_id
from server.rest_proxy.v3_models import (
    V3AlterConfigs,
    V3CreateTopic,
    V3Partition,
    V3PartitionList,
    V3ReassignmentList,
    V3ReplicaList,
    V3Topic,
    V3TopicConfig,
    V3TopicConfigList,
    V3TopicList,
    V3UpdateConfig,
    V3UpdatePartitionCount,
)
from server.rest_proxy.v3_records import BrokerDep, V3Failure
from server.rest_proxy.v3_resources import (
    V3Urls,
    partition_data,
    replica_data,
    topic_config_data,
    topic_configs,
    topic_data,
)
from server.rest_proxy.v3_routing import (
    CLUSTER,
    PartitionId,
    admin_router,
    answer,
    listing,
    urls_of,
)
from server.security.enforce import describable

router = admin_router()
TOPIC = CLUSTER + "/topics/{topic_name}"
T = TypeVar("T")


@contextmanager
def known_topic(topic: str) -> Iterator[None]:
    """404 for an unknown topic or a name no topic can have; other refusals stay as they are
    (deleting an internal topic is INVALID_TOPIC_EXCEPTION, 400)."""
    try:
        yield
    except LakelogError as exc:
        if exc.code == 3 or (exc.code == 17 and not valid_name(topic)):
            raise V3Failure(404, f"topic {topic!r} does not exist") from None
        raise


def valid_name(topic: str) -> bool:
    try:
        validate_topic_name(topic)
    except LakelogError:
        return False
    return True


async def describe(broker: Broker, topic: str) -> TopicDescription:
    with known_topic(topic):
        return await asyncio.to_thread(broker.catalog.describe_topic, topic)


async def partition_count(broker: Broker, topic: str) -> int:
    """The topic's partitions, refreshed at most every refresh interval (as v2 does)."""
    with known_topic(topic):
        topic_log = await broker.topic(topic)
    await broker.refresh(topic_log, broker.settings.refresh_interval_ms / 1000)
    return topic_log.num_partitions


async def partition_urls(broker: Broker, cluster_id: str, topic: str, partition: int) -> V3Urls:
    """The cluster's URLs, once the topic is known to have ``partition`` (404 otherwise)."""
    urls = urls_of(broker, cluster_id)
    if partition >= await partition_count(broker, topic):
        raise V3Failure(404, f"topic {topic!r} has no partition {partition}")
    return urls


async def visible_topics(
    request: Request, broker: Broker, fetch: Callable[[Broker, str], Awaitable[T]]
) -> list[tuple[str, T]]:
    """Each topic the caller may DESCRIBE with ``fetch(broker, name)``; a topic deleted
    while listing is left out."""
    names = await asyncio.to_thread(broker.catalog.list_topics)
    found = []
    for name in describable(request, ResourceType.TOPIC, names):
        try:
            found.append((name, await fetch(broker, name)))
        except V3Failure:
            continue  # deleted while listing
    return found


def own_id(broker: Broker) -> int:
    return node_id(broker.settings.broker_id)


# -- topics -----------------------------------------------------------------------------


@router.read(CLUSTER + "/topics", V3TopicList, "List topics")
async def list_topics(cluster_id: str, request: Request, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    counts = await visible_topics(request, broker, partition_count)
    data = [topic_data(urls, name, count) for name, count in counts]
    return listing(urls, V3TopicList, data, "topics")


def _create_configs(body: V3CreateTopic) -> dict[str, str]:
    configs: dict[str, str] = {}
    for entry in body.configs:
        if entry.name in configs:
            raise V3Failure(400, f"config {entry.name!r} is given twice")
        if entry.value is not None:
            configs[entry.name] = entry.value
    return configs


@router.post(
    CLUSTER + "/topics",
    status_code=201,
    responses={200: {"model": V3Topic}, 201: {"model": V3Topic}},
    summary="Create a topic (validate_only: check without creating)",
)
async def create_topic(cluster_id: str, body: V3CreateTopic, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    if body.replicas_assignments is not None:
        raise V3Failure(
            400,
            "replicas_assignments cannot be used: lakelog brokers own no partitions (the "
            "storage root keeps the copies); give partitions_count instead",
        )
    partitions = body.partitions_count or 1
    configs = _create_configs(body)
    if body.validate_only:
        validate_topic_name(body.topic_name)
        TopicConfig(configs)  # INVALID_CONFIG (400) names the config at fault
        if body.replication_factor is not None and not (
            body.replication_factor == -1 or body.replication_factor >= 1
        ):
            raise V3Failure(400, f"replication_factor {body.replication_factor} must be >= 1")
        if body.topic_name in await asyncio.to_thread(broker.catalog.list_topics):
            raise V3Failure(400, f"Topic {body.topic_name!r} already exists.")
        return answer(topic_data(urls, body.topic_name, partitions))
    try:
        created = await asyncio.to_thread(
            broker.catalog.create_topic,
            body.topic_name,
            partitions,
            configs,
            replication_factor=body.replication_factor,
        )
    except TopicAlreadyExistsError:
        raise V3Failure(400, f"Topic {body.topic_name!r} already exists.") from None
    return answer(topic_data(urls, created.name, created.num_partitions), 201)


@router.read(TOPIC, V3Topic, "Describe a topic")
async def get_topic(cluster_id: str, topic_name: str, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    return answer(topic_data(urls, topic_name, await partition_count(broker, topic_name)))


@router.patch(TOPIC, responses={200: {"model": V3Topic}}, summary="Increase the partition count")
async def update_partition_count(
    cluster_id: str, topic_name: str, body: V3UpdatePartitionCount, broker: BrokerDep
) -> Response:
    urls = urls_of(broker, cluster_id)
    with known_topic(topic_name):
        count = await asyncio.to_thread(
            broker.catalog.create_partitions, topic_name, body.partitions_count
        )
    return answer(topic_data(urls, topic_name, count))


@router.delete(TOPIC, status_code=204, summary="Delete a topic")
async def delete_topic(cluster_id: str, topic_name: str, broker: BrokerDep) -> Response:
    urls_of(broker, cluster_id)
    with known_topic(topic_name):
        await asyncio.to_thread(broker.catalog.delete_topic, topic_name)
    broker.cache.forget(topic_name)
    return Response(status_code=204)


# -- partitions and replicas ---------------------------------------------------------------


@router.read(TOPIC + "/partitions", V3PartitionList, "List partitions")
async def list_partitions(cluster_id: str, topic_name: str, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    count = await partition_count(broker, topic_name)
    data = [partition_data(urls, topic_name, p, own_id(broker)) for p in range(count)]
    return listing(urls, V3PartitionList, data, "topics", topic_name, "partitions")


@router.read(TOPIC + "/partitions/{partition_id}", V3Partition, "Describe a partition")
async def get_partition(
    cluster_id: str, topic_name: str, partition_id: PartitionId, broker: BrokerDep
) -> Response:
    urls = await partition_urls(broker, cluster_id, topic_name, partition_id)
    return answer(partition_data(urls, topic_name, partition_id, own_id(broker)))


@router.read(
    TOPIC + "/partitions/{partition_id}/replicas",
    V3ReplicaList,
    "A partition's replicas (the broker answering)",
)
async def list_replicas(
    cluster_id: str, topic_name: str, partition_id: PartitionId, broker: BrokerDep
) -> Response:
    urls = await partition_urls(broker, cluster_id, topic_name, partition_id)
    data = [replica_data(urls, topic_name, partition_id, own_id(broker))]
    return listing(
        urls, V3ReplicaList, data, "topics", topic_name, "partitions", partition_id, "replicas"
    )


@router.get(
    TOPIC + "/partitions/{partition_id}/replicas/{broker_id}", summary="One replica of a partition"
)
async def get_replica(
    cluster_id: str,
    topic_name: str,
    partition_id: PartitionId,
    broker_id: int,
    broker: BrokerDep,
) -> Response:
    urls = await partition_urls(broker, cluster_id, topic_name, partition_id)
    if broker_id != own_id(broker):
        raise V3Failure(
            404,
            f"partition {partition_id} of topic {topic_name!r} has no replica on broker "
            f"{broker_id}; its replica is broker {own_id(broker)}, the broker answering",
        )
    return answer(replica_data(urls, topic_name, partition_id, broker_id))


@router.read(
    CLUSTER + "/topics/-/partitions/-/reassignment",
    V3ReassignmentList,
    "Reassignments in progress (none: replicas never move)",
)
async def list_all_reassignments(cluster_id: str, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    return listing(urls, V3ReassignmentList, [], "topics", "-", "partitions", "-", "reassignment")


@router.read(
    TOPIC + "/partitions/-/reassignment",
    V3ReassignmentList,
    "A topic's reassignments in progress (none)",
)
async def list_topic_reassignments(cluster_id: str, topic_name: str, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    await partition_count(broker, topic_name)
    return listing(
        urls, V3ReassignmentList, [], "topics", topic_name, "partitions", "-", "reassignment"
    )


@router.get(
    TOPIC + "/partitions/{partition_id}/reassignment",
    summary="A partition's reassignment in progress (404: never one)",
)
async def get_reassignment(
    cluster_id: str, topic_name: str, partition_id: PartitionId, broker: BrokerDep
) -> Response:
    await partition_urls(broker, cluster_id, topic_name, partition_id)
    raise V3Failure(
        404,
        f"partition {partition_id} of topic {topic_name!r} is not being reassigned "
        "(lakelog never moves replicas)",
    )


# -- configs ----------------------------------------------------------------------------------


def config_name(name: str) -> str:
    if name not in CONFIG_DEFS:
        raise V3Failure(
            404, f"topic config {name!r} does not exist; known: {', '.join(sorted(CONFIG_DEFS))}"
        )
    return name


@router.read(
    CLUSTER + "/topics/-/configs",
    V3TopicConfigList,
    "Every config of every topic the caller may describe",
)
async def list_all_topic_configs(cluster_id: str, request: Request, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    found = await visible_topics(request, broker, describe)
    data = [c for name, described in found for c in topic_configs(urls, name, described.config)]
    return listing(urls, V3TopicConfigList, data, "topics", "-", "configs")


@router.read(TOPIC + "/configs", V3TopicConfigList, "A topic's configs")
async def list_topic_configs(cluster_id: str, topic_name: str, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    described = await describe(broker, topic_name)
    data = topic_configs(urls, topic_name, described.config)
    return listing(urls, V3TopicConfigList, data, "topics", topic_name, "configs")


@router.read(TOPIC + "/configs/{name}", V3TopicConfig, "One config")
async def get_topic_config(
    cluster_id: str, topic_name: str, name: str, broker: BrokerDep
) -> Response:
    urls = urls_of(broker, cluster_id)
    described = await describe(broker, topic_name)
    return answer(topic_config_data(urls, topic_name, described.config, config_name(name)))


async def alter(
    broker: Broker, topic: str, set_configs: dict[str, str], delete: list[str], validate_only: bool
) -> None:
    """Set and reset overrides in one commit (or only check them, for ``validate_only``)."""
    described = await describe(broker, topic)
    described.config.with_changes(set_configs, delete)  # INVALID_CONFIG (400) names the problem
    if validate_only:
        return
    with known_topic(topic):
        await asyncio.to_thread(broker.catalog.alter_topic_configs, topic, set_configs, delete)


@router.put(TOPIC + "/configs/{name}", status_code=204, summary="Set a config (null: reset)")
async def update_topic_config(
    cluster_id: str, topic_name: str, name: str, body: V3UpdateConfig, broker: BrokerDep
) -> Response:
    urls_of(broker, cluster_id)
    config_name(name)
    if body.value is None:
        await alter(broker, topic_name, {}, [name], False)
    else:
        await alter(broker, topic_name, {name: body.value}, [], False)
    return Response(status_code=204)


@router.delete(TOPIC + "/configs/{name}", status_code=204, summary="Reset a config to its default")
async def reset_topic_config(
    cluster_id: str, topic_name: str, name: str, broker: BrokerDep
) -> Response:
    urls_of(broker, cluster_id)
    await alter(broker, topic_name, {}, [config_name(name)], False)
    return Response(status_code=204)


@router.post(
    TOPIC + "/configs:alter",
    status_code=204,
    summary="Set and reset several configs at once (validate_only: check only)",
)
async def alter_topic_configs(
    cluster_id: str, topic_name: str, body: V3AlterConfigs, broker: BrokerDep
) -> Response:
    urls_of(broker, cluster_id)
    set_configs: dict[str, str] = {}
    delete: list[str] = []
    for i, entry in enumerate(body.data):
        operation = (entry.operation or "SET").upper()
        if entry.name in set_configs or entry.name in delete:
            raise V3Failure(400, f"data[{i}]: config {entry.name!r} is named twice")
        if operation == "DELETE":
            delete.append(config_name(entry.name))
        elif operation == "SET":
            if entry.value is None:
                raise V3Failure(400, f"data[{i}]: SET {entry.name!r} needs a value")
            set_configs[config_name(entry.name)] = entry.value
        else:
            raise V3Failure(400, f"data[{i}].operation {entry.operation!r}: use SET or DELETE")
    await alter(broker, topic_name, set_configs, delete, body.validate_only)
    return Response(status_code=204)
