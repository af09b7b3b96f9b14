"""Tests for lakelog.partitioner: Kafka-compatible key hashing and keyless strategies.

Compatibility is pinned three ways: published vectors from Kafka's own test suite,
vectors kafka-python checks against the Java producer, and a property test against a
second, deliberately naive murmur2 written below in Java's signed-int style.
"""

from __future__ import annotations

import ctypes
import random
import threading
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.errors import InvalidConfigError, InvalidPartitionsError
from lakelog.partitioner import (
    VECTOR_KEY_BYTES,
    Partitioner,
    RoundRobinPartitioner,
    StickyPartitioner,
    choose_partition,
    make_keyless_partitioner,
    murmur2,
    partition_for_key,
    partitions_for_keys,
    to_positive,
)
from lakelog.produce import assign_partitions
from lakelog.produce_batch import ProduceBatch

# --------------------------------------------------------------------------- reference


def _i32(x: int) -> int:
    """Wrap to a Java ``int`` the way the JVM does on overflow."""
    return ctypes.c_int32(x).value


def _ushr(x: int, s: int) -> int:
    """Java's ``>>>`` on an ``int``."""
    return _i32((x & 0xFFFFFFFF) >> s)


def reference_murmur2(data: bytes) -> int:
    """A line-by-line transcription of the Java algorithm into signed 32-bit steps.

    Deliberately unlike the production code: bytes are turned into Java's signed
    ``byte`` first, blocks are built byte by byte, every operation wraps through
    ctypes, and the tail is the fall-through switch spelled out.
    """
    signed = [ctypes.c_int8(b).value for b in data]
    length = len(signed)
    m = _i32(0x5BD1E995)
    r = 24
    h = _i32(_i32(0x9747B28C) ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = 0
        for j in range(4):
            k = _i32(k + ((signed[i4 + j] & 0xFF) << (8 * j)))
        k = _i32(k * m)
        k = _i32(k ^ _ushr(k, r))
        k = _i32(k * m)
        h = _i32(h * m)
        h = _i32(h ^ k)
    rem = length % 4
    base = length & ~3
    if rem == 3:
        h = _i32(h ^ ((signed[base + 2] & 0xFF) << 16))
    if rem >= 2:
        h = _i32(h ^ ((signed[base + 1] & 0xFF) << 8))
    if rem >= 1:
        h = _i32(h ^ (signed[base] & 0xFF))
        h = _i32(h * m)
    h = _i32(h ^ _ushr(h, 13))
    h = _i32(h * m)
    h = _i32(h ^ _ushr(h, 15))
    return h


# ----------------------------------------------------------------------------- murmur2

# Kafka's clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.testMurmur2.
KAFKA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2_VECTORS)
def test_murmur2_matches_kafka_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2_VECTORS)
def test_reference_matches_kafka_utils_test(data: bytes, expected: int) -> None:
    # The reference is only a useful oracle if it is itself right.
    assert reference_murmur2(data) == expected


@given(st.binary(max_size=200))
def test_murmur2_agrees_with_reference(data: bytes) -> None:
    assert murmur2(data) == reference_murmur2(data)


@given(st.binary(max_size=200))
def test_murmur2_is_signed_32_bit(data: bytes) -> None:
    assert -(2**31) <= murmur2(data) < 2**31


@pytest.mark.parametrize("length", range(13))
def test_murmur2_every_tail_length(length: int) -> None:
    # Covers all four tail cases with and without full blocks, high bytes included.
    data = bytes((0xF0 + i) & 0xFF for i in range(length))
    assert murmur2(data) == reference_murmur2(data)


# --------------------------------------------------------------------------- to_positive


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, 0),
        (5, 5),
        (2**31 - 1, 2**31 - 1),
        (-1, 0x7FFFFFFF),
        (-(2**31), 0),  # where abs() would differ: Kafka clears the sign bit
        (-973932308, 1173551340),
    ],
)
def test_to_positive(n: int, expected: int) -> None:
    assert to_positive(n) == expected


# --------------------------------------------------------------------- partition_for_key

# Worked by hand from the Kafka vectors above: to_positive(h) = h + 2**31 for h < 0,
# then modulo n. E.g. "foobar": -790332482 + 2147483648 = 1357151166; % 100 = 66.
HAND_PAIRS = [
    (b"21", 7, 3),
    (b"21", 100, 40),
    (b"foobar", 10, 6),
    (b"foobar", 100, 66),
    (b"a-little-bit-long-string", 3, 2),
    (b"a-little-bit-long-string", 12, 8),
    (b"a-little-bit-longer-string", 10, 9),
    (b"a-little-bit-longer-string", 12, 11),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 7, 3),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 100, 77),
    (b"abc", 7, 4),
    (b"abc", 12, 3),
    (b"abc", 1, 0),
]

