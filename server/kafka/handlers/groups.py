"""Consumer group APIs over the Kafka protocol, on lakelog's one group coordinator.

Members are client-assigned (``lakelog.groups.client_assigned``): the
coordinator passes their leader's assignment through. Offsets are the same
table the HTTP API reads (docs/kafka-protocol.md, "Consumer groups"). ACLs are
Kafka's, on the group and, for offsets, on each topic.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from lakelog.errors import (
    GroupIdNotFoundError,
    InvalidRequestError,
    LakelogError,
    MemberIdRequiredError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from lakelog.groups.client_assigned import ClientAssignedJoinRequest
from lakelog.groups.codec import CommittedOffset
from lakelog.groups.ids import validate_group_id
from lakelog.security.acl import Operation, ResourceType
from lakelog.structs import TopicPartition
from lakelog.topic_config import validate_topic_name
from server.groups.coordinator import GroupSnapshot, wall_ms
from server.groups.service import GroupService
from server.kafka.authorization import denied, describable, require
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, error_code
from server.kafka.handlers.metadata import OPERATIONS_OMITTED
from server.kafka.topic_ids import NO_TOPIC_ID

NO_OFFSET = -1
STABLE = "Stable"
EMPTY = "Empty"
#: ListGroups v5's type of every lakelog group: members join with JoinGroup (no KIP-848).
CLASSIC = "classic"
#: The first DescribeGroups version that answers GROUP_ID_NOT_FOUND (KIP-1043).
GROUP_NOT_FOUND_VERSION = 6
#: The first JoinGroup version with SkipAssignment (KIP-814).
SKIP_ASSIGNMENT_VERSION = 9
#: Kafka's offset.metadata.max.bytes, and the HTTP commit's limit.
MAX_METADATA_CHARS = 4096
TOPIC_DENIED = TopicAuthorizationFailedError.code
#: The first versions that name topics by id (KIP-848 with KIP-516).
OFFSET_COMMIT_TOPIC_IDS_VERSION = 10
OFFSET_FETCH_TOPIC_IDS_VERSION = 10
#: The first OffsetFetch version that asks for several groups at once (KIP-709).
OFFSET_FETCH_GROUPS_VERSION = 8


def _coordinated_here(
    ctx: RequestContext, group_id: str, operation: Operation = Operation.READ
) -> GroupService:
    """The group service, once the principal may ``operation`` on the group and this broker
    is known to coordinate it."""
    validate_group_id(group_id)
    require(ctx, operation, ResourceType.GROUP, group_id)
    groups = ctx.broker.groups
    if not groups.is_local(group_id):
        info = groups.coordinator_of(group_id)
        raise NotCoordinatorError(
            f"broker {ctx.broker.settings.broker_id} is not the coordinator of group "
            f"{group_id!r}; it is {info.broker_id}",
            group_id=group_id,
        )
    return groups


async def join_group(ctx: RequestContext, body: Any) -> Any:
    session_ms = int(body.session_timeout.total_seconds() * 1000)
    rebalance = getattr(body, "rebalance_timeout", None)
    rebalance_ms = session_ms if rebalance is None else int(rebalance.total_seconds() * 1000)
    request = ClientAssignedJoinRequest(
        client_id=ctx.header.client_id or "",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=body.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        group_instance_id=getattr(body, "group_instance_id", None),
        host=ctx.session.client_host,
        require_member_id=ctx.version >= 4,
    )
    answer: dict[str, Any] = {
        "error_code": 0,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None if ctx.version >= 7 else "",
        "leader": "",
        "skip_assignment": False,
        "member_id": body.member_id,
        "members": [],
    }
    try:
        groups = _coordinated_here(ctx, body.group_id)
        result = await groups.coordinator.join(body.group_id, body.member_id, request)
    except Exception as exc:  # answered with its code; unexpected ones are logged
        answer["error_code"], _ = error_code(exc, f"join of group {body.group_id!r}")
        if isinstance(exc, MemberIdRequiredError):
            answer["member_id"] = str(exc.details.get("member_id", ""))
        return ctx.response(**answer)
    leader, members, skip = result.leader_id, result.members, False
    if result.former_member_id is not None and result.is_leader:
        # A static leader back without a rebalance keeps the generation's assignment.
        if ctx.version >= SKIP_ASSIGNMENT_VERSION:
            skip = True
        else:
            leader, members = result.former_member_id, ()
    answer.update(
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        leader=leader,
        skip_assignment=skip,
        member_id=result.member_id,
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in members
        ],
    )
    return ctx.response(**answer)


async def sync_group(ctx: RequestContext, body: Any) -> Any:
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments} or None
    answer: dict[str, Any] = {
        "error_code": 0,
        "protocol_type": None,
        "protocol_name": None,
        "assignment": b"",
    }
    with answered(answer, f"sync of group {body.group_id!r}"):
        groups = _coordinated_here(ctx, body.group_id)
        result = await groups.coordinator.sync_assignments(
            body.group_id,
            body.member_id,
            body.generation_id,
            assignments,
            protocol_type=getattr(body, "protocol_type", None),
            protocol_name=getattr(body, "protocol_name", None),
        )
        answer.update(
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )
    return ctx.response(**answer)


async def heartbeat(ctx: RequestContext, body: Any) -> Any:
    answer: dict[str, Any] = {"error_code": 0}
    with answered(answer, f"heartbeat of group {body.group_id!r}"):
        groups = _coordinated_here(ctx, body.group_id)
        await groups.coordinator.heartbeat(body.group_id, body.member_id, body.generation_id)
    return ctx.response(**answer)


async def leave_group(ctx: RequestContext, body: Any) -> Any:
    """v0-2 name one member; v3+ a list (each answered on its own)."""
    members = getattr(body, "members", None)
    if members is None:
        leaving = [(body.member_id, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id) for m in members]
    answers = []
    for member_id, instance_id in leaving:
        answer = {"member_id": member_id, "group_instance_id": instance_id, "error_code": 0}
        with answered(answer, f"leave of group {body.group_id!r}"):
            groups = _coordinated_here(ctx, body.group_id)
            await groups.coordinator.leave(body.group_id, member_id)
        answers.append(answer)
    if members is None:
        return ctx.response(error_code=answers[0]["error_code"], members=[])
    not_coordinator = any(a["error_code"] == NotCoordinatorError.code for a in answers)
    return ctx.response(
        error_code=NotCoordinatorError.code if not_coordinator else 0, members=answers
    )


async def offset_commit(ctx: RequestContext, body: Any) -> Any:
    """All partitions of a commit share its outcome: it is stored as one Delta commit.

    v9 is v8 for a classic group (member epochs belong to KIP-848 groups, which
    lakelog does not have); v10 names topics by id, and an id no topic has is
    UNKNOWN_TOPIC_ID on its partitions, which are not stored.
    """
    now = wall_ms()
    names = await _topic_names(ctx, body.topics, OFFSET_COMMIT_TOPIC_IDS_VERSION)
    offsets: dict[TopicPartition, CommittedOffset] = {}
    for topic, name in zip(body.topics, names, strict=True):
        if name is None:
            continue
        for p in topic.partitions:
            offsets[TopicPartition(name, p.partition_index)] = CommittedOffset(
                int(p.committed_offset), p.committed_metadata or "", now
            )
    generation = int(body.generation_id_or_member_epoch)
    repeated = len(offsets) != sum(
        len(t.partitions) for t, name in zip(body.topics, names, strict=True) if name is not None
    )
    unreadable: frozenset[str] = frozenset()
    outcome: dict[str, Any] = {"error_code": 0}
    with answered(outcome, f"offset commit of group {body.group_id!r}"):
        groups = _coordinated_here(ctx, body.group_id)
        if repeated:
            raise InvalidRequestError("the same topic partition appears twice in one commit")
        unreadable = denied(ctx, Operation.READ, ResourceType.TOPIC, (tp.topic for tp in offsets))
        readable = {tp: c for tp, c in offsets.items() if tp.topic not in unreadable}
        check_committed(readable)
        if readable:
            future = await groups.coordinator.queue_commit(
                body.group_id, body.member_id, generation, readable
            )
            ctx.accepted.set()  # the connection's next commit lands after this one
            if future is not None:
                await future
    code = outcome["error_code"]

    def topic_code(name: str | None) -> int:
        if name is None:
            return UnknownTopicIdError.code
        return TOPIC_DENIED if name in unreadable else int(code)

    return ctx.response(
        topics=[
            {
                "name": name,
                "topic_id": _topic_id(topic),
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": topic_code(name)}
                    for p in topic.partitions
                ],
            }
            for topic, name in zip(body.topics, names, strict=True)
        ],
    )


async def _topic_names(ctx: RequestContext, topics: Any, ids_version: int) -> list[str | None]:
    """Each requested topic's name: from ``ids_version`` on, that of its id (None: an id
    no topic has)."""
    if topics is None:
        return []
    if ctx.version < ids_version:
        return [t.name for t in topics]
    found = await ctx.session.cluster.topic_ids.names(t.topic_id for t in topics)
    return [found.get(t.topic_id) for t in topics]


def _topic_id(topic: Any) -> uuid.UUID:
    """A requested topic's id (none before the versions that name topics by id)."""
    return getattr(topic, "topic_id", None) or NO_TOPIC_ID


