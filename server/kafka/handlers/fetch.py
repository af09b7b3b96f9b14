"""Fetch: records of each requested partition as RecordBatch v2, with Kafka's long poll.

When the long poll answers and why fetch sessions are not kept is in
docs/kafka-protocol.md, "Fetch and ListOffsets". Topics the principal may not
READ are not read at all; the record bytes answered count against the fetch quota.

v13+ names topics by id (``topic_ids``): an id no topic has is UNKNOWN_TOPIC_ID on
each of its partitions. The follower fields (v15 replica state, v17 directory id,
v18 high watermark) are not read: there are no followers. v16's leader endpoints
go with NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH, which Fetch never answers
(any broker reads any partition), so they stay empty, as Kafka leaves them for a
leader that did not change.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from lakelog.errors import TopicAuthorizationFailedError, UnknownTopicIdError
from lakelog.fetch import FetchResult
from lakelog.security.acl import Operation, ResourceType
from lakelog.security.quota import QuotaKind
from server.kafka.authorization import denied
from server.kafka.context import RequestContext
from server.kafka.error_codes import error_code
from server.kafka.records import encode_fetch
from server.kafka.topic_ids import NO_TOPIC_ID, by_topic_and_id

#: Records a partition answer may hold at most; bytes limit it long before this.
MAX_RECORDS_PER_PARTITION = 1_000_000


#: The first Fetch version that names topics by id (KIP-516).
TOPIC_IDS_VERSION = 13


@dataclass
class _Wanted:
    topic: str
    topic_id: uuid.UUID
    partition: int
    offset: int
    max_bytes: int


@dataclass
class _UnknownId:
    """A partition of a topic id no topic has."""

    topic_id: uuid.UUID
    partition: int


async def fetch(ctx: RequestContext, body: Any) -> Any:
    broker = ctx.broker
    requested = await _requested(ctx, body)
    named = [w for w in requested if isinstance(w, _Wanted)]
    unknown = len(named) < len(requested)
    unreadable = denied(ctx, Operation.READ, ResourceType.TOPIC, (w.topic for w in named))
    wanted = [w for w in named if w.topic not in unreadable]
    max_wait_s = min(body.max_wait.total_seconds(), broker.settings.fetch_max_wait_ms / 1000)
    deadline = time.monotonic() + max(0.0, max_wait_s)
    interval = broker.settings.refresh_interval_ms / 1000
    while True:
        answers, size = await _read_all(ctx, wanted, int(body.max_bytes))
        remaining = deadline - time.monotonic()
        # Kafka's rule: no partition left to wait on, or an error to report, ends the poll.
        errors = unknown or any(a["error_code"] for a in answers)
        if size >= int(body.min_bytes) or remaining <= 0 or not answers or errors:
            break
        keys = [(w.topic, w.partition) for w in wanted]
        await broker.wait_for_appends(keys, min(interval, remaining))
    ctx.charge(QuotaKind.FETCH, size)
    read = {id(w): answer for w, answer in zip(wanted, answers, strict=True)}
    every = [(w, read.get(id(w)) or _refused(w)) for w in requested]
    return ctx.response(
        error_code=0,
        session_id=0,
        responses=by_topic_and_id(
            ((_name(w), w.topic_id, answer) for w, answer in every), "topic", "partitions"
        ),
        node_endpoints=[],
    )


async def _requested(ctx: RequestContext, body: Any) -> list[_Wanted | _UnknownId]:
    """The request's partitions in its order, each topic by name (v13+: its id's name)."""
    if ctx.version < TOPIC_IDS_VERSION:
        return [
            _Wanted(
                t.topic, NO_TOPIC_ID, p.partition, int(p.fetch_offset), int(p.partition_max_bytes)
            )
            for t in body.topics
            for p in t.partitions
        ]
    names = await ctx.session.cluster.topic_ids.names(t.topic_id for t in body.topics)
    return [
        _Wanted(
            names[t.topic_id],
            t.topic_id,
            p.partition,
            int(p.fetch_offset),
            int(p.partition_max_bytes),
        )
        if t.topic_id in names
        else _UnknownId(t.topic_id, p.partition)
        for t in body.topics
        for p in t.partitions
    ]


def _name(w: _Wanted | _UnknownId) -> str | None:
    return w.topic if isinstance(w, _Wanted) else None


def _refused(w: _Wanted | _UnknownId) -> dict[str, Any]:
    """The answer of a partition not read: its topic id is unknown or its topic unreadable."""
    if isinstance(w, _UnknownId):
        return _partition(w.partition, UnknownTopicIdError.code)
    return _partition(w.partition, TopicAuthorizationFailedError.code)


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