# Pairs computed with reference_murmur2 above (which reproduces the Kafka vectors).
REFERENCE_PAIRS = [
    (b"key-0", 3, 1),
    (b"key-0", 100, 41),
    (b"user-42", 12, 4),
    (b"user-42", 100, 60),
    (b"\x00", 7, 0),
    (b"\xff\xff\xff\xff", 100, 29),
    (b"\x80\x00\x00\x00\x01", 100, 84),
    ("ключ".encode(), 12, 8),
]

# kafka-python's test_murmur2_java_compatibility: partitions the Java producer picks
# out of 1000, including the empty key (which Kafka hashes; only null is keyless).
JAVA_PRODUCER_1000 = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
]


@pytest.mark.parametrize(("key", "n", "expected"), HAND_PAIRS + REFERENCE_PAIRS)
def test_partition_for_key_pairs(key: bytes, n: int, expected: int) -> None:
    assert partition_for_key(key, n) == expected
    assert to_positive(reference_murmur2(key)) % n == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PRODUCER_1000)
def test_partition_for_key_matches_java_producer(key: bytes, expected: int) -> None:
    assert partition_for_key(key, 1000) == expected


@given(st.binary(max_size=200), st.integers(min_value=1, max_value=10_000))
def test_partition_for_key_in_range_and_deterministic(key: bytes, n: int) -> None:
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert partition_for_key(bytes(key), n) == p
    assert p == to_positive(reference_murmur2(key)) % n


@given(st.binary(max_size=200))
def test_partition_for_key_single_partition(key: bytes) -> None:
    assert partition_for_key(key, 1) == 0


@pytest.mark.parametrize("n", [0, -1, -100])
def test_partition_for_key_rejects_bad_counts(n: int) -> None:
    with pytest.raises(InvalidPartitionsError, match="at least 1"):
        partition_for_key(b"k", n)


# ------------------------------------------------------------------- partitions_for_keys


def reference_partitions(keys: list[bytes | None], n: int) -> list[int]:
    return [-1 if k is None else to_positive(reference_murmur2(k)) % n for k in keys]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=300)), max_size=40),
    st.integers(min_value=1, max_value=10_000),
    st.integers(min_value=0, max_value=3),
)
def test_partitions_for_keys_agrees_with_reference(
    keys: list[bytes | None], n: int, skip: int
) -> None:
    # A sliced array (non-zero offset) must read the same keys as a fresh one.
    array = pa.array([b"pad"] * skip + keys, pa.binary()).slice(skip)
    assert partitions_for_keys(array, n).tolist() == reference_partitions(keys, n)


@pytest.mark.parametrize("n", [1, 6, 1000, 2**31 - 1])
def test_partitions_for_keys_every_length_0_to_300(n: int) -> None:
    # Random binary keys of every length 0..300, several per length, in one batch: every
    # tail case at every block count, high bytes included, mixed lengths side by side.
    rng = random.Random(n)
    keys: list[bytes | None] = [rng.randbytes(length) for length in range(301) for _ in range(3)]
    rng.shuffle(keys)
    assert partitions_for_keys(pa.array(keys, pa.binary()), n).tolist() == (
        reference_partitions(keys, n)
    )


@pytest.mark.parametrize("length", [*range(13), 16, 36, 64, 301])
@pytest.mark.parametrize("gaps", [False, True])
def test_partitions_for_keys_all_one_length(length: int, gaps: bool) -> None:
    # Keys of one length (ids of one format, UUIDs), back to back or with gaps.
    rng = random.Random(length)
    keys: list[bytes | None] = [rng.randbytes(length) for _ in range(50)]
    if gaps:  # a null takes no bytes; a key too long for the matrix leaves a gap
        keys = [None if i % 7 == 3 else k for i, k in enumerate(keys)]
        keys[20] = rng.randbytes(VECTOR_KEY_BYTES + 1)
    array = pa.array([b"x" * (length + 1), *keys], pa.binary()).slice(1)
    assert partitions_for_keys(array, 97).tolist() == reference_partitions(keys, 97)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=1, max_value=300),
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=0, max_value=3),
    st.randoms(use_true_random=False),
)
def test_partitions_for_keys_one_length_no_nulls(
    length: int, count: int, skip: int, rng: random.Random
) -> None:
    # The usual request (keys of one format, none null), also when the column is a slice
    # of a longer one.
    keys: list[bytes | None] = [rng.randbytes(length) for _ in range(count)]
    array = pa.array([rng.randbytes(length)] * skip + keys, pa.binary()).slice(skip)
    assert partitions_for_keys(array, 7).tolist() == reference_partitions(keys, 7)


