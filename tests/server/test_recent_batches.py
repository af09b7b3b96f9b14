"""RecentBatches: the cache may answer less than storage would, never something different."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from server.recent_batches import RecentBatches


def rows(base: int, n: int, tag: str = "v", value_bytes: int = 8) -> pa.Table:
    """A committed batch as the append listener hands it over: offsets base..base+n-1."""
    return pa.table(
        {
            "offset": pa.array(range(base, base + n), pa.int64()),
            "key": pa.nulls(n, pa.binary()),
            "value": pa.array(
                [f"{tag}{o}".encode().ljust(value_bytes, b".") for o in range(base, base + n)],
                pa.binary(),
            ),
        }
    )


#: A byte limit no test answer reaches.
ANY = 1 << 30


def offsets(table: pa.Table | None) -> list[int] | None:
    return None if table is None else table.column("offset").to_pylist()


def test_reads_from_inside_a_batch_and_across_contiguous_batches() -> None:
    cache = RecentBatches(1 << 20)
    cache.add("t", 0, rows(0, 5))
    cache.add("t", 0, rows(5, 3))
    assert offsets(cache.read("t", 0, 0, 100, ANY)) == list(range(8))
    assert offsets(cache.read("t", 0, 3, 100, ANY)) == list(range(3, 8))
    assert offsets(cache.read("t", 0, 2, 2, ANY)) == [2, 3]
    assert offsets(cache.read("t", 0, 4, 2, ANY)) == [4, 5]  # max_records spans the boundary
    assert offsets(cache.read("t", 0, 7, 1, ANY)) == [7]
    assert cache.read("t", 0, 8, 100, ANY) is None  # the head: nothing cached yet
    assert cache.read("t", 1, 0, 100, ANY) is None  # another partition
    assert cache.read("u", 0, 0, 100, ANY) is None  # another topic
    values = cache.read("t", 0, 4, 2, ANY)
    assert values is not None and values.column("value").to_pylist() == [b"v4......", b"v5......"]


def test_a_gap_stops_the_answer_and_reads_inside_it_miss() -> None:
    cache = RecentBatches(1 << 20)
    cache.add("t", 0, rows(0, 5))
    cache.add("t", 0, rows(10, 2))  # 5..9 were written by another broker
    assert offsets(cache.read("t", 0, 3, 100, ANY)) == [3, 4]
    for inside in (5, 7, 9):
        assert cache.read("t", 0, inside, 100, ANY) is None
    assert offsets(cache.read("t", 0, 10, 100, ANY)) == [10, 11]
    assert cache.read("t", 0, 12, 100, ANY) is None


def test_batches_added_out_of_order_are_still_read_in_offset_order() -> None:
    cache = RecentBatches(1 << 20)
    cache.add("t", 0, rows(5, 5))
    cache.add("t", 0, rows(0, 5))
    assert offsets(cache.read("t", 0, 0, 100, ANY)) == list(range(10))


def test_hits_and_misses_are_counted() -> None:
    cache = RecentBatches(1 << 20)
    cache.add("t", 0, rows(0, 2))
    cache.read("t", 0, 0, 10, ANY)
    cache.read("t", 0, 1, 10, ANY)
    cache.read("t", 0, 2, 10, ANY)
    cache.read("t", 3, 0, 10, ANY)
    assert (cache.hits, cache.misses) == (2, 2)


def test_eviction_by_bytes_drops_the_oldest_batches_first() -> None:
    size = rows(0, 4).nbytes
    cache = RecentBatches(size * 2 + size // 2)  # room for two batches
    cache.add("t", 0, rows(0, 4))
    cache.add("t", 1, rows(0, 4))
    cache.add("t", 0, rows(4, 4))  # evicts t-0 0..3, the oldest added
    assert cache.read("t", 0, 0, 100, ANY) is None
    assert offsets(cache.read("t", 1, 0, 100, ANY)) == [0, 1, 2, 3]
    assert offsets(cache.read("t", 0, 4, 100, ANY)) == [4, 5, 6, 7]
    cache.add("t", 0, rows(8, 4))  # evicts t-1
    assert cache.read("t", 1, 0, 100, ANY) is None
    assert offsets(cache.read("t", 0, 4, 100, ANY)) == list(range(4, 12))


def test_a_batch_larger_than_the_cache_is_not_kept() -> None:
    cache = RecentBatches(rows(0, 4).nbytes)
    cache.add("t", 0, rows(0, 4))
    cache.add("t", 0, rows(4, 100))  # too big: skipped, the rest stays
    assert offsets(cache.read("t", 0, 0, 100, ANY)) == [0, 1, 2, 3]
    assert cache.read("t", 0, 4, 100, ANY) is None


def test_a_zero_sized_cache_keeps_nothing() -> None:
    cache = RecentBatches(0)
    cache.add("t", 0, rows(0, 4))
    assert cache.read("t", 0, 0, 100, ANY) is None
    cache.add("t", 0, rows(0, 0))  # and an empty batch is never an entry
    assert cache.read("t", 0, 0, 100, ANY) is None


def test_forget_drops_a_topic_and_frees_its_bytes() -> None:
    size = rows(0, 4).nbytes
    cache = RecentBatches(size * 2)
    cache.add("t", 0, rows(0, 4))
    cache.add("u", 0, rows(0, 4))
    cache.forget("t")
    assert cache.read("t", 0, 0, 100, ANY) is None
    cache.add("v", 0, rows(0, 4))  # fits without evicting u: t's bytes were released
    assert offsets(cache.read("u", 0, 0, 100, ANY)) == [0, 1, 2, 3]
    assert offsets(cache.read("v", 0, 0, 100, ANY)) == [0, 1, 2, 3]


def test_a_new_batch_at_the_same_offsets_replaces_the_old_one() -> None:
    """A topic deleted and created again starts at offset 0 again: never serve the old data."""
    size = rows(0, 4).nbytes
    cache = RecentBatches(size * 2)
    cache.add("t", 0, rows(0, 4, tag="old"))
    cache.add("t", 0, rows(0, 4, tag="new"))
    got = cache.read("t", 0, 0, 100, ANY)
    assert got is not None and got.column("value").to_pylist()[0] == b"new0...."
    cache.add("t", 0, rows(4, 4, tag="new"))  # fits: the replaced batch's bytes were freed
    assert offsets(cache.read("t", 0, 0, 100, ANY)) == list(range(8))


def test_the_byte_limit_ends_the_answer_with_the_batch_that_reaches_it() -> None:
    """A consumer far behind is answered one fetch's worth, not everything cached after it."""
    cache = RecentBatches(1 << 20)
    for base in range(0, 40, 4):
        cache.add("t", 0, rows(base, 4, value_bytes=10))  # 40 value bytes per batch
    assert offsets(cache.read("t", 0, 0, 100, 80)) == list(range(8))
    assert offsets(cache.read("t", 0, 0, 100, 81)) == list(range(12))
    assert offsets(cache.read("t", 0, 2, 100, 20)) == [2, 3]  # half a batch: 20 bytes
    assert offsets(cache.read("t", 0, 2, 100, 1)) == [2, 3]  # at least the first piece


