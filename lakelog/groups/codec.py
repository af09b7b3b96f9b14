"""Keys and values of the ``_consumer_offsets`` table, and which partition a group uses.

Key ``group\\0topic\\0partition`` (UTF-8; none of the three can contain NUL),
value JSON ``{"offset", "metadata", "commit_timestamp"}``, null value = the
offset was deleted (a tombstone that compaction eventually drops). The
partition is ``murmur2(group) % partitions``, Kafka's choice, so one group's
offsets are always read from one partition.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import NamedTuple

from lakelog.errors import CorruptRecordError
from lakelog.partitioner import murmur2, to_positive
from lakelog.topic_config import CONSUMER_OFFSETS_TOPIC

OFFSETS_TOPIC = CONSUMER_OFFSETS_TOPIC
OFFSETS_TABLE = "_consumer_offsets"
DEFAULT_OFFSETS_PARTITIONS = 50


class OffsetKey(NamedTuple):
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str
    commit_timestamp: int


def offsets_partition(group_id: str, num_partitions: int) -> int:
    return to_positive(murmur2(group_id.encode())) % num_partitions


def encode_key(key: OffsetKey) -> bytes:
    return f"{key.group_id}\0{key.topic}\0{key.partition}".encode()


def decode_key(data: bytes) -> OffsetKey:
    try:
        group_id, topic, partition = data.decode().split("\0")
        return OffsetKey(group_id, topic, int(partition))
    except ValueError:
        raise CorruptRecordError(f"not an offsets-table key: {data[:100]!r}") from None


def encode_value(value: CommittedOffset | None) -> bytes | None:
    if value is None:
        return None
    return json.dumps(asdict(value), separators=(",", ":")).encode()


def decode_value(data: bytes | None) -> CommittedOffset | None:
    if data is None:
        return None
    try:
        obj = json.loads(data)
        return CommittedOffset(
            int(obj["offset"]), str(obj["metadata"]), int(obj["commit_timestamp"])
        )
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
        raise CorruptRecordError(f"not an offsets-table value: {data[:100]!r}") from None


def decode_record(
    key: bytes | None, value: bytes | None
) -> tuple[OffsetKey, CommittedOffset | None]:
    """One stored record of the table, or CORRUPT_MESSAGE saying why it is not one."""
    if key is None:
        raise CorruptRecordError("not an offsets-table record: it has no key")
    return decode_key(key), decode_value(value)
