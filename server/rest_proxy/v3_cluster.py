"""Kafka REST Proxy API v3: brokers, broker configs and ACLs under ``/v3/clusters/{cluster_id}``.

Decisions:

* The brokers are the live ones of the broker registry. A broker's configs
  are its settings, read-only (fixed when it starts); a question about another
  broker's configs or replicas is relayed to that broker. There are no dynamic
  broker configs: ``/brokers/-/configs`` and ``/broker-configs`` are empty.
* ACLs are lakelog's own (the store behind ``/v1/acls``), with Kafka's names;
  Kafka's other resource types and operations are refused with 400 naming the
  value. Searching needs CLUSTER DESCRIBE, creating and deleting CLUSTER ALTER.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Query, Request
from fastapi.responses import Response

from lakelog.errors import InvalidRequestError
from lakelog.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    ResourceType,
    parse_resource_type,
)
from server.broker import Broker
from server.groups.forward import FORWARDED_HEADER
from server.kafka.cluster import node_id
from server.registry import BrokerInfo
from server.rest_proxy.v3_models import (
    V3AclList,
    V3Broker,
    V3BrokerConfig,
    V3BrokerConfigList,
    V3BrokerList,
    V3ClusterConfigList,
    V3CreateAcl,
    V3CreateAcls,
    V3DeletedAcls,
    V3ReplicaList,
)
from server.rest_proxy.v3_records import BrokerDep, V3Failure, V3Relayed
from server.rest_proxy.v3_resources import (
    V3Urls,
    acl_list,
    broker_config_data,
    broker_data,
    replica_data,
)
from server.rest_proxy.v3_routing import CLUSTER, admin_router, answer, listing, urls_of
from server.rest_proxy.v3_topics import own_id, partition_count, visible_topics
from server.security.admin_routes import AclQuery, AclSearch, Q
from server.security.enforce import security_of
from server.security.state import BrokerSecurity
from server.settings import setting_values

router = admin_router()
BROKER = CLUSTER + "/brokers/{broker_id}"


# -- brokers ------------------------------------------------------------------------------


async def live_brokers(broker: Broker) -> dict[int, BrokerInfo]:
    alive = await asyncio.to_thread(broker.registry.alive)
    found = {node_id(b.broker_id): b for b in alive}
    own = broker.settings
    found.setdefault(
        node_id(own.broker_id),
        BrokerInfo(own.broker_id, own.url, broker.registry.started_ms, 0),
    )
    return found


def broker_out(urls: V3Urls, number: int, info: BrokerInfo) -> V3Broker:
    where = urlsplit(info.url)
    return broker_data(urls, number, where.hostname, where.port)


async def find_broker(broker: Broker, number: int) -> BrokerInfo:
    found = (await live_brokers(broker)).get(number)
    if found is None:
        raise V3Failure(404, f"broker {number} is not a live broker of this cluster")
    return found


async def on_broker(request: Request, broker: Broker, cluster_id: str, number: int) -> V3Urls:
    """The cluster's URLs when ``number`` is this broker; otherwise that broker answers the
    request (``V3Relayed``)."""
    urls = urls_of(broker, cluster_id)
    if number == own_id(broker):
        return urls
    info = await find_broker(broker, number)
    if request.headers.get(FORWARDED_HEADER):
        raise V3Failure(404, f"broker {number} is not this broker; ask it at {info.url}")
    raise V3Relayed(await broker.groups.forwarder.forward(request, info.url))


@router.read(CLUSTER + "/brokers", V3BrokerList, "Live brokers")
async def list_brokers(cluster_id: str, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    data = [broker_out(urls, n, info) for n, info in sorted((await live_brokers(broker)).items())]
    return listing(urls, V3BrokerList, data, "brokers")


@router.read(
    CLUSTER + "/brokers/-/configs", V3BrokerConfigList, "Dynamic configs of every broker (none)"
)
async def list_dynamic_broker_configs(cluster_id: str, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    return listing(urls, V3BrokerConfigList, [], "brokers", "-", "configs")


@router.read(BROKER, V3Broker, "One live broker")
async def get_broker(cluster_id: str, broker_id: int, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    return answer(broker_out(urls, broker_id, await find_broker(broker, broker_id)))


def own_configs(urls: V3Urls, broker: Broker) -> list[V3BrokerConfig]:
    number = own_id(broker)
    return [broker_config_data(urls, number, s) for s in setting_values(broker.settings)]


@router.read(BROKER + "/configs", V3BrokerConfigList, "A broker's settings (read-only)")
async def list_broker_configs(
    cluster_id: str, broker_id: int, request: Request, broker: BrokerDep
) -> Response:
    urls = await on_broker(request, broker, cluster_id, broker_id)
    data = own_configs(urls, broker)
    return listing(urls, V3BrokerConfigList, data, "brokers", broker_id, "configs")


@router.read(BROKER + "/configs/{name}", V3BrokerConfig, "One setting of a broker")
async def get_broker_config(
    cluster_id: str, broker_id: int, name: str, request: Request, broker: BrokerDep
) -> Response:
    urls = await on_broker(request, broker, cluster_id, broker_id)
    for config in own_configs(urls, broker):
        if config.name == name:
            return answer(config)
    raise V3Failure(404, f"broker {broker_id} has no setting {name!r}")


@router.read(
    BROKER + "/partition-replicas",
    V3ReplicaList,
    "The partitions a broker serves (all, of the topics the caller may describe)",
)
async def list_broker_replicas(
    cluster_id: str, broker_id: int, request: Request, broker: BrokerDep
) -> Response:
    urls = await on_broker(request, broker, cluster_id, broker_id)
    counts = await visible_topics(request, broker, partition_count)
    data = [replica_data(urls, name, p, broker_id) for name, count in counts for p in range(count)]
    return listing(urls, V3ReplicaList, data, "brokers", broker_id, "partition-replicas")


@router.read(
    CLUSTER + "/broker-configs", V3ClusterConfigList, "Dynamic cluster-wide broker configs (none)"
)
async def list_cluster_configs(cluster_id: str, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    return listing(urls, V3ClusterConfigList, [], "broker-configs")


@router.get(CLUSTER + "/broker-configs/{name}", summary="A dynamic cluster-wide config (404)")
async def get_cluster_config(cluster_id: str, name: str, broker: BrokerDep) -> Response:
    urls_of(broker, cluster_id)
    raise V3Failure(
        404, f"there is no dynamic cluster-wide config {name!r}: broker settings are static"
    )


# -- ACLs ----------------------------------------------------------------------------------

Required = Annotated[str, Query()]


def security_state(request: Request) -> BrokerSecurity:
    security = security_of(request)
    assert security is not None  # create_app always installs it, enabled or not
    return security


def searched(request: Request, query: AclQuery) -> tuple[BrokerSecurity, list[AclBinding]]:
    """The bindings an ACL search selects among the ACLs as stored now, and the broker's
    security state they were read into.

    MATCH (Kafka's) selects every binding that covers ``resource_name``:
    the literal name, ``*`` and matching prefixes.
    """
    name = query.resource_name
    match = (query.pattern_type or "").strip().upper() == "MATCH"
    named = replace(query, resource_name=None, pattern_type=None) if match else query
    chosen = named.acl_filter()
    if match and name is None:
        raise InvalidRequestError("pattern_type MATCH needs a resource_name to match")
    security = security_state(request)
    security.refresh()
    found = [b for b in security.acls if chosen.matches(b)]
    if match:
        assert name is not None
        found = [b for b in found if b.pattern.matches(b.pattern.resource_type, name)]
    return security, sorted(found)


@router.read(CLUSTER + "/acls", V3AclList, "Search ACLs")
def search_acls(cluster_id: str, request: Request, broker: BrokerDep, query: AclSearch) -> Response:
    urls = urls_of(broker, cluster_id)
    _, found = searched(request, query)
    data = acl_list(urls, found)
    sent = request.url.query
    here = urls.at("acls") + (f"?{sent}" if sent else "")
    return answer(V3AclList(kind="KafkaAclList", metadata={"self": here}, data=data))


def binding_of(body: V3CreateAcl) -> AclBinding:
    if parse_resource_type(body.resource_type) is ResourceType.CLUSTER and (
        body.resource_name != CLUSTER_NAME
    ):
        raise V3Failure(400, f"the only valid name for the CLUSTER resource is {CLUSTER_NAME!r}")
    return AclBinding.from_json(body.model_dump())


def create(request: Request, bindings: list[AclBinding]) -> Response:
    security = security_state(request)
    security.acl_store.add(bindings)
    security.refresh()
    return Response(status_code=201)


@router.post(CLUSTER + "/acls", status_code=201, summary="Create an ACL")
def create_acl(cluster_id: str, body: V3CreateAcl, request: Request, broker: BrokerDep) -> Response:
    urls_of(broker, cluster_id)
    return create(request, [binding_of(body)])


@router.post(CLUSTER + "/acls:batch", status_code=201, summary="Create several ACLs")
def create_acls(
    cluster_id: str, body: V3CreateAcls, request: Request, broker: BrokerDep
) -> Response:
    urls_of(broker, cluster_id)
    return create(request, [binding_of(item) for item in body.data])


@router.delete(
    CLUSTER + "/acls",
    responses={200: {"model": V3DeletedAcls}},
    summary="Delete the ACLs a search selects",
)
def delete_acls(
    cluster_id: str,
    request: Request,
    broker: BrokerDep,
    resource_type: Required,
    pattern_type: Required,
    operation: Required,
    permission: Required,
    resource_name: Q = None,
    principal: Q = None,
    host: Q = None,
) -> Response:
    urls = urls_of(broker, cluster_id)
    query = AclQuery(
        resource_type, resource_name, pattern_type, principal, host, operation, permission
    )
    security, doomed = searched(request, query)
    removed = security.acl_store.remove([_exact(b) for b in doomed]) if doomed else []
    security.refresh()
    return answer(V3DeletedAcls(data=acl_list(urls, removed)))


def _exact(binding: AclBinding) -> AclFilter:
    return AclFilter(
        resource_type=binding.pattern.resource_type,
        resource_name=binding.pattern.name,
        pattern_type=binding.pattern.pattern_type,
        principal=binding.principal,
        host=binding.host,
        operation=binding.operation,
        permission=binding.permission,
    )
