"""DescribeProducers: the idempotent producers whose sequences a partition's log keeps.

A producer's last sequence per partition is a Delta app transaction of the
topic's table (docs/kafka-protocol.md, "Idempotent producer"), so every broker
answers the same producers for a partition. Every producer id is handed out at
epoch 0; the table keeps no per-producer time (last timestamp -1) and there are
no transactions (coordinator epoch and transaction start -1). Needs READ on the
topic (Kafka's rule).
"""

from __future__ import annotations

from typing import Any

from lakelog.errors import LakelogError
from lakelog.produce import PRODUCER_TXN_PREFIX, partition_sequences
from lakelog.security.acl import Operation, ResourceType
from lakelog.topic_config import validate_topic_name
from server.kafka.authorization import refusal
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered

#: The epoch InitProducerId gives every producer id.
PRODUCER_EPOCH = 0
NOT_KNOWN = -1


async def describe_producers(ctx: RequestContext, body: Any) -> Any:
    broker = ctx.broker
    topics = []
    for topic in body.topics:
        partitions = []
        problem: LakelogError | None
        try:
            validate_topic_name(topic.name)
            problem = refusal(ctx, Operation.READ, ResourceType.TOPIC, topic.name)
        except LakelogError as exc:
            problem = exc
        for index in topic.partition_indexes:
            answer: dict[str, Any] = {
                "partition_index": index,
                "error_code": 0,
                "error_message": None,
                "active_producers": [],
            }
            with answered(answer, f"describe producers of {topic.name}-{index}"):
                if problem is not None:
                    raise problem
                topic_log = await broker.fresh_topic(topic.name, int(index))
                sequences = partition_sequences(
                    topic_log.table.app_transactions(PRODUCER_TXN_PREFIX), int(index)
                )
                answer["active_producers"] = [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": PRODUCER_EPOCH,
                        "last_sequence": last,
                        "last_timestamp": NOT_KNOWN,
                        "coordinator_epoch": NOT_KNOWN,
                        "current_txn_start_offset": NOT_KNOWN,
                    }
                    for producer_id, last in sorted(sequences.items())
                ]
            partitions.append(answer)
        topics.append({"name": topic.name, "partitions": partitions})
    return ctx.response(topics=topics)