def test_no_records_asked_is_a_miss() -> None:
    cache = RecentBatches(1 << 20)
    cache.add("t", 0, rows(0, 4))
    assert cache.read("t", 0, 0, 0, ANY) is None


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int, list[tuple[int, int]]]:
    """Committed batches of one partition (some by other brokers), a cache size, reads."""
    batches: list[tuple[int, int]] = []
    base = 0
    for _ in range(draw(st.integers(1, 12))):
        n = draw(st.integers(1, 6))
        batches.append((base, n))
        base += n
    seen_here = draw(st.lists(st.booleans(), min_size=len(batches), max_size=len(batches)))
    mine = [b for b, here in zip(batches, seen_here, strict=True) if here]
    capacity = draw(st.integers(0, 8)) * rows(0, 3).nbytes
    reads = draw(st.lists(st.tuples(st.integers(0, base + 2), st.integers(1, 20)), max_size=20))
    return mine, capacity, reads


@settings(max_examples=200, deadline=None)
@given(histories())
def test_any_answer_is_exactly_what_storage_holds(
    history: tuple[list[tuple[int, int]], int, list[tuple[int, int]]],
) -> None:
    mine, capacity, reads = history
    cache = RecentBatches(capacity)
    for base, n in mine:
        cache.add("t", 0, rows(base, n))
    for offset, max_records in reads:
        got = cache.read("t", 0, offset, max_records, ANY)
        if got is None:
            continue
        # Non-empty, starts at the offset asked for, contiguous, within max_records, and
        # the same values storage holds for those offsets.
        assert 1 <= got.num_rows <= max_records
        assert offsets(got) == list(range(offset, offset + got.num_rows))
        assert (
            got.column("value").to_pylist()
            == rows(offset, got.num_rows).column("value").to_pylist()
        )