def check_committed(offsets: dict[TopicPartition, CommittedOffset]) -> None:
    """The rules the HTTP commit's schema keeps: offsets >= 0, metadata of at most 4 KiB."""
    for tp, committed in offsets.items():
        validate_topic_name(tp.topic)
        if committed.offset < 0:
            raise InvalidRequestError(
                f"offset {committed.offset} for {tp.topic}-{tp.partition} is negative"
            )
        if len(committed.metadata) > MAX_METADATA_CHARS:
            raise OffsetMetadataTooLargeError(
                f"metadata for {tp.topic}-{tp.partition} has {len(committed.metadata)} "
                f"characters; at most {MAX_METADATA_CHARS}"
            )


async def offset_fetch(ctx: RequestContext, body: Any) -> Any:
    """Served by any broker, straight from the offsets table (as the HTTP API is).

    v8+ asks for several groups, each answered on its own; v9's member id and
    epoch are checked for KIP-848 groups only, so a classic group ignores them
    (as Kafka does); v10 names topics by id, and an id no topic has is
    UNKNOWN_TOPIC_ID on each of its partitions.
    """
    if ctx.version < OFFSET_FETCH_GROUPS_VERSION:
        answer = await _group_offsets(ctx, body.group_id, body.topics)
        return ctx.response(error_code=answer["error_code"], topics=answer["topics"])
    return ctx.response(
        groups=[await _group_offsets(ctx, g.group_id, g.topics) for g in body.groups]
    )


