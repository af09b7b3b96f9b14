"""Consumer group endpoints (docs/consumer-groups.md): membership, offsets, administration.

Each handler first asks the group service whether this broker coordinates the
group; if not, the request is relayed to the coordinator and its answer
returned unchanged. Committed offsets are read from the offsets table by any
broker (a fetch needs no coordinator, so it keeps working during a takeover).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from lakelog.errors import InvalidRequestError
from lakelog.groups.codec import CommittedOffset
from lakelog.groups.ids import validate_group_id
from lakelog.groups.reset import parse_spec
from lakelog.groups.state import JoinRequest
from lakelog.security.acl import ResourceType
from lakelog.structs import TopicPartition
from lakelog.topic_config import validate_topic_name
from server.broker import Broker
from server.groups.coordinator import wall_ms
from server.groups.forward import CLIENT_HOST_HEADER, FORWARDED_HEADER
from server.groups.models import (
    BrokerRef,
    CoordinatorOut,
    DescribedOffset,
    FetchedOffset,
    GenerationRequest,
    GroupDescription,
    GroupList,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    MemberOut,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResult,
    OffsetFetchResponse,
    ResetOffsetRow,
    ResetOffsetsRequest,
    ResetOffsetsResponse,
    SyncGroupResponse,
    TopicPartitionModel,
)
from server.groups.service import FORWARD_JOIN_GRACE_S, GroupService
from server.http import ERROR_RESPONSES, get_broker
from server.models import ErrorBody
from server.security import authorize
from server.security.enforce import describable

GROUP_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    421: {
        "model": ErrorBody,
        "description": "NOT_COORDINATOR: retry (details name the coordinator)",
    },
    503: {"model": ErrorBody, "description": "Coordinator or storage unavailable: retry"},
}
router = APIRouter(tags=["consumer groups"], responses=GROUP_RESPONSES)


async def get_groups(broker: Annotated[Broker, Depends(get_broker)]) -> GroupService:
    return broker.groups


GroupsDep = Annotated[GroupService, Depends(get_groups)]


def _tps(parts: list[TopicPartition]) -> list[TopicPartitionModel]:
    return [TopicPartitionModel(topic=tp.topic, partition=tp.partition) for tp in parts]


def _client_host(request: Request) -> str:
    if request.headers.get(FORWARDED_HEADER) and request.headers.get(CLIENT_HOST_HEADER):
        return request.headers[CLIENT_HOST_HEADER]
    return request.client.host if request.client is not None else ""


@router.get("/v1/groups", response_model=GroupList)
async def list_groups(request: Request, groups: GroupsDep) -> GroupList:
    """Groups the caller may DESCRIBE (every group with CLUSTER DESCRIBE), as Kafka's ListGroups."""
    found = await groups.list_groups(request)
    visible = set(describable(request, ResourceType.GROUP, [g.group_id for g in found]))
    return GroupList(groups=[g for g in found if g.group_id in visible])


@router.get("/v1/groups/{group}/coordinator", response_model=CoordinatorOut)
async def find_coordinator(group: str, groups: GroupsDep) -> CoordinatorOut:
    info = groups.coordinator_of(group)
    return CoordinatorOut(group_id=group, broker_id=info.broker_id, url=info.url)


@router.post("/v1/groups/{group}/members", response_model=JoinGroupResponse)
async def join_group(
    group: str, body: JoinGroupRequest, request: Request, groups: GroupsDep
) -> JoinGroupResponse | Response:
    """Join (long poll until the rebalance completes); MEMBER_ID_REQUIRED on the first call."""
    validate_group_id(group)
    for topic in body.topics:
        validate_topic_name(topic)
    wait_s = body.rebalance_timeout_ms / 1000 + FORWARD_JOIN_GRACE_S
    if (relayed := await groups.route(request, group, wait_s)) is not None:
        return relayed
    join = JoinRequest(
        client_id=body.client_id,
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        protocols=tuple(body.protocols),
        topics=tuple(dict.fromkeys(body.topics)),
        owned=None
        if body.owned is None
        else tuple(TopicPartition(o.topic, o.partition) for o in body.owned),
        group_instance_id=body.group_instance_id,
        host=_client_host(request),
    )
    result = await groups.coordinator.join(group, body.member_id, join)
    return JoinGroupResponse(
        group_id=result.group_id,
        generation_id=result.generation_id,
        member_id=result.member_id,
        leader_id=result.leader_id,
        protocol=result.protocol,
        members=result.members,
        assignment=_tps(result.assignment),
    )


@router.post("/v1/groups/{group}/members/{member_id}/sync", response_model=SyncGroupResponse)
async def sync_group(
    group: str, member_id: str, body: GenerationRequest, request: Request, groups: GroupsDep
) -> SyncGroupResponse | Response:
    if (relayed := await groups.route(request, group)) is not None:
        return relayed
    parts = await groups.coordinator.sync(group, member_id, body.generation_id)
    return SyncGroupResponse(generation_id=body.generation_id, assignment=_tps(parts))


@router.post("/v1/groups/{group}/members/{member_id}/heartbeat", response_model=HeartbeatResponse)
async def heartbeat(
    group: str, member_id: str, body: GenerationRequest, request: Request, groups: GroupsDep
) -> HeartbeatResponse | Response:
    """REBALANCE_IN_PROGRESS: rejoin; ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: forget and rejoin."""
    if (relayed := await groups.route(request, group)) is not None:
        return relayed
    await groups.coordinator.heartbeat(group, member_id, body.generation_id)
    return HeartbeatResponse()


@router.delete("/v1/groups/{group}/members/{member_id}", status_code=204)
async def leave_group(group: str, member_id: str, request: Request, groups: GroupsDep) -> Response:
    if (relayed := await groups.route(request, group)) is not None:
        return relayed
    await groups.coordinator.leave(group, member_id)
    return Response(status_code=204)


