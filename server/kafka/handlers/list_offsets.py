"""ListOffsets: a partition's earliest, latest, largest-timestamp or first offset at a time.

Kafka's special timestamps and the versions that carry them are ``SPECIAL_SINCE``
(docs/kafka-protocol.md, "Fetch and ListOffsets"). Needs DESCRIBE on the topic.
"""

from __future__ import annotations

from typing import Any

from lakelog.errors import UnsupportedVersionError
from lakelog.security.acl import Operation, ResourceType
from server.broker import OffsetSpec
from server.kafka.authorization import refusal
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered
from server.kafka.handlers.metadata import LEADER_EPOCH

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
#: The first ListOffsets version that carries each special timestamp (Kafka's rule).
SPECIAL_SINCE = {
    LATEST: 0,
    EARLIEST: 0,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}
NO_TIMESTAMP = -1
NO_OFFSET = -1
NO_EPOCH = -1


async def list_offsets(ctx: RequestContext, body: Any) -> Any:
    topics = []
    for topic in body.topics:
        refused = refusal(ctx, Operation.DESCRIBE, ResourceType.TOPIC, topic.name)
        partitions = []
        for part in topic.partitions:
            answer: dict[str, Any] = {
                "partition_index": part.partition_index,
                "error_code": 0,
                "timestamp": NO_TIMESTAMP,
                "offset": NO_OFFSET,
                "leader_epoch": LEADER_EPOCH,
            }
            with answered(answer, f"list offsets of {topic.name}-{part.partition_index}"):
                if refused is not None:
                    raise refused
                answer.update(await _lookup(ctx, topic.name, part.partition_index, part.timestamp))
            partitions.append(answer)
        topics.append({"name": topic.name, "partitions": partitions})
    return ctx.response(topics=topics)


async def _lookup(
    ctx: RequestContext, topic: str, partition: int, timestamp: int
) -> dict[str, int]:
    broker = ctx.broker
    if timestamp < 0:
        since = SPECIAL_SINCE.get(timestamp)
        if since is None or ctx.version < since:
            raise UnsupportedVersionError(
                f"ListOffsets v{ctx.version} has no timestamp {timestamp} (special timestamps: "
                + ", ".join(f"{t} from v{v}" for t, v in SPECIAL_SINCE.items())
                + ")"
            )
    if timestamp in (LATEST, EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        topic_log = await broker.topic(topic)
        topic_log.check_partition(partition)
        if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
            return {"offset": NO_OFFSET, "leader_epoch": NO_EPOCH}
        spec: OffsetSpec = "latest" if timestamp == LATEST else "earliest"
        return {"offset": await broker.resolve_offset(topic_log, partition, spec)}
    if timestamp == MAX_TIMESTAMP:
        found = await broker.offset_of_max_timestamp(topic, partition)
    else:
        found = await broker.offset_for_time(topic, partition, timestamp)
    if found is None:
        return {"offset": NO_OFFSET, "timestamp": NO_TIMESTAMP, "leader_epoch": NO_EPOCH}
    offset, stamp = found
    return {"offset": offset, "timestamp": stamp}
