"""DeleteRecords: advance partitions' log start offsets (``lakelog.delete_records``).

Each partition is answered on its own, as Kafka answers: DELETE on the topic,
a topic whose cleanup.policy has no ``delete`` is POLICY_VIOLATION, an offset
past the high watermark OFFSET_OUT_OF_RANGE. The partitions that pass move
together in one Delta commit, and each answers its new low watermark.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lakelog import delete_records as deletion
from lakelog.security.acl import Operation, ResourceType
from lakelog.topic_log import TopicLog
from server.kafka.authorization import refusal
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, error_code, refuse_repeated, repeated

#: The low watermark of a partition whose deletion was refused.
NO_WATERMARK = -1


async def delete_records(ctx: RequestContext, body: Any) -> Any:
    topics = []
    for topic in body.topics:
        topics.append(await _topic(ctx, topic))
    return ctx.response(topics=topics)


async def _topic(ctx: RequestContext, topic: Any) -> dict[str, Any]:
    name = topic.name
    twice = repeated(int(p.partition_index) for p in topic.partitions)
    answers: dict[int, dict[str, Any]] = {}
    wanted: dict[int, int] = {}
    topic_log: TopicLog | None = None
    refused = refusal(ctx, Operation.DELETE, ResourceType.TOPIC, name)
    for part in topic.partitions:
        partition = int(part.partition_index)
        answer: dict[str, Any] = {
            "partition_index": partition,
            "low_watermark": NO_WATERMARK,
            "error_code": 0,
        }
        answers.setdefault(partition, answer)
        with answered(answer, f"delete records of {name}-{partition}"):
            if refused is not None:
                raise refused
            if partition in twice:
                raise refuse_repeated(f"partition {name}-{partition}")
            if topic_log is None:
                topic_log = await ctx.broker.topic(name)
                await asyncio.to_thread(topic_log.refresh)
            topic_log.check_partition(partition)
            deletion.check_policy(name, topic_log.config)
            deletion.target_offset(topic_log.committer.state, partition, int(part.offset))
            wanted[partition] = int(part.offset)
    if topic_log is not None and wanted:
        try:
            await asyncio.to_thread(deletion.delete_records, topic_log, wanted)
        except Exception as exc:  # the one commit decides every partition it carried
            code, _ = error_code(exc, f"delete records of {name}")
            for partition in wanted:
                answers[partition]["error_code"] = code
        else:
            for partition in wanted:
                answers[partition]["low_watermark"] = topic_log.log_start_offset(partition)
    return {"name": name, "partitions": list(answers.values())}
