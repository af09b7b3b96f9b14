"""ListOffsets (earliest, latest, or first at a time), shared by the consumer and admin client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from lakelog.client.connection import Connection
from lakelog.client.retry import Retrying
from lakelog.client.structs import TopicPartition

#: "earliest", "latest", or a timestamp in ms (the first offset at or after it).
OffsetSpec = Literal["earliest", "latest"] | int


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """An offset and, for lookups by time, the timestamp of the record found there."""

    offset: int
    timestamp_ms: int | None = None


def topic_path(topic: str) -> str:
    return f"/v1/topics/{quote(topic, safe='')}"


def list_offset(
    conn: Connection, tp: TopicPartition, spec: OffsetSpec, retry: Retrying
) -> OffsetAndTimestamp:
    """One partition's offset for ``spec``, retried; a timestamp past every record gives the
    high watermark without a timestamp (as in Kafka), so a consumer waits for new records."""
    if isinstance(spec, bool) or (isinstance(spec, int) and spec < 0):
        raise ValueError(f"offset spec must be 'earliest', 'latest' or a timestamp >= 0: {spec!r}")
    path = f"{topic_path(tp.topic)}/partitions/{tp.partition}/offsets"
    body = retry(lambda: conn.get_json(path, params={"timestamp": str(spec)}))
    stamp = body.get("timestamp_ms")
    return OffsetAndTimestamp(int(body["offset"]), None if stamp is None else int(stamp))


__all__ = ["OffsetAndTimestamp", "OffsetSpec", "list_offset", "topic_path"]