@router.post("/v1/groups/{group}/offsets", response_model=OffsetCommitResponse)
async def commit_offsets(
    group: str, body: OffsetCommitRequest, request: Request, groups: GroupsDep
) -> OffsetCommitResponse | Response:
    """Answers once the offsets are durable in the offsets table."""
    validate_group_id(group)
    for entry in body.offsets:
        validate_topic_name(entry.topic)
    for topic in sorted({entry.topic for entry in body.offsets}):
        authorize(request, "TOPIC", topic, "READ")  # OffsetCommit: READ on every topic too
    if (relayed := await groups.route(request, group)) is not None:
        return relayed
    now = wall_ms()
    offsets = {
        TopicPartition(o.topic, o.partition): CommittedOffset(o.offset, o.metadata, now)
        for o in body.offsets
    }
    if len(offsets) != len(body.offsets):
        raise InvalidRequestError("the same topic partition appears twice in one commit")
    await groups.coordinator.commit(group, body.member_id, body.generation_id, offsets)
    return OffsetCommitResponse(
        offsets=[OffsetCommitResult(topic=o.topic, partition=o.partition) for o in body.offsets]
    )


@router.get("/v1/groups/{group}/offsets", response_model=OffsetFetchResponse)
async def fetch_offsets(
    group: str,
    groups: GroupsDep,
    topic: Annotated[str | None, Query(min_length=1, max_length=249)] = None,
) -> OffsetFetchResponse:
    """Committed offsets; partitions without one are absent."""
    validate_group_id(group)
    if topic is not None:
        validate_topic_name(topic)
    committed = await asyncio.to_thread(groups.offsets.fetch, group)
    return OffsetFetchResponse(
        group_id=group,
        offsets=[
            FetchedOffset(
                topic=tp.topic,
                partition=tp.partition,
                offset=v.offset,
                metadata=v.metadata,
                commit_timestamp=v.commit_timestamp,
            )
            for tp, v in sorted(committed.items())
            if topic is None or tp.topic == topic
        ],
    )


@router.get("/v1/groups/{group}", response_model=GroupDescription)
async def describe_group(
    group: str, request: Request, groups: GroupsDep
) -> GroupDescription | Response:
    """Members, assignments, committed offsets, log end offsets and lag."""
    if (relayed := await groups.route(request, group)) is not None:
        return relayed
    snap = await groups.coordinator.snapshot(group)
    committed = await asyncio.to_thread(groups.offsets.fetch, group)
    lags = await asyncio.to_thread(groups.coordinator.lags, snap, committed)
    state = snap.state
    if snap.generation_id == 0 and not snap.members and not committed:
        state = "Dead"  # Kafka's answer for a group that does not exist
    own = groups.coordinator_of(group)
    return GroupDescription(
        group_id=group,
        state=state,
        protocol=snap.protocol,
        generation_id=snap.generation_id,
        coordinator=BrokerRef(broker_id=own.broker_id, url=own.url),
        members=[
            MemberOut(
                member_id=m["member_id"],
                group_instance_id=m["group_instance_id"],
                client_id=m["client_id"],
                host=m["host"],
                assignment=_tps(m["assignment"]),
            )
            for m in snap.members
        ],
        offsets=[
            DescribedOffset(
                topic=row.tp.topic,
                partition=row.tp.partition,
                offset=row.committed.offset,
                metadata=row.committed.metadata,
                log_end_offset=row.log_end_offset,
                lag=None
                if row.log_end_offset is None
                else max(row.log_end_offset - row.committed.offset, 0),
                member_id=row.owner,
            )
            for row in lags
        ],
    )


@router.delete("/v1/groups/{group}", status_code=204)
async def delete_group(group: str, request: Request, groups: GroupsDep) -> Response:
    """Tombstones the group's offsets; NON_EMPTY_GROUP while it has members."""
    if (relayed := await groups.route(request, group)) is not None:
        return relayed
    await groups.coordinator.delete(group)
    return Response(status_code=204)


@router.post("/v1/groups/{group}/offsets:reset", response_model=ResetOffsetsResponse)
async def reset_offsets(
    group: str, body: ResetOffsetsRequest, request: Request, groups: GroupsDep
) -> ResetOffsetsResponse | Response:
    """Plan new offsets (dry run) or store them (``execute``, refused while members are active)."""
    validate_group_id(group)
    spec = parse_spec(body.to.model_dump(exclude_none=True))
    topics: dict[str, list[int] | None] = {}
    for entry in body.topics:
        validate_topic_name(entry.topic)
        topics[entry.topic] = sorted(set(entry.partitions)) if entry.partitions else None
    if not topics and not body.all_topics:
        raise InvalidRequestError("name the topics to reset, or set all_topics")
    if body.execute:
        for topic in sorted(topics):
            authorize(request, "TOPIC", topic, "READ")  # as Kafka's AlterConsumerGroupOffsets
    if (relayed := await groups.route(request, group)) is not None:
        return relayed
    if body.execute and body.all_topics:
        # The topics are the group's own: known only here, so plan first, check, then store.
        planned = await groups.coordinator.reset(group, spec, topics, True, False)
        for topic in sorted({r.tp.topic for r in planned}):
            authorize(request, "TOPIC", topic, "READ")
    rows = await groups.coordinator.reset(group, spec, topics, body.all_topics, body.execute)
    return ResetOffsetsResponse(
        group_id=group,
        executed=body.execute,
        offsets=[
            ResetOffsetRow(
                topic=r.tp.topic,
                partition=r.tp.partition,
                current_offset=r.current_offset,
                new_offset=r.new_offset,
            )
            for r in rows
        ],
    )
