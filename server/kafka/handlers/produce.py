"""Produce: each partition's RecordBatch decoded into the broker's one append path.

Every partition is queued for its group commit before the connection's next
request is read (an idempotent producer's batches commit in order); the answer
waits for the durable commits, and acks=0 gets none. A topic the principal may
not WRITE stores nothing; the record bytes count against the produce quota.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lakelog.errors import InvalidRequestError, InvalidRequiredAcksError, LakelogError
from lakelog.security.acl import Operation, ResourceType
from lakelog.security.quota import QuotaKind
from lakelog.topic_log import AppendResult
from server.kafka.authorization import refusal
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, by_topic, error_code
from server.kafka.records import decode_produce
from server.schema_registry.dead_letters import stored_offsets

NO_TIMESTAMP = -1


@dataclass
class _Pending:
    topic: str
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
    for topic in body.topic_data:
        topic_refusal = refused or refusal(ctx, Operation.WRITE, ResourceType.TOPIC, topic.name)
        for part in topic.partition_data:
            item = _Pending(topic.name, _partition(part.index))
            pending.append(item)
            produced_bytes += len(part.records or b"")
            with (
                answered(item.answer, f"produce to {topic.name}-{part.index}"),
                record_errors(item.answer),
            ):
                if topic_refusal is not None:
                    raise topic_refusal
                if part.records is None:
                    raise InvalidRequestError(f"partition {part.index} has no records")
                batch = decode_produce(part.records, part.index)
                item.future = await broker.submit(
                    topic.name,
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
    answers = [(item.topic, await _answer(ctx, item)) for item in pending]
    return ctx.response(responses=by_topic(answers, "name", "partition_responses"))


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
    if item.future is None:
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