async def _group_offsets(ctx: RequestContext, group_id: str, requested: Any) -> dict[str, Any]:
    """One group's answer: ``requested`` topics' partitions, or all its committed ones."""
    try:
        validate_group_id(group_id)
        require(ctx, Operation.DESCRIBE, ResourceType.GROUP, group_id)
        committed = await asyncio.to_thread(ctx.broker.groups.offsets.fetch, group_id)
    except Exception as exc:  # answered with its code; unexpected ones are logged
        code, _ = error_code(exc, f"offset fetch of group {group_id!r}")
        return {"group_id": group_id, "error_code": code, "topics": []}
    by_id = ctx.version >= OFFSET_FETCH_TOPIC_IDS_VERSION
    hidden: frozenset[str] = frozenset()
    #: (name, id, partitions); a None name: the id names no topic.
    wanted: list[tuple[str | None, uuid.UUID, list[int]]] = []
    if requested is None:
        every: dict[str, list[int]] = {}
        for tp in sorted(committed):
            every.setdefault(tp.topic, []).append(tp.partition)
        for topic in describable(ctx, ResourceType.TOPIC, every):
            topic_id = NO_TOPIC_ID
            if by_id:
                try:
                    topic_id = await ctx.session.cluster.topic_ids.topic_id(topic)
                except UnknownTopicOrPartitionError:  # deleted since: it has no id to answer
                    continue
            wanted.append((topic, topic_id, every[topic]))
    else:
        names = await _topic_names(ctx, requested, OFFSET_FETCH_TOPIC_IDS_VERSION)
        wanted = [
            (name, _topic_id(t), list(t.partition_indexes))
            for t, name in zip(requested, names, strict=True)
        ]
        hidden = denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (n for n, _, _ in wanted if n))
    topics = []
    for name, topic_id, partitions in wanted:
        code = UnknownTopicIdError.code if name is None else TOPIC_DENIED if name in hidden else 0
        answers = []
        for partition in partitions:
            found = None
            if name is not None and not code:
                found = committed.get(TopicPartition(name, partition))
            answers.append(
                {
                    "partition_index": partition,
                    "committed_offset": NO_OFFSET if found is None else found.offset,
                    "committed_leader_epoch": -1,
                    "metadata": "" if found is None else found.metadata,
                    "error_code": code,
                }
            )
        topics.append({"name": name, "topic_id": topic_id, "partitions": answers})
    return {"group_id": group_id, "error_code": 0, "topics": topics}