def test_partitions_for_keys_long_keys_and_nulls() -> None:
    keys: list[bytes | None] = [b"", None, bytes(range(256)) * 4, b"abc", None, b"x" * 513]
    got = partitions_for_keys(pa.array(keys, pa.binary()), 1000).tolist()
    assert got == reference_partitions(keys, 1000)
    assert got[0] == 681  # the Java producer's partition for the empty key


def test_partitions_for_keys_edge_shapes() -> None:
    assert partitions_for_keys(pa.array([], pa.binary()), 3).tolist() == []
    assert partitions_for_keys(pa.nulls(4, pa.binary()), 3).tolist() == [-1] * 4
    strings = pa.array(["foobar", "abc"], pa.string())  # cast to binary: the same bytes
    assert partitions_for_keys(strings, 100).tolist() == [66, 7]
    with pytest.raises(InvalidPartitionsError, match="at least 1"):
        partitions_for_keys(pa.array([b"k"]), 0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(min_value=0, max_value=4)),
            st.one_of(st.none(), st.binary(max_size=40)),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_assign_partitions_per_row_rule(rows: list[tuple[int | None, bytes | None]]) -> None:
    # The batch-wide choice equals Kafka's rule applied row by row: an explicit partition
    # stays, a key is hashed, a null key takes the batch's one keyless (sticky) choice.
    batch = ProduceBatch.from_columns(
        partition=[p for p, _ in rows], key=[k for _, k in rows], value=[b"v"] * len(rows)
    )
    sticky = StickyPartitioner(random.Random(7)).partition(5)
    got = assign_partitions(batch, 5, StickyPartitioner(random.Random(7)))
    expected = [
        p if p is not None else (sticky if k is None else to_positive(reference_murmur2(k)) % 5)
        for p, k in rows
    ]
    assert got.column("partition").to_pylist() == expected


# ------------------------------------------------------------------------------ sticky


def test_sticky_stays_until_new_batch() -> None:
    sp = StickyPartitioner(random.Random(1))
    first = sp.partition(10)
    assert all(sp.partition(10) == first for _ in range(500))


@given(st.integers(min_value=2, max_value=64), st.integers(min_value=0, max_value=2**32))
def test_sticky_moves_to_a_different_partition(n: int, seed: int) -> None:
    sp = StickyPartitioner(random.Random(seed))
    previous = sp.partition(n)
    for _ in range(20):
        sp.on_new_batch()
        current = sp.partition(n)
        assert 0 <= current < n
        assert current != previous
        # ...and sticks to the new one until the next batch.
        assert sp.partition(n) == current
        previous = current


def test_sticky_uses_every_partition_over_many_batches() -> None:
    n = 8
    sp = StickyPartitioner(random.Random(7))
    seen: Counter[int] = Counter()
    for _ in range(4000):
        seen[sp.partition(n)] += 1
        sp.on_new_batch()
    assert set(seen) == set(range(n))
    # Uniform over the other n-1 partitions: each ~500 of 4000; allow wide slack.
    assert min(seen.values()) > 350


def test_sticky_default_rng_uses_every_partition() -> None:
    sp = StickyPartitioner()
    seen: set[int] = set()
    for _ in range(2000):
        seen.add(sp.partition(5))
        sp.on_new_batch()
    assert seen == set(range(5))


def test_sticky_single_partition_is_always_zero() -> None:
    sp = StickyPartitioner(random.Random(3))
    for _ in range(50):
        assert sp.partition(1) == 0
        sp.on_new_batch()


def test_sticky_repeated_new_batch_switches_once() -> None:
    sp = StickyPartitioner(random.Random(5))
    first = sp.partition(4)
    sp.on_new_batch()
    sp.on_new_batch()
    second = sp.partition(4)
    assert second != first
    assert sp.partition(4) == second


def test_sticky_new_batch_before_first_use() -> None:
    sp = StickyPartitioner(random.Random(5))
    sp.on_new_batch()
    p = sp.partition(3)
    assert 0 <= p < 3
    assert sp.partition(3) == p


def test_sticky_reselects_when_partition_count_shrinks() -> None:
    sp = StickyPartitioner(random.Random(0))
    sp.on_new_batch()
    while sp.partition(100) < 10:  # find a sticky choice the smaller topic lacks
        sp.on_new_batch()
    p = sp.partition(10)
    assert 0 <= p < 10
    assert sp.partition(10) == p


