"""Replica APIs answered as Kafka answers them for a partition with one replica.

Brokers own no partitions (the storage root keeps the copies), so every
partition has the one replica and the one leader epoch Metadata names:
OffsetForLeaderEpoch answers that epoch's end, ElectLeaders finds nothing
to elect, and no reassignment is ever in progress or possible
(docs/kafka-protocol.md, "Admin APIs").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakelog.errors import (
    ElectionNotNeededError,
    FencedLeaderEpochError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    LakelogError,
    NoReassignmentInProgressError,
    TopicAuthorizationFailedError,
    UnknownLeaderEpochError,
)
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from lakelog.topic_log import TopicLog
from server.kafka.authorization import allowed, denied, refusal
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, repeated
from server.kafka.handlers.metadata import LEADER_EPOCH

#: Kafka's "no epoch" (``RecordBatch.NO_PARTITION_LEADER_EPOCH``) and "no offset".
NO_EPOCH = -1
NO_OFFSET = -1
PREFERRED, UNCLEAN = 0, 1
NO_REPLICAS = (
    "lakelog brokers own no partitions: the storage root keeps the copies, and the "
    "partition's one replica is its leader"
)


@dataclass(frozen=True)
class EpochEnd:
    """One partition's answer to OffsetForLeaderEpoch."""

    leader_epoch: int
    end_offset: int


def epoch_end(requested: int, current: int, log_start_offset: int, high_watermark: int) -> EpochEnd:
    """Kafka's answer (``Partition.lastOffsetForLeaderEpoch``) for a log with one epoch,
    ``LEADER_EPOCH``, which started at the log start offset and is still being written.

    A ``current`` epoch (-1: not given) other than the partition's is refused as
    Kafka refuses it: older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. The
    current epoch ends at the high watermark (every record is committed); an older
    epoch answers the start of the first one kept, a newer or undefined one -1/-1.
    """
    if current != NO_EPOCH and current < LEADER_EPOCH:
        raise FencedLeaderEpochError(
            f"leader epoch {current} is older than the partition's, {LEADER_EPOCH}"
        )
    if current > LEADER_EPOCH:
        raise UnknownLeaderEpochError(
            f"leader epoch {current} is newer than the partition's, {LEADER_EPOCH}"
        )
    if requested == LEADER_EPOCH:
        return EpochEnd(LEADER_EPOCH, high_watermark)
    if requested == NO_EPOCH or requested > LEADER_EPOCH:
        return EpochEnd(NO_EPOCH, NO_OFFSET)
    return EpochEnd(requested, log_start_offset)


async def _partitions(ctx: RequestContext, topic: str) -> TopicLog:
    """The topic's log, refreshed at most ``refresh_interval_ms`` ago (partitions that
    another broker added are seen); UNKNOWN_TOPIC_OR_PARTITION if it does not exist."""
    broker = ctx.broker
    topic_log = await broker.topic(topic)
    await broker.refresh(topic_log, broker.settings.refresh_interval_ms / 1000)
    return topic_log


async def offset_for_leader_epoch(ctx: RequestContext, body: Any) -> Any:
    """Consumers validate their position after a leader change with it (KIP-320). Needs
    CLUSTER_ACTION on the cluster or DESCRIBE on the topic (Kafka's rule)."""
    brokers = allowed(ctx, Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True)
    hidden = (
        frozenset()
        if brokers
        else denied(ctx, Operation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in body.topics))
    )
    topics = []
    for topic in body.topics:
        partitions = []
        for part in topic.partitions:
            answer: dict[str, Any] = {
                "partition": part.partition,
                "error_code": 0,
                "leader_epoch": NO_EPOCH,
                "end_offset": NO_OFFSET,
            }
            with answered(answer, f"leader epoch of {topic.topic}-{part.partition}"):
                if topic.topic in hidden:
                    raise TopicAuthorizationFailedError(
                        f"principal {ctx.principal} may not DESCRIBE topic {topic.topic!r}"
                    )
                index = int(part.partition)
                topic_log = await _partitions(ctx, topic.topic)
                topic_log.check_partition(index)
                end = epoch_end(
                    int(part.leader_epoch),
                    int(part.current_leader_epoch),
                    topic_log.log_start_offset(index),
                    topic_log.high_watermark(index),
                )
                answer.update(leader_epoch=end.leader_epoch, end_offset=end.end_offset)
            partitions.append(answer)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return ctx.response(topics=topics)


