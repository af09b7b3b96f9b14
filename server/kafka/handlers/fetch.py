"""Fetch: records of each requested partition as RecordBatch v2, with Kafka's long poll.

When the long poll answers and why fetch sessions are not kept is in
docs/kafka-protocol.md, "Fetch and ListOffsets". Topics the principal may not
READ are not read at all; the record bytes answered count against the fetch quota.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from lakelog.errors import TopicAuthorizationFailedError
from lakelog.fetch import FetchResult
from lakelog.security.acl import Operation, ResourceType
from lakelog.security.quota import QuotaKind
from server.kafka.authorization import denied
from server.kafka.context import RequestContext
from server.kafka.error_codes import by_topic, error_code
from server.kafka.records import encode_fetch

#: Records a partition answer may hold at most; bytes limit it long before this.
MAX_RECORDS_PER_PARTITION = 1_000_000


@dataclass
class _Wanted:
    topic: str
    partition: int
    offset: int
    max_bytes: int


async def fetch(ctx: RequestContext, body: Any) -> Any:
    broker = ctx.broker
    wanted = [
        _Wanted(t.topic, p.partition, int(p.fetch_offset), int(p.partition_max_bytes))
        for t in body.topics
        for p in t.partitions
    ]
    unreadable = denied(ctx, Operation.READ, ResourceType.TOPIC, (w.topic for w in wanted))
    requested, wanted = wanted, [w for w in wanted if w.topic not in unreadable]
    max_wait_s = min(body.max_wait.total_seconds(), broker.settings.fetch_max_wait_ms / 1000)
    deadline = time.monotonic() + max(0.0, max_wait_s)
    interval = broker.settings.refresh_interval_ms / 1000
    while True:
        answers, size = await _read_all(ctx, wanted, int(body.max_bytes))
        remaining = deadline - time.monotonic()
        # Kafka's rule: no partition left to wait on, or an error to report, ends the poll.
        errors = any(a["error_code"] for a in answers)
        if size >= int(body.min_bytes) or remaining <= 0 or not answers or errors:
            break
        keys = [(w.topic, w.partition) for w in wanted]
        await broker.wait_for_appends(keys, min(interval, remaining))
    ctx.charge(QuotaKind.FETCH, size)
    read = iter(answers)
    refused = TopicAuthorizationFailedError.code
    every = [
        (w.topic, _partition(w.partition, refused) if w.topic in unreadable else next(read))
        for w in requested
    ]
    return ctx.response(
        error_code=0, session_id=0, responses=by_topic(every, "topic", "partitions")
    )


async def _read_all(
    ctx: RequestContext, wanted: list[_Wanted], max_bytes: int
) -> tuple[list[dict[str, Any]], int]:
    """One pass over the partitions; the first data found may exceed the limits (Kafka's rule)."""
    answers = []
    total = 0
    for w in wanted:
        answer = _partition(w.partition)
        limit = min(w.max_bytes, max_bytes - total)
        try:
            if limit <= 0 and total > 0:
                result = await _bounds_only(ctx, w)
            else:
                result = await ctx.broker.fetch(
                    w.topic,
                    w.partition,
                    w.offset,
                    max_records=MAX_RECORDS_PER_PARTITION,
                    max_bytes=max(limit, 1),
                )
        except Exception as exc:  # answered per partition; unexpected ones are logged
            answer["error_code"], _ = error_code(exc, f"fetch of {w.topic}-{w.partition}")
            answers.append(answer)
            continue
        records = encode_fetch(result.records) if result.records.num_rows else b""
        total += len(records)
        answer.update(
            high_watermark=result.high_watermark,
            last_stable_offset=result.high_watermark,
            log_start_offset=result.log_start_offset,
            records=records,
        )
        answers.append(answer)
    return answers, total


def _partition(partition: int, code: int = 0) -> dict[str, Any]:
    """A partition's answer, before any records are read."""
    return {
        "partition_index": partition,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


async def _bounds_only(ctx: RequestContext, w: _Wanted) -> FetchResult:
    """The partition's bounds without records: the response is already full."""
    topic_log = await ctx.broker.fresh_topic(w.topic, w.partition)
    return FetchResult.nothing(
        w.partition,
        topic_log.high_watermark(w.partition),
        topic_log.log_start_offset(w.partition),
        w.offset,
    )