async def describe_groups(ctx: RequestContext, body: Any) -> Any:
    """v6+ answers a group that does not exist GROUP_ID_NOT_FOUND (KIP-1043); before,
    such a group is described as empty, as Kafka's older versions do."""
    described = []
    for group_id in body.groups:
        entry: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "group_id": group_id,
            "group_state": "Dead",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": OPERATIONS_OMITTED,
        }
        with answered(entry, f"describe of group {group_id!r}"):
            groups = _coordinated_here(ctx, group_id, Operation.DESCRIBE)
            snap = await groups.coordinator.snapshot(group_id)
            if ctx.version >= GROUP_NOT_FOUND_VERSION and not await _exists(groups, snap):
                raise GroupIdNotFoundError(f"group {group_id!r} does not exist", group_id=group_id)
            stable = snap.state == STABLE
            entry.update(
                group_state=snap.state,
                protocol_type=snap.protocol_type,
                protocol_data=snap.protocol or "",
                members=[
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.host,
                        # Kafka shows the bytes only while the group is Stable.
                        "member_metadata": m.metadata if stable else b"",
                        "member_assignment": m.assignment if stable else b"",
                    }
                    for m in snap.descriptions
                ],
            )
        described.append(entry)
    return ctx.response(groups=described)


async def _exists(groups: GroupService, snap: GroupSnapshot) -> bool:
    """Has the group members, a generation, or anything stored (offsets, a generation)?"""
    if snap.members or snap.generation_id or snap.state != EMPTY:
        return True
    return snap.group_id in await asyncio.to_thread(groups.stored_groups)


async def list_groups(ctx: RequestContext, body: Any) -> Any:
    """The groups this broker coordinates (Kafka's admin clients ask every broker).

    Every group is a classic one (v5's group type): a types filter without
    "classic" lists none, as Kafka's does.
    """
    groups = ctx.broker.groups
    states = {s.lower() for s in getattr(body, "states_filter", None) or ()}
    types = {t.lower() for t in getattr(body, "types_filter", None) or ()}
    if types and CLASSIC not in types:
        return ctx.response(error_code=0, groups=[])
    listed: dict[str, dict[str, Any]] = {}
    for snap in groups.coordinator.local_groups():
        if groups.is_local(snap.group_id):
            listed[snap.group_id] = {
                "group_id": snap.group_id,
                "protocol_type": snap.protocol_type,
                "group_state": snap.state,
                "group_type": CLASSIC,
            }
    try:
        stored = await asyncio.to_thread(groups.stored_groups)
    except LakelogError as exc:
        code, _ = error_code(exc, "list groups")
        return ctx.response(error_code=code, groups=[])
    for group_id in stored:
        if group_id not in listed and groups.is_local(group_id):
            listed[group_id] = {
                "group_id": group_id,
                "protocol_type": "",
                "group_state": EMPTY,
                "group_type": CLASSIC,
            }
    visible = set(describable(ctx, ResourceType.GROUP, listed))
    chosen = [
        g
        for g in listed.values()
        if g["group_id"] in visible and (not states or g["group_state"].lower() in states)
    ]
    return ctx.response(error_code=0, groups=sorted(chosen, key=lambda g: g["group_id"]))


async def delete_groups(ctx: RequestContext, body: Any) -> Any:
    results = []
    for group_id in body.groups_names:
        result = {"group_id": group_id, "error_code": 0}
        with answered(result, f"delete of group {group_id!r}"):
            groups = _coordinated_here(ctx, group_id, Operation.DELETE)
            await groups.coordinator.delete(group_id)
        results.append(result)
    return ctx.response(results=results)


async def offset_delete(ctx: RequestContext, body: Any) -> Any:
    """Delete a group's committed offsets of some partitions (Kafka's rules, in
    ``GroupCoordinator.delete_offsets``). Needs DELETE on the group and READ on each
    topic; a refused topic or one that does not exist is answered per partition and
    the others go on. A group-level refusal answers no partitions."""
    group_id = body.group_id
    answers: dict[TopicPartition, int] = {}
    wanted: list[TopicPartition] = []
    try:
        groups = _coordinated_here(ctx, group_id, Operation.DELETE)
        unreadable = denied(ctx, Operation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, int(p.partition_index))
                if topic.name in unreadable:
                    answers[tp] = TOPIC_DENIED
                    continue
                try:
                    await asyncio.to_thread(groups.coordinator.check_partitions, [tp])
                except LakelogError as exc:
                    answers[tp] = exc.code
                    continue
                wanted.append(tp)
        outcome = await groups.coordinator.delete_offsets(group_id, wanted)
    except Exception as exc:  # answered with its code; unexpected ones are logged
        code, _ = error_code(exc, f"offset delete of group {group_id!r}")
        return ctx.response(error_code=code, topics=[])
    for tp, error in outcome.items():
        answers[tp] = 0 if error is None else error.code
    return ctx.response(
        error_code=0,
        topics=[
            {
                "name": topic.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": answers[TopicPartition(topic.name, int(p.partition_index))],
                    }
                    for p in topic.partitions
                ],
            }
            for topic in body.topics
        ],
    )