def _cluster_refusal(ctx: RequestContext, operation: Operation) -> LakelogError | None:
    return refusal(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


async def elect_leaders(ctx: RequestContext, body: Any) -> Any:
    """Every partition already has the leader either election would choose: a named one
    is ELECTION_NOT_NEEDED, and "all partitions" (a null list) answers each topic with
    none, as Kafka's controller leaves out the partitions that needed no election.
    Needs ALTER on the cluster."""
    election_type = int(getattr(body, "election_type", PREFERRED))
    refused = _cluster_refusal(ctx, Operation.ALTER)
    if body.topic_partitions is None:
        if refused is not None:
            return ctx.response(error_code=refused.code, replica_election_results=[])
        names = await _all_topics(ctx)
        return ctx.response(
            error_code=0,
            replica_election_results=[{"topic": n, "partition_result": []} for n in names],
        )
    results = []
    for topic in body.topic_partitions:
        answers: list[dict[str, Any]] = []
        for partition in topic.partitions:
            answer: dict[str, Any] = {
                "partition_id": partition,
                "error_code": 0,
                "error_message": None,
            }
            with answered(answer, f"leader election of {topic.topic}-{partition}"):
                if refused is not None:
                    raise refused
                if election_type not in (PREFERRED, UNCLEAN):
                    raise InvalidRequestError(
                        f"election type {election_type}: Kafka's are {PREFERRED} (preferred) "
                        f"and {UNCLEAN} (unclean)"
                    )
                (await _partitions(ctx, topic.topic)).check_partition(int(partition))
                raise ElectionNotNeededError(
                    f"partition {topic.topic}-{partition} already has its only replica "
                    "as its leader"
                )
            answers.append(answer)
        results.append({"topic": topic.topic, "partition_result": answers})
    return ctx.response(
        error_code=refused.code if refused is not None else 0,
        replica_election_results=results,
    )


async def _all_topics(ctx: RequestContext) -> list[str]:
    return sorted(await asyncio.to_thread(ctx.broker.catalog.list_topics))


async def list_partition_reassignments(ctx: RequestContext, body: Any) -> Any:
    """Nothing is ever being reassigned: an empty list, named topics known or not (Kafka's
    controller leaves out what is not reassigning). Needs DESCRIBE on the cluster."""
    refused = _cluster_refusal(ctx, Operation.DESCRIBE)
    if refused is not None:
        return ctx.response(error_code=refused.code, error_message=refused.message, topics=[])
    return ctx.response(error_code=0, error_message=None, topics=[])


def reassignment_refusal(
    target: Sequence[int] | None, leader: int, live: frozenset[int], allow_rf_change: bool
) -> LakelogError | None:
    """Why a partition led by ``leader`` cannot move to ``target`` (None: it is there).

    Kafka's checks in its order: a cancel (null target) with nothing in progress,
    a target that is empty, names a broker twice or one that is not live, a
    replication factor change not allowed; then lakelog's own rule, that the
    only replica is the leader Metadata names.
    """
    if target is None:
        return NoReassignmentInProgressError(
            "no reassignment is in progress: partitions are never reassigned"
        )
    if not target:
        return InvalidReplicaAssignmentError("the target replica list is empty")
    twice = sorted(repeated(target))
    if twice:
        return InvalidReplicaAssignmentError(
            f"the target replica list names broker {twice[0]} more than once"
        )
    unknown = sorted(set(target) - live)
    if unknown:
        return InvalidReplicaAssignmentError(
            f"the target replica list names broker {unknown[0]}, which is not a live broker"
        )
    if len(target) != 1 and not allow_rf_change:
        return InvalidReplicationFactorError(
            f"the replication factor would change from 1 to {len(target)}, which the "
            "request does not allow"
        )
    if list(target) != [leader]:
        return InvalidReplicaAssignmentError(
            f"replicas cannot be reassigned: {NO_REPLICAS} (broker {leader})"
        )
    return None


async def alter_partition_reassignments(ctx: RequestContext, body: Any) -> Any:
    """A target that is the partition's one replica, its leader, changes nothing and
    succeeds, as in Kafka; any other is refused, naming why. Needs ALTER on the cluster."""
    allow_rf_change = bool(getattr(body, "allow_replication_factor_change", True))
    refused = _cluster_refusal(ctx, Operation.ALTER)
    session = ctx.session
    live = frozenset(n.node_id for n in session.cluster.nodes(session.listener))
    responses = []
    for topic in body.topics:
        answers = []
        for part in topic.partitions:
            index = int(part.partition_index)
            answer: dict[str, Any] = {
                "partition_index": index,
                "error_code": 0,
                "error_message": None,
            }
            with answered(answer, f"reassignment of {topic.name}-{index}"):
                if refused is not None:
                    raise refused
                (await _partitions(ctx, topic.name)).check_partition(index)
                leader = session.cluster.leader(topic.name, index, session.listener)
                target = None if part.replicas is None else [int(r) for r in part.replicas]
                problem = reassignment_refusal(target, leader, live, allow_rf_change)
                if problem is not None:
                    raise problem
            answers.append(answer)
        responses.append({"name": topic.name, "partitions": answers})
    return ctx.response(
        allow_replication_factor_change=allow_rf_change,
        error_code=refused.code if refused is not None else 0,
        error_message=refused.message if refused is not None else None,
        responses=responses,
    )
