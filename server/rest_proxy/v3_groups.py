"""Kafka REST Proxy API v3: consumer groups, their consumers, assignments and lags (read-only).

Decisions:

* A group's members live on its coordinator: a request about one group is
  relayed to the coordinator (as ``/v1/groups/{group}`` is), so the links of
  its answer name the coordinator's URL. The listing asks each coordinator.
* A group that has no members, never had a generation and no committed
  offsets does not exist (404); the listing shows the groups the caller may
  DESCRIBE, as ``/v1/groups`` does.
* Lags are those of the committed partitions whose topic still exists; a
  partition no member owns has an empty ``consumer_id`` and ``client_id``.
  A group without committed offsets has no lag summary (404), as in the
  REST Proxy.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import Request
from fastapi.responses import Response

from lakelog.groups.ids import validate_group_id
from lakelog.security.acl import ResourceType
from lakelog.structs import TopicPartition
from server.broker import Broker
from server.groups.coordinator import GroupSnapshot
from server.groups.forward import FORWARDED_HEADER
from server.groups.models import GroupSummary
from server.kafka.cluster import node_id
from server.rest_proxy.v3_models import (
    V3Consumer,
    V3ConsumerAssignment,
    V3ConsumerAssignmentList,
    V3ConsumerGroup,
    V3ConsumerGroupLagSummary,
    V3ConsumerGroupList,
    V3ConsumerLag,
    V3ConsumerLagList,
    V3ConsumerList,
)
from server.rest_proxy.v3_records import BrokerDep, V3Failure, V3Relayed
from server.rest_proxy.v3_resources import (
    PartitionLag,
    V3Urls,
    assignment_data,
    consumer_data,
    group_data,
    lag_data,
    lag_summary_data,
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

log = logging.getLogger(__name__)

router = admin_router()
GROUPS = CLUSTER + "/consumer-groups"
GROUP = GROUPS + "/{consumer_group_id}"
CONSUMER = GROUP + "/consumers/{consumer_id}"
_PASSED_HEADERS = ("authorization", "x-api-key", "x-lakelog-client-id")


@dataclass(frozen=True)
class GroupView:
    """What the coordinator knows of one group, with the lag of each committed partition."""

    snapshot: GroupSnapshot
    lags: list[PartitionLag]

    def member(self, member_id: str, group: str) -> dict[str, Any]:
        for m in self.snapshot.members:
            if m["member_id"] == member_id:
                return m
        raise V3Failure(404, f"group {group!r} has no consumer {member_id!r}")


async def view(broker: Broker, group: str) -> GroupView:
    """The group as its coordinator (this broker) sees it; 404 if it does not exist."""
    groups = broker.groups
    snap = await groups.coordinator.snapshot(group)
    committed = await asyncio.to_thread(groups.offsets.fetch, group)
    if snap.generation_id == 0 and not snap.members and not committed:
        raise V3Failure(404, f"consumer group {group!r} does not exist")
    rows = await asyncio.to_thread(groups.coordinator.lags, snap, committed)
    by_id = {m["member_id"]: m for m in snap.members}
    lags = []
    for row in rows:
        if row.log_end_offset is None:
            continue  # the topic was deleted
        owner = by_id.get(row.owner or "", {})
        lags.append(
            PartitionLag(
                topic=row.tp.topic,
                partition=row.tp.partition,
                current_offset=row.committed.offset,
                log_end_offset=row.log_end_offset,
                member_id=str(owner.get("member_id") or ""),
                instance_id=owner.get("group_instance_id"),
                client_id=str(owner.get("client_id") or ""),
            )
        )
    return GroupView(snap, lags)


def summary_of(urls: V3Urls, broker: Broker, group: str, found: GroupView) -> V3ConsumerGroup:
    snap = found.snapshot
    coordinator = broker.groups.coordinator_of(group)
    return group_data(
        urls,
        group,
        state=snap.state,
        protocol=snap.protocol,
        simple=snap.generation_id == 0 and not snap.members,
        coordinator=node_id(coordinator.broker_id),
    )


async def on_coordinator(
    request: Request, broker: Broker, cluster_id: str, group: str
) -> tuple[V3Urls, GroupView]:
    """The cluster's URLs and the group as its coordinator sees it, when this broker
    coordinates ``group``; otherwise the coordinator answers the request (``V3Relayed``)."""
    urls = urls_of(broker, cluster_id)
    validate_group_id(group)
    if (relayed := await broker.groups.route(request, group)) is not None:
        raise V3Relayed(relayed)
    return urls, await view(broker, group)


# -- groups ---------------------------------------------------------------------------------


async def remote_entry(
    request: Request, broker: Broker, urls: V3Urls, summary: GroupSummary
) -> V3ConsumerGroup:
    """The coordinator's description of a group it has; the summary's state if it cannot say."""
    coordinator = broker.groups.coordinator_of(summary.group_id)
    headers = {k: v for k, v in request.headers.items() if k.lower() in _PASSED_HEADERS}
    headers[FORWARDED_HEADER] = broker.settings.broker_id
    path = f"/v3/clusters/{urls.cluster_id}/consumer-groups/{summary.group_id}"
    try:
        got = await broker.groups.forwarder.client().get(
            coordinator.url.rstrip("/") + path, headers=headers, timeout=httpx.Timeout(10.0)
        )
        got.raise_for_status()
        return V3ConsumerGroup.model_validate(got.json())
    except (httpx.HTTPError, ValueError) as exc:
        log.warning(
            "cannot describe group %s on its coordinator %s: %s",
            summary.group_id,
            coordinator.broker_id,
            exc,
        )
    return group_data(
        urls,
        summary.group_id,
        state=summary.state,
        protocol=None,
        simple=False,
        coordinator=node_id(coordinator.broker_id),
    )


async def list_entry(
    request: Request, broker: Broker, urls: V3Urls, summary: GroupSummary
) -> V3ConsumerGroup | None:
    group = summary.group_id
    if not broker.groups.is_local(group):
        return await remote_entry(request, broker, urls, summary)
    try:
        return summary_of(urls, broker, group, await view(broker, group))
    except V3Failure:
        return None  # gone while listing


@router.read(GROUPS, V3ConsumerGroupList, "List groups")
async def list_groups(cluster_id: str, request: Request, broker: BrokerDep) -> Response:
    urls = urls_of(broker, cluster_id)
    found = await broker.groups.list_groups(request)
    visible = set(describable(request, ResourceType.GROUP, [g.group_id for g in found]))
    entries = await asyncio.gather(
        *(list_entry(request, broker, urls, g) for g in found if g.group_id in visible)
    )
    data = [e for e in entries if e is not None]
    return listing(urls, V3ConsumerGroupList, data, "consumer-groups")


@router.read(GROUP, V3ConsumerGroup, "Describe a group")
async def get_group(
    cluster_id: str, consumer_group_id: str, request: Request, broker: BrokerDep
) -> Response:
    urls, found = await on_coordinator(request, broker, cluster_id, consumer_group_id)
    return answer(summary_of(urls, broker, consumer_group_id, found))


# -- consumers and assignments ------------------------------------------------------------


@router.read(GROUP + "/consumers", V3ConsumerList, "A group's members")
async def list_consumers(
    cluster_id: str, consumer_group_id: str, request: Request, broker: BrokerDep
) -> Response:
    urls, found = await on_coordinator(request, broker, cluster_id, consumer_group_id)
    data = [consumer_data(urls, consumer_group_id, m) for m in found.snapshot.members]
    return listing(urls, V3ConsumerList, data, "consumer-groups", consumer_group_id, "consumers")


@router.read(CONSUMER, V3Consumer, "One member of a group")
async def get_consumer(
    cluster_id: str, consumer_group_id: str, consumer_id: str, request: Request, broker: BrokerDep
) -> Response:
    urls, found = await on_coordinator(request, broker, cluster_id, consumer_group_id)
    member = found.member(consumer_id, consumer_group_id)
    return answer(consumer_data(urls, consumer_group_id, member))


def assigned(member: dict[str, Any]) -> list[TopicPartition]:
    return sorted(member["assignment"])


@router.read(
    CONSUMER + "/assignments", V3ConsumerAssignmentList, "The partitions assigned to a member"
)
async def list_assignments(
    cluster_id: str, consumer_group_id: str, consumer_id: str, request: Request, broker: BrokerDep
) -> Response:
    urls, found = await on_coordinator(request, broker, cluster_id, consumer_group_id)
    member = found.member(consumer_id, consumer_group_id)
    data = [
        assignment_data(urls, consumer_group_id, consumer_id, tp.topic, tp.partition)
        for tp in assigned(member)
    ]
    return listing(
        urls,
        V3ConsumerAssignmentList,
        data,
        "consumer-groups",
        consumer_group_id,
        "consumers",
        consumer_id,
        "assignments",
    )


@router.read(
    CONSUMER + "/assignments/{topic_name}/partitions/{partition_id}",
    V3ConsumerAssignment,
    "One partition assigned to a member",
)
async def get_assignment(
    cluster_id: str,
    consumer_group_id: str,
    consumer_id: str,
    topic_name: str,
    partition_id: PartitionId,
    request: Request,
    broker: BrokerDep,
) -> Response:
    urls, found = await on_coordinator(request, broker, cluster_id, consumer_group_id)
    member = found.member(consumer_id, consumer_group_id)
    if TopicPartition(topic_name, partition_id) not in assigned(member):
        raise V3Failure(
            404, f"consumer {consumer_id!r} is not assigned partition {topic_name}-{partition_id}"
        )
    return answer(assignment_data(urls, consumer_group_id, consumer_id, topic_name, partition_id))


# -- lags -------------------------------------------------------------------------------------


@router.read(GROUP + "/lags", V3ConsumerLagList, "The lag of every committed partition")
async def list_lags(
    cluster_id: str, consumer_group_id: str, request: Request, broker: BrokerDep
) -> Response:
    urls, found = await on_coordinator(request, broker, cluster_id, consumer_group_id)
    data = [lag_data(urls, consumer_group_id, row) for row in found.lags]
    return listing(urls, V3ConsumerLagList, data, "consumer-groups", consumer_group_id, "lags")


@router.read(
    GROUP + "/lags/{topic_name}/partitions/{partition_id}",
    V3ConsumerLag,
    "The lag of one committed partition",
)
async def get_lag(
    cluster_id: str,
    consumer_group_id: str,
    topic_name: str,
    partition_id: PartitionId,
    request: Request,
    broker: BrokerDep,
) -> Response:
    urls, found = await on_coordinator(request, broker, cluster_id, consumer_group_id)
    for row in found.lags:
        if (row.topic, row.partition) == (topic_name, partition_id):
            return answer(lag_data(urls, consumer_group_id, row))
    raise V3Failure(
        404,
        f"group {consumer_group_id!r} has no committed offset for {topic_name}-{partition_id}",
    )


@router.read(
    GROUP + "/lag-summary", V3ConsumerGroupLagSummary, "The largest and the total lag of a group"
)
async def get_lag_summary(
    cluster_id: str, consumer_group_id: str, request: Request, broker: BrokerDep
) -> Response:
    urls, found = await on_coordinator(request, broker, cluster_id, consumer_group_id)
    summary = lag_summary_data(urls, consumer_group_id, found.lags)
    if summary is None:
        raise V3Failure(404, f"group {consumer_group_id!r} has no committed offsets")
    return answer(summary)
