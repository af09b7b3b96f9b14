"""DescribeLogDirs: the storage root as every broker's one log dir, with partition sizes.

Any broker reads every partition from the root, so each answers the same dir
(the root's URL) holding every partition; a partition's size is the bytes of
its live Delta segment files. Nothing is ever copied between dirs: the offset
lag is 0 and no partition is a future replica. Needs DESCRIBE on the cluster.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import urllib.parse
from typing import Any

from lakelog.errors import InvalidTopicError, UnknownTopicOrPartitionError
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from lakelog.storage.local import LocalStorage
from lakelog.topic_log import TopicLog
from server.kafka.authorization import refusal
from server.kafka.context import RequestContext
from server.kafka.error_codes import error_code

#: Kafka's "not known" for a log dir's total and usable bytes (v4+).
UNKNOWN_BYTES = -1


def log_dir_name(url: str) -> str:
    """The root's URL as the dir's name, without any credentials it carries."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _space(ctx: RequestContext) -> tuple[int, int]:
    """(total, usable) bytes of the root's file system when it is a local directory;
    object stores have no such bound (-1, -1)."""
    storage = ctx.broker.storage
    if isinstance(storage, LocalStorage) and os.path.isdir(storage.directory):
        usage = shutil.disk_usage(storage.directory)
        return usage.total, usage.free
    return UNKNOWN_BYTES, UNKNOWN_BYTES


async def describe_log_dirs(ctx: RequestContext, body: Any) -> Any:
    """Kafka's answer: the dir with the requested partitions that exist (a null list: all
    of them); unknown ones and topics left with no partition are left out."""
    broker = ctx.broker
    refused = refusal(ctx, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    if refused is not None:
        return ctx.response(error_code=refused.code, results=[])
    result: dict[str, Any] = {
        "error_code": 0,
        "log_dir": log_dir_name(broker.storage.url),
        "topics": [],
        "total_bytes": UNKNOWN_BYTES,
        "usable_bytes": UNKNOWN_BYTES,
        "is_cordoned": False,
    }
    try:
        wanted: dict[str, list[int] | None] = {}
        if body.topics is None:
            wanted = dict.fromkeys(sorted(await asyncio.to_thread(broker.catalog.list_topics)))
        else:
            for t in body.topics:
                wanted[t.topic] = [*(wanted.get(t.topic) or []), *(int(p) for p in t.partitions)]
        topics = []
        for name, partitions in wanted.items():
            sizes = await _sizes(ctx, name, partitions)
            if sizes:
                topics.append({"name": name, "partitions": sizes})
        result["topics"] = topics
        result["total_bytes"], result["usable_bytes"] = await asyncio.to_thread(_space, ctx)
    except Exception as exc:  # the dir cannot be read: its error, as Kafka answers an offline dir
        result["error_code"], _ = error_code(exc, "describe log dirs")
        result["topics"] = []
    return ctx.response(error_code=0, results=[result])


async def _sizes(
    ctx: RequestContext, name: str, partitions: list[int] | None
) -> list[dict[str, Any]]:
    """The partitions of ``name`` that exist among ``partitions`` (None: all), with sizes."""
    broker = ctx.broker
    try:
        topic_log: TopicLog = await broker.topic(name)
    except (UnknownTopicOrPartitionError, InvalidTopicError):
        return []
    await broker.refresh(topic_log, broker.settings.refresh_interval_ms / 1000)
    count = topic_log.num_partitions
    chosen = range(count) if partitions is None else dict.fromkeys(partitions)
    return [
        {
            "partition_index": p,
            "partition_size": topic_log.partition_state(p).size_bytes,
            "offset_lag": 0,
            "is_future_key": False,
        }
        for p in chosen
        if 0 <= p < count
    ]
