"""Partition selection that matches Kafka's producer byte for byte.

A keyed record must land where the Java producer (or librdkafka's
``murmur2_random``) would put it, or per-key ordering and co-partitioning break
once a topic is written by both lakelog and Kafka clients: Kafka's exact
``Utils.murmur2``, ``Utils.toPositive`` and a plain modulo. Keyless records are
placed for batch efficiency (sticky, KIP-480) or even spread (round-robin).
``partitions_for_keys`` hashes a column of keys at once in numpy: a request of a
thousand keyed records would otherwise spend most of its broker time here.
"""

from __future__ import annotations

import random
import struct
import threading
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakelog.column_buffers import validity_bits
from lakelog.errors import InvalidConfigError, InvalidPartitionsError

__all__ = [
    "VECTOR_KEY_BYTES",
    "KeylessStrategy",
    "Partitioner",
    "RoundRobinPartitioner",
    "StickyPartitioner",
    "choose_partition",
    "make_keyless_partitioner",
    "murmur2",
    "partition_for_key",
    "partitions_for_keys",
    "stable_order",
    "to_positive",
]

KeylessStrategy = Literal["sticky", "round_robin"]

_MASK32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995
# Precompiled so the hot path does not re-parse the format on every call.
_BLOCKS = struct.Struct("<I")


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``, signed as Java's.

    The state is an unsigned 32-bit int, masked after every multiply, so Java's
    ``>>>`` is a plain right shift; it is reinterpreted as signed at the end.
    """
    length = len(data)
    # Locals, not module globals, inside the loop: CPython reads them faster.
    m = _M
    mask = _MASK32
    h = (_SEED ^ length) & mask
    tail = length & 3
    aligned = length - tail
    if aligned:
        # iter_unpack reads the little-endian blocks in C, far cheaper than indexing bytes.
        blocks = memoryview(data)[:aligned] if tail else data
        for (k,) in _BLOCKS.iter_unpack(blocks):
            k = (k * m) & mask
            k ^= k >> 24  # r = 24
            h = ((h * m) & mask) ^ ((k * m) & mask)
    if tail:
        # Java's fall-through switch XORs the trailing bytes into h, little-endian,
        # then multiplies once; reading them as one little-endian int is the same.
        h = ((h ^ int.from_bytes(data[aligned:], "little")) * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: the sign bit cleared (not ``abs``: ``abs(-2**31)``
    overflows in Java). Python's ``&`` on negative ints is two's complement, as Java's."""
    return n & 0x7FFFFFFF


