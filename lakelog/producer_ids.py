"""Producer ids for Kafka's InitProducerId: blocks claimed in the root, ids handed out in memory.

Sequence numbers are kept per producer id in each topic's Delta log, so two producers
given one id would see each other's records as duplicates or gaps: no id is handed out
twice, across restarts and brokers sharing a root. As Kafka's AllocateProducerIds, a
broker claims a **block**: block ``n`` is ``_meta/producer_ids/<n:020d>.json``, created
with ``put_if_absent`` (the loser moves on to ``n + 1``), starting after block ``n - 1``'s
last id, so ranges chain even with different block sizes. Blocks are never deleted: a
deleted number could be created again by a broker that listed before the delete.

Claimed ids start at ``FIRST_ALLOCATED_ID`` (``2**62``); the Python client draws its own
ids below it (``lakelog.client.accumulator.new_producer_id``) and HTTP producers choose
any, so only an id above ``2**62`` chosen by hand can collide.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lakelog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    KafkaStorageError,
    UnknownServerError,
)
from lakelog.storage import Storage, join

PRODUCER_IDS_DIR = "_meta/producer_ids"

#: Ids per claimed block when the caller does not choose: Kafka's own block size.
DEFAULT_BLOCK_SIZE = 1_000

#: The first id of block 0; every id below it is left to producers choosing their own.
FIRST_ALLOCATED_ID = 2**62

#: Kafka's producer ids are int64 and never negative (-1 means "no producer").
MAX_PRODUCER_ID = 2**63 - 1

#: Consecutive lost races before giving up: each one is a block another broker claimed.
MAX_CLAIM_ATTEMPTS = 1_000

_BLOCK_NAME = re.compile(r"^(\d{20})\.json$")


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """A claimed block: ids ``first_id .. last_id``, which broker claimed it, and when."""

    number: int
    first_id: int
    size: int
    broker_id: str
    claimed_ms: int

    @property
    def last_id(self) -> int:
        return self.first_id + self.size - 1

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "block": self.number,
                "first_producer_id": self.first_id,
                "last_producer_id": self.last_id,
                "size": self.size,
                "broker_id": self.broker_id,
                "claimed_ms": self.claimed_ms,
            },
            indent=1,
        ).encode()

    @classmethod
    def from_json(cls, path: str, data: bytes) -> ProducerIdBlock:
        """The block stored at ``path``; a record that does not add up is corrupt, never skipped
        (the next claim would start below its range and hand its ids out twice)."""
        match = _BLOCK_NAME.match(path.rsplit("/", 1)[-1])
        try:
            record: dict[str, Any] = json.loads(data)
            block = cls(
                number=_exact_int(record["block"]),
                first_id=_exact_int(record["first_producer_id"]),
                size=_exact_int(record["size"]),
                broker_id=str(record["broker_id"]),
                claimed_ms=_exact_int(record["claimed_ms"]),
            )
            consistent = (
                match is not None
                and int(match.group(1)) == block.number
                and block.size > 0
                and block.first_id >= FIRST_ALLOCATED_ID
                and block.last_id <= MAX_PRODUCER_ID
                and _exact_int(record["last_producer_id"]) == block.last_id
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise CorruptRecordError(f"producer id block {path} is unreadable: {exc}") from exc
        if not consistent:
            raise CorruptRecordError(
                f"producer id block {path} does not describe a valid block: {data!r}"
            )
        return block


def _exact_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def block_path(number: int) -> str:
    """Zero-padded so that listing order is block order."""
    return join(PRODUCER_IDS_DIR, f"{number:020d}.json")


def next_block(
    previous: ProducerIdBlock | None, size: int, broker_id: str, now_ms: int
) -> ProducerIdBlock:
    """The block to claim after ``previous`` (the highest existing one, None on a new root)."""
    number = 0 if previous is None else previous.number + 1
    first = FIRST_ALLOCATED_ID if previous is None else previous.last_id + 1
    if first + size - 1 > MAX_PRODUCER_ID:
        raise UnknownServerError(
            f"producer ids are exhausted: block {number} would end past {MAX_PRODUCER_ID}"
        )
    return ProducerIdBlock(number, first, size, broker_id, now_ms)


class ProducerIdAllocator:
    """Hands out producer ids no other allocator on the same root ever hands out.

    One per broker process, thread-safe; storage is touched only when a block is spent.
    """

    def __init__(
        self,
        storage: Storage,
        broker_id: str,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        if not 0 < block_size <= 2**31:
            raise InvalidConfigError(
                f"producer id block_size must be in 1..{2**31}, got {block_size}"
            )
        self.storage = storage
        self.broker_id = broker_id
        self.block_size = block_size
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next = 0
        #: Blocks this allocator claimed, and blocks it tried but another allocator
        #: created first (the races it lost): counters for metrics and tests.
        self.blocks_claimed = 0
        self.claims_lost = 0

    @property
    def block(self) -> ProducerIdBlock | None:
        """The block ids are currently handed out from (None before the first id)."""
        return self._block

    def next_id(self) -> int:
        """A producer id never handed out before; claims a new block (blocking I/O) when spent.

        Raises KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE (the highest block is unreadable)
        or UNKNOWN_SERVER_ERROR (the id space is spent), handing out no id.
        """
        with self._lock:
            if self._block is None or self._next > self._block.last_id:
                self._block = self._claim()
                self._next = self._block.first_id
            pid = self._next
            self._next += 1
            return pid

    def next_id_nowait(self) -> int | None:
        """An id from the current block without I/O or waiting; None if that needs a claim
        or another thread holds the lock (it may be claiming)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            if self._block is None or self._next > self._block.last_id:
                return None
            pid = self._next
            self._next += 1
            return pid
        finally:
            self._lock.release()

    async def next_id_async(self) -> int:
        """``next_id`` for an event loop: in memory when it can, a thread when it must claim."""
        pid = self.next_id_nowait()
        if pid is None:
            pid = await asyncio.to_thread(self.next_id)
        return pid

    def _claim(self) -> ProducerIdBlock:
        """Create the next free block with put-if-absent, starting after the highest one.

        Only a block this call saw itself create is used: a put of unknown outcome
        at worst leaves a block nobody hands out.
        """
        try:
            previous = self._highest()
            for _ in range(MAX_CLAIM_ATTEMPTS):
                candidate = next_block(previous, self.block_size, self.broker_id, self._clock_ms())
                path = block_path(candidate.number)
                if self.storage.put_if_absent(path, candidate.to_json()):
                    self.blocks_claimed += 1
                    return candidate
                self.claims_lost += 1
                previous = self._read(path)
        except OSError as exc:
            raise KafkaStorageError(
                f"could not claim a producer id block under {PRODUCER_IDS_DIR}: {exc}"
            ) from exc
        raise KafkaStorageError(
            f"could not claim a producer id block under {PRODUCER_IDS_DIR}: other brokers "
            f"claimed {MAX_CLAIM_ATTEMPTS} blocks in a row first"
        )

    def _highest(self) -> ProducerIdBlock | None:
        """The existing block with the highest number, or None on a root that has none."""
        numbered = [
            entry.path
            for entry in self.storage.list_dir(PRODUCER_IDS_DIR)
            if not entry.is_dir and _BLOCK_NAME.match(entry.path.rsplit("/", 1)[-1])
        ]
        if not numbered:
            return None
        return self._read(max(numbered))

    def _read(self, path: str) -> ProducerIdBlock:
        try:
            data = self.storage.read_bytes(path)
        except FileNotFoundError as exc:
            # Listed, or refused to a put-if-absent, yet gone: blocks are never deleted, so
            # someone removed it by hand and claiming on could hand its ids out again.
            raise CorruptRecordError(
                f"producer id block {path} was listed or exists but cannot be read: "
                "blocks are never deleted, so the producer id record is damaged"
            ) from exc
        return ProducerIdBlock.from_json(path, data)


__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "FIRST_ALLOCATED_ID",
    "MAX_PRODUCER_ID",
    "PRODUCER_IDS_DIR",
    "ProducerIdAllocator",
    "ProducerIdBlock",
    "block_path",
    "next_block",
]
