"""Produce: each partition's RecordBatch decoded into the broker's one append path.

Every partition is queued for its group commit before the connection's next
request is read (an idempotent producer's batches commit in order); the answer
waits for the durable commits, and acks=0 gets none. A topic the principal may
not WRITE stores nothing; the record bytes count against the produce quota.

v13 names topics by id (``topic_ids``): an id no topic has is UNKNOWN_TOPIC_ID
on each of its partitions. v10's leader fields go with NOT_LEADER_OR_FOLLOWER
and tell a client a newer leader; the partition leaders never change epoch
(``LEADER_EPOCH``), so they stay empty, as Kafka leaves them when it knows no
newer leader. v11's TRANSACTION_ABORTABLE and v12's implicit adding of
partitions to a transaction concern transactional producers only, which are
refused at every version.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lakelog.errors import InvalidRequestError, InvalidRequiredAcksError, LakelogError
from lakelog.security.acl import Operation, ResourceType
from lakelog.security.quota import QuotaKind
from lakelog.topic_log import AppendResult
from server.kafka.authorization import refusal
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, error_code
from server.kafka.records import decode_produce
from server.kafka.topic_ids import NO_TOPIC_ID, by_topic_and_id, unknown_topic_id
from server.schema_registry.dead_letters import stored_offsets

NO_TIMESTAMP = -1


#: The first Produce version that names topics by id (KIP-516).
TOPIC_IDS_VERSION = 13


@dataclass
class _Pending:
    #: None: the request's topic id names no topic.
    topic: str | None
    topic_id: uuid.UUID
    answer: dict[str, Any]
    future: asyncio.Future[AppendResult] | None = None


async def produce(ctx: RequestContext, body: Any) -> Any:
    broker = ctx.broker
    acks = int(body.acks)
    refused: LakelogError | None = None
    if acks not in (0, 1, -1):
        refused = InvalidRequiredAcksError(f"acks must be 0, 1 or -1 (all), got {acks}")
    elif body.transactional_id is not None:
        refused = InvalidRequestError(
            f"transactional id {body.transactional_id!r}: transactions are not supported"
        )
    pending: list[_Pending] = []
    produced_bytes = 0
    names = await _names(ctx, body)
    for topic in body.topic_data:
        topic_id = getattr(topic, "topic_id", None) or NO_TOPIC_ID
        name = names.get(topic_id) if ctx.version >= TOPIC_IDS_VERSION else topic.name
        topic_refusal = refused
        if topic_refusal is None and name is not None:
            topic_refusal = refusal(ctx, Operation.WRITE, ResourceType.TOPIC, name)
        for part in topic.partition_data:
            item = _Pending(name, topic_id, _partition(part.index))
            pending.append(item)
            produced_bytes += len(part.records or b"")
            with (
                answered(item.answer, f"produce to {name or topic_id}-{part.index}"),
                record_errors(item.answer),
            ):
                if topic_refusal is not None or name is None:
                    raise topic_refusal or unknown_topic_id(topic_id)
                if part.records is None:
                    raise InvalidRequestError(f"partition {part.index} has no records")
                batch = decode_produce(part.records, part.index)
                item.future = await broker.submit(
                    name,
                    batch.rows,
                    acks,  # type: ignore[arg-type]
                    batch.producer_id,
                    batch.base_sequence,
                    sequence_partition=part.index if batch.producer_id is not None else None,
                )
    ctx.accepted.set()
    ctx.charge(QuotaKind.PRODUCE, produced_bytes)
    if acks == 0:
        return None
    answers = [(item.topic, item.topic_id, await _answer(ctx, item)) for item in pending]
    return ctx.response(
        responses=by_topic_and_id(answers, "name", "partition_responses"), node_endpoints=[]
    )


async def _names(ctx: RequestContext, body: Any) -> dict[uuid.UUID, str]:
    """The names of the topic ids a v13+ request gives (the unknown ones left out)."""
    if ctx.version < TOPIC_IDS_VERSION:
        return {}
    return await ctx.session.cluster.topic_ids.names(t.topic_id for t in body.topic_data)


@contextlib.contextmanager
def record_errors(answer: dict[str, Any]) -> Iterator[None]:
    """A refusal that names records becomes the answer's ``record_errors`` (Produce v8+),
    as Kafka's broker answers the records its own validation refuses."""
    try:
        yield
    except Exception as exc:
        answer["record_errors"] = _record_errors(exc)
        raise


def _record_errors(exc: BaseException) -> list[dict[str, Any]]:
    if not isinstance(exc, LakelogError):
        return []
    listed = exc.details.get("record_errors", [])
    return [
        {"batch_index": int(e["batch_index"]), "batch_index_error_message": str(e["message"])}
        for e in listed
    ]


def _partition(index: int) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": 0,
        "base_offset": -1,
        "log_append_time": NO_TIMESTAMP,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
    }


async def _answer(ctx: RequestContext, item: _Pending) -> dict[str, Any]:
    answer = item.answer
    if item.future is None or item.topic is None:
        return answer
    try:
        result = await item.future
    except Exception as exc:  # answered per partition; unexpected ones are logged
        what = f"produce to {item.topic}-{answer['index']}"
        answer["error_code"], answer["error_message"] = error_code(exc, what)
        answer["record_errors"] = _record_errors(exc)
        return answer
    _, offsets, stamps = result.arrays()
    stored = stored_offsets(offsets)  # without dead-lettered records
    answer["base_offset"] = int(stored.min()) if len(stored) else -1
    topic_log = await ctx.broker.topic(item.topic)
    answer["log_start_offset"] = topic_log.log_start_offset(answer["index"])
    if topic_log.config.log_append_time:
        answer["log_append_time"] = int(stamps.max())
    return answer