def test_sticky_is_consistent_across_threads() -> None:
    sp = StickyPartitioner(random.Random(11))
    results: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        got = [sp.partition(16) for _ in range(200)]
        with lock:
            results.extend(got)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Without a batch boundary every thread must see the same sticky partition.
    assert len(results) == 1600
    assert len(set(results)) == 1


@pytest.mark.parametrize("n", [0, -3])
def test_sticky_rejects_bad_counts(n: int) -> None:
    with pytest.raises(InvalidPartitionsError, match="at least 1"):
        StickyPartitioner().partition(n)


# ------------------------------------------------------------------------- round robin


def test_round_robin_cycles_in_order() -> None:
    rr = RoundRobinPartitioner()
    assert [rr.partition(4) for _ in range(10)] == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]


@given(st.integers(min_value=1, max_value=50), st.integers(min_value=1, max_value=5))
def test_round_robin_is_even(n: int, rounds: int) -> None:
    rr = RoundRobinPartitioner()
    counts = Counter(rr.partition(n) for _ in range(n * rounds))
    assert counts == dict.fromkeys(range(n), rounds)


def test_round_robin_single_partition_is_always_zero() -> None:
    rr = RoundRobinPartitioner()
    assert {rr.partition(1) for _ in range(20)} == {0}


def test_round_robin_ignores_batch_boundaries() -> None:
    rr = RoundRobinPartitioner()
    got: list[int] = []
    for _ in range(6):
        got.append(rr.partition(3))
        rr.on_new_batch()
    assert got == [0, 1, 2, 0, 1, 2]


def test_round_robin_is_even_across_threads() -> None:
    rr = RoundRobinPartitioner()
    n, per_thread, threads_n = 7, 700, 8
    counts: Counter[int] = Counter()
    lock = threading.Lock()

    def worker() -> None:
        local = Counter(rr.partition(n) for _ in range(per_thread))
        with lock:
            counts.update(local)

    threads = [threading.Thread(target=worker) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Each slot handed out exactly once, so the spread is exact, not approximate.
    assert counts == dict.fromkeys(range(n), per_thread * threads_n // n)


@pytest.mark.parametrize("n", [0, -1])
def test_round_robin_rejects_bad_counts(n: int) -> None:
    with pytest.raises(InvalidPartitionsError, match="at least 1"):
        RoundRobinPartitioner().partition(n)


def test_bool_is_not_a_partition_count() -> None:
    with pytest.raises(InvalidPartitionsError):
        RoundRobinPartitioner().partition(True)


# ---------------------------------------------------------------- factory and dispatch


def test_factory_builds_each_strategy() -> None:
    sticky = make_keyless_partitioner("sticky")
    rr = make_keyless_partitioner("round_robin")
    assert isinstance(sticky, StickyPartitioner)
    assert isinstance(rr, RoundRobinPartitioner)
    assert isinstance(sticky, Partitioner)
    assert isinstance(rr, Partitioner)
    # Fresh state per call: partitioners are per topic.
    assert make_keyless_partitioner("round_robin") is not rr


def test_factory_rejects_unknown_strategy() -> None:
    with pytest.raises(InvalidConfigError, match="random"):
        make_keyless_partitioner("random")  # type: ignore[arg-type]


class _RecordingPartitioner:
    def __init__(self, answer: int) -> None:
        self.answer = answer
        self.calls: list[int] = []

    def partition(self, num_partitions: int) -> int:
        self.calls.append(num_partitions)
        return self.answer

    def on_new_batch(self) -> None:
        pass


def test_choose_partition_keyed_uses_hash() -> None:
    keyless = _RecordingPartitioner(answer=999)
    assert choose_partition(b"foobar", 100, keyless) == 66
    assert choose_partition(b"", 1000, keyless) == 681  # empty key is still a key
    assert keyless.calls == []


def test_choose_partition_keyless_delegates() -> None:
    keyless = _RecordingPartitioner(answer=2)
    assert choose_partition(None, 5, keyless) == 2
    assert keyless.calls == [5]


def test_choose_partition_with_real_keyless() -> None:
    rr = RoundRobinPartitioner()
    assert [choose_partition(None, 3, rr) for _ in range(4)] == [0, 1, 2, 0]


@pytest.mark.parametrize("key", [b"k", None])
def test_choose_partition_rejects_bad_counts(key: bytes | None) -> None:
    with pytest.raises(InvalidPartitionsError):
        choose_partition(key, 0, RoundRobinPartitioner())
