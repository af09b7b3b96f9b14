"""Topic administration, broker metadata, health and metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import generate_latest

from lakelog.catalog import TopicDescription
from lakelog.security.acl import ResourceType
from server.broker import Broker
from server.http import ERROR_RESPONSES, get_broker
from server.kafka.cluster import KafkaCluster
from server.models import (
    AlterConfigsRequest,
    BrokerList,
    BrokerOut,
    ConfigEntry,
    CreatePartitionsRequest,
    CreateTopicRequest,
    Health,
    TopicDescriptionOut,
    TopicList,
)
from server.security.enforce import describable

router = APIRouter(tags=["admin"], responses=ERROR_RESPONSES)
BrokerDep = Annotated[Broker, Depends(get_broker)]
TopicName = Annotated[str, Path(min_length=1, max_length=249)]


def kafka_leaders(d: TopicDescription, broker: Broker) -> list[int] | None:
    """The node id Metadata names as each partition's leader, on this broker's first Kafka
    listener (every listener names the same brokers)."""
    listeners = list(broker.registry.kafka_addresses)
    if not listeners:
        return None
    cluster = KafkaCluster(broker)
    return [cluster.leader(d.name, p.partition, listeners[0]) for p in d.partitions]


def describe_out(d: TopicDescription, broker: Broker) -> TopicDescriptionOut:
    return TopicDescriptionOut(
        commit_leader=broker.commit_leader(d.name),
        kafka_leaders=kafka_leaders(d, broker),
        name=d.name,
        topic_id=d.topic_id,
        table_uri=d.table_uri,
        version=d.version,
        size_bytes=d.size_bytes,
        partitions=d.partitions,
        configs=[ConfigEntry(**c) for c in d.config.describe()],
    )


@router.get("/v1/topics", response_model=TopicList)
def list_topics(request: Request, broker: BrokerDep) -> TopicList:
    """Topic names the caller may DESCRIBE (all of them when authentication is off)."""
    return TopicList(topics=describable(request, ResourceType.TOPIC, broker.catalog.list_topics()))


@router.post("/v1/topics", response_model=TopicDescriptionOut, status_code=201)
def create_topic(body: CreateTopicRequest, broker: BrokerDep) -> TopicDescriptionOut:
    described = broker.catalog.create_topic(
        body.name, body.partitions, body.configs, replication_factor=body.replication_factor
    )
    return describe_out(described, broker)


@router.get("/v1/topics/{topic}", response_model=TopicDescriptionOut)
def describe_topic(topic: TopicName, broker: BrokerDep) -> TopicDescriptionOut:
    return describe_out(broker.catalog.describe_topic(topic), broker)


@router.patch("/v1/topics/{topic}/configs", response_model=TopicDescriptionOut)
def alter_configs(
    topic: TopicName, body: AlterConfigsRequest, broker: BrokerDep
) -> TopicDescriptionOut:
    broker.catalog.alter_topic_configs(topic, body.set, body.delete)
    return describe_out(broker.catalog.describe_topic(topic), broker)


@router.post("/v1/topics/{topic}/partitions", response_model=TopicDescriptionOut)
def create_partitions(
    topic: TopicName, body: CreatePartitionsRequest, broker: BrokerDep
) -> TopicDescriptionOut:
    broker.catalog.create_partitions(topic, body.count)
    return describe_out(broker.catalog.describe_topic(topic), broker)


@router.delete("/v1/topics/{topic}", status_code=204, response_class=Response)
def delete_topic(topic: TopicName, broker: BrokerDep) -> Response:
    broker.catalog.delete_topic(topic)
    broker.cache.forget(topic)
    return Response(status_code=204)


@router.get("/v1/brokers", response_model=BrokerList)
def list_brokers(broker: BrokerDep) -> BrokerList:
    return BrokerList(
        cluster_id=broker.settings.cluster_id,
        brokers=[BrokerOut(**vars(b)) for b in broker.registry.alive()],
    )


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
def healthz(broker: BrokerDep) -> Health | JSONResponse:
    """Ready when the storage root answers a listing."""
    try:
        broker.storage.list_dir("_meta")
    except OSError as exc:
        return JSONResponse(
            {"status": f"storage unavailable: {exc}", "broker_id": broker.settings.broker_id},
            status_code=503,
        )
    return Health(status="ok", broker_id=broker.settings.broker_id)


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(broker: BrokerDep) -> Response:
    m = broker.metrics
    m.buffered_bytes.set(broker.batcher.buffered_bytes)
    m.cache_hits.set(broker.cache.hits)
    m.cache_misses.set(broker.cache.misses)
    if (helper := broker.checkpoints) is not None:
        m.checkpoint_helper.labels("written").set(helper.completed)
        m.checkpoint_helper.labels("failed").set(helper.failures)
        m.checkpoint_helper.labels("restarted").set(helper.restarts)
        m.checkpoint_helper.labels("commits_read").set(helper.commits_read)
    return Response(generate_latest(m.registry), media_type="text/plain; version=0.0.4")
