"""ListOffsets: the earliest or latest offset of a partition, or the first at/after a time.

Needs DESCRIBE on the topic; otherwise each of its partitions is answered
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from lakelog.errors import InvalidRequestError
from lakelog.security.acl import Operation, ResourceType
from server.broker import OffsetSpec
from server.kafka import wire
from server.kafka.apis import LIST_OFFSETS
from server.kafka.authorization import allowed, denial
from server.kafka.build import build
from server.kafka.context import RequestContext
from server.kafka.error_codes import error_code

LATEST = -1
EARLIEST = -2
NO_TIMESTAMP = -1


async def list_offsets(ctx: RequestContext, body: Any) -> Any:
    topics = []
    for topic in body.topics:
        refusal = None
        if not allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, topic.name):
            refusal = denial(ctx, Operation.DESCRIBE, ResourceType.TOPIC, topic.name)
        partitions = []
        for part in topic.partitions:
            answer: dict[str, Any] = {
                "partition_index": part.partition_index,
                "error_code": 0,
                "timestamp": NO_TIMESTAMP,
                "offset": -1,
                "leader_epoch": 0,
            }
            try:
                if refusal is not None:
                    raise refusal
                answer.update(await _lookup(ctx, topic.name, part.partition_index, part.timestamp))
            except Exception as exc:  # answered per partition; unexpected ones are logged
                answer["error_code"], _ = error_code(
                    exc, f"list offsets of {topic.name}-{part.partition_index}"
                )
            partitions.append(answer)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(wire.response_schema(LIST_OFFSETS, ctx.version), throttle_time=0, topics=topics)


async def _lookup(
    ctx: RequestContext, topic: str, partition: int, timestamp: int
) -> dict[str, int]:
    broker = ctx.broker
    if timestamp in (LATEST, EARLIEST):
        topic_log = await broker.topic(topic)
        topic_log.check_partition(partition)
        spec: OffsetSpec = "latest" if timestamp == LATEST else "earliest"
        return {"offset": await broker.resolve_offset(topic_log, partition, spec)}
    if timestamp < 0:
        raise InvalidRequestError(
            f"ListOffsets timestamp {timestamp}: only -1 (latest), -2 (earliest) or a time"
        )
    offset, found = await broker.offset_for_time(topic, partition, timestamp)
    return {"offset": offset, "timestamp": NO_TIMESTAMP if found is None else found}