def _check_partitions(num_partitions: int) -> None:
    # bool is an int subclass; True would silently mean "one partition".
    if isinstance(num_partitions, bool) or num_partitions < 1:
        raise InvalidPartitionsError(
            f"number of partitions must be at least 1, got {num_partitions!r}"
        )


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` (``b""`` is a key too)."""
    _check_partitions(num_partitions)
    return to_positive(murmur2(key)) % num_partitions


#: Keys up to this many bytes are hashed by the vectorised loop, which costs one numpy
#: step per 4-byte block of the longest key; longer (rare) keys are hashed one by one.
VECTOR_KEY_BYTES = 512


def partitions_for_keys(keys: pa.Array, num_partitions: int) -> npt.NDArray[np.int32]:
    """``partition_for_key`` of every key of a binary Arrow array, in one pass over the batch.

    Null keys get -1 (the caller gives them the keyless choice). Each hash is a
    ``uint32`` lane (wrapping like Java's ``int``); keys sorted longest first
    with their blocks laid out block-major make step ``j`` one contiguous slice:
    one numpy operation per 4 bytes of the longest key.
    """
    _check_partitions(num_partitions)
    if not pa.types.is_binary(keys.type):
        keys = keys.cast(pa.binary())
    n = len(keys)
    if n == 0 or keys.null_count == n:
        return np.full(n, -1, np.int32)
    validity, offsets_buf, data_buf = keys.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1, keys.offset * 4).astype(np.int64)
    out = np.full(n, -1, np.int32)
    starts, lengths = offsets[:-1], np.diff(offsets)
    present = np.ones(n, bool)
    if keys.null_count:
        present = validity_bits(validity, keys.offset, n).astype(bool)
    vector = present & (lengths <= VECTOR_KEY_BYTES)
    for i in np.flatnonzero(present & ~vector):  # long keys: one at a time
        begin, end = int(starts[i]), int(starts[i] + lengths[i])
        out[i] = to_positive(murmur2(memoryview(data_buf)[begin:end].tobytes())) % num_partitions
    rows = np.flatnonzero(vector)
    if len(rows):
        data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        hashes = _murmur2_many(data, starts[rows], lengths[rows])
        out[rows] = ((hashes & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)
    return out


def _murmur2_many(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint32]:
    """Kafka's murmur2 of ``data[starts[i]:starts[i] + lengths[i]]`` for every i, unsigned."""
    m = np.uint32(_M)
    blocks = lengths >> 2
    order = stable_order(blocks.max() - blocks)  # most blocks first
    starts, lengths, blocks = starts[order], lengths[order], blocks[order]
    h = (np.uint32(_SEED) ^ lengths.astype(np.uint32)).astype(np.uint32)
    most = int(blocks[0]) if len(blocks) else 0
    if most:
        # active[j]: how many keys have a block j; the blocks in block-major order.
        active = np.searchsorted(-blocks, -np.arange(most), side="left").astype(np.int64)
        firsts = np.concatenate(([0], np.cumsum(active)[:-1]))
        step = np.repeat(np.arange(most, dtype=np.int64), active)
        lane = np.arange(len(step), dtype=np.int64) - np.repeat(firsts, active)
        at = starts[lane] + 4 * step
        k = (
            data[at].astype(np.uint32)
            | (data[at + 1].astype(np.uint32) << np.uint32(8))
            | (data[at + 2].astype(np.uint32) << np.uint32(16))
            | (data[at + 3].astype(np.uint32) << np.uint32(24))
        )
        k *= m
        k ^= k >> np.uint32(24)
        k *= m
        for j in range(most):
            count, first = int(active[j]), int(firsts[j])
            lanes = h[:count]
            lanes *= m
            lanes ^= k[first : first + count]
    tails = lengths & 3
    if tails.any():
        tailed = np.flatnonzero(tails)
        end = starts[tailed] + lengths[tailed]
        size = tails[tailed]
        extra = np.zeros(len(tailed), np.uint32)
        for byte in range(3):  # Java's fall-through switch: byte i of the tail, if present
            has = size > byte
            where = end[has] - size[has] + byte
            extra[has] |= data[where].astype(np.uint32) << np.uint32(8 * byte)
        h[tailed] = (h[tailed] ^ extra) * m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    result = np.empty_like(h)
    result[order] = h
    return result


def stable_order(small: npt.NDArray[np.integer]) -> npt.NDArray[np.intp]:
    """A stable argsort of small non-negative ints; as 16 bits numpy radix-sorts, ~4x faster."""
    if len(small) and int(small.max()) < 2**15 and int(small.min()) >= 0:
        small = small.astype(np.int16)
    return np.argsort(small, kind="stable")


@runtime_checkable
class Partitioner(Protocol):
    """Chooses partitions for keyless records; one instance per topic (it holds its state)."""

    def partition(self, num_partitions: int) -> int:
        """The partition for the next keyless record."""
        ...

    def on_new_batch(self) -> None:
        """Called when the producer closes the current batch for this topic."""
        ...


class StickyPartitioner:
    """KIP-480 sticky partitioning for keyless records.

    One partition until its batch completes gives fewer, fuller batches (each a
    Parquet file); a random other one afterwards still spreads load. The switch
    is drawn on the next ``partition`` call, when the partition count is known.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        # Private by default: seeding the global ``random`` elsewhere cannot skew it.
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._current: int | None = None
        self._switch_due = False

    def partition(self, num_partitions: int) -> int:
        """The current sticky partition, drawing a new one when a switch is due."""
        _check_partitions(num_partitions)
        with self._lock:
            current = self._current
            if current is None or current >= num_partitions:
                # First use, or the topic shrank under us: any partition will do.
                current = self._rng.randrange(num_partitions)
            elif self._switch_due and num_partitions > 1:
                # Uniform over the other n-1 partitions, without a retry loop.
                pick = self._rng.randrange(num_partitions - 1)
                current = pick + 1 if pick >= current else pick
            self._current = current
            self._switch_due = False
            return current

    def on_new_batch(self) -> None:
        """Mark the current batch as completed so the next record moves on."""
        with self._lock:
            self._switch_due = True


class RoundRobinPartitioner:
    """Cycles keyless records through partitions, like Kafka's RoundRobinPartitioner."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = 0

    def partition(self, num_partitions: int) -> int:
        """The next partition in the cycle."""
        _check_partitions(num_partitions)
        with self._lock:
            n = self._counter
            self._counter = n + 1
        return n % num_partitions

    def on_new_batch(self) -> None:
        """Batch boundaries do not affect round-robin; present for the protocol."""


def make_keyless_partitioner(strategy: KeylessStrategy) -> Partitioner:
    """A fresh keyless partitioner for one topic; INVALID_CONFIG for an unknown strategy."""
    if strategy == "sticky":
        return StickyPartitioner()
    if strategy == "round_robin":
        return RoundRobinPartitioner()
    raise InvalidConfigError(
        f"unknown keyless partitioner strategy {strategy!r}; expected 'sticky' or 'round_robin'"
    )


def choose_partition(key: bytes | None, num_partitions: int, keyless: Partitioner) -> int:
    """The partition for one record: by key hash when keyed (not None), else by ``keyless``."""
    if key is None:
        return keyless.partition(num_partitions)
    return partition_for_key(key, num_partitions)
