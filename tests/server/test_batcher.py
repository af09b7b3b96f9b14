"""ProduceBatcher without storage: a fake log records every group commit it is asked for.

No test asserts on elapsed time. Lingering is shown by a request that stays
queued (its future not done) until something other than the clock commits it,
and every wait is bounded by a generous timeout that only fails a broken test.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pytest

from lakelog.errors import (
    KafkaStorageError,
    LakelogError,
    OutOfOrderSequenceError,
    ThrottlingQuotaExceededError,
    UnknownServerError,
)
from lakelog.produce import PreparedBatch
from lakelog.topic_log import AppendResult, TopicLog
from server.batcher import COMMIT_PHASES, ProduceBatcher
from server.settings import BrokerSettings

T = TypeVar("T")
GUARD = 30  # seconds; only reached when the batcher hangs


class FakeLog:
    """Just enough of a TopicLog and its appender: ``name``, ``stage`` and ``commit_staged``,
    scripted.

    ``calls`` lists the group commits in the order they were committed.
    """

    def __init__(self, name: str = "t") -> None:
        self.name = name
        self.calls: list[list[PreparedBatch]] = []
        self.next_offset: dict[int, int] = {}
        self.gate = threading.Event()  # commits block until it is set
        self.gate.set()
        self.entered = threading.Event()  # set when a commit has started
        self.fail_with: BaseException | None = None
        self.per_request: Callable[[int, PreparedBatch], LakelogError | None] | None = None
        self.staged: list[list[PreparedBatch]] = []
        self.abandoned: list[list[PreparedBatch]] = []
        self.appender = self

    def stage(self, batches: Sequence[PreparedBatch]) -> list[PreparedBatch]:
        self.staged.append(list(batches))
        return list(batches)

    def abandon(self, staged: list[PreparedBatch]) -> None:
        self.abandoned.append(staged)

    def commit_staged(self, batches: list[PreparedBatch]) -> list[AppendResult | Any]:
        self.calls.append(list(batches))
        self.entered.set()
        assert self.gate.wait(GUARD), "test never opened the gate"
        if self.fail_with is not None:
            raise self.fail_with
        results: list[AppendResult | LakelogError] = []
        for i, batch in enumerate(batches):
            error = self.per_request(i, batch) if self.per_request else None
            if error is not None:
                results.append(error)
                continue
            partitions = batch.table.column("partition").to_pylist()
            offsets = []
            for p in partitions:
                offsets.append(self.next_offset.get(p, 0))
                self.next_offset[p] = offsets[-1] + 1
            results.append(AppendResult(partitions, offsets, [0] * len(offsets), [], 1))
        return results


def as_log(fake: FakeLog) -> TopicLog:
    return fake  # type: ignore[return-value]


def batch(n: int = 1, partition: int = 0, value_bytes: int = 10) -> PreparedBatch:
    return PreparedBatch(
        pa.table(
            {
                "partition": pa.array([partition] * n, pa.int32()),
                "value": pa.array([b"v" * value_bytes] * n, pa.binary()),
            }
        )
    )


def settings(**values: Any) -> BrokerSettings:
    return BrokerSettings(root="unused", **values)


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def guarded() -> T:
        return await asyncio.wait_for(main(), GUARD)

    return asyncio.run(guarded())


async def settle() -> None:
    """Let every ready task run (the flusher included) without waiting on any clock."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_requests_waiting_together_share_one_commit() -> None:
    fake = FakeLog()

    async def main() -> list[AppendResult]:
        batcher = ProduceBatcher(settings(linger_ms=0))
        futures = [await batcher.submit(as_log(fake), batch(2)) for _ in range(5)]
        results = await asyncio.gather(*futures)
        await batcher.close()
        return results

    results = run(main)
    assert [len(call) for call in fake.calls] == [5]
    assert [r.offsets for r in results] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


def test_linger_holds_a_request_for_company() -> None:
    fake = FakeLog()

    async def main() -> None:
        observed: list[tuple[str, int, int, float]] = []

        def on_commit(topic: str, requests: int, records: int, seconds: float) -> None:
            observed.append((topic, requests, records, seconds))

        batcher = ProduceBatcher(settings(linger_ms=60_000), on_commit=on_commit)
        first = await batcher.submit(as_log(fake), batch(1))
        await settle()
        assert not first.done() and fake.calls == []  # lingering, nothing committed
        assert batcher.buffered_bytes > 0
        second = await batcher.submit(as_log(fake), batch(3))
        await settle()
        assert not second.done() and fake.calls == []
        await batcher.close()  # close() commits what lingers instead of dropping it
        assert (await first).offsets == [0]
        assert (await second).offsets == [1, 2, 3]
        assert [len(call) for call in fake.calls] == [2]
        assert batcher.buffered_bytes == 0
        ((topic, requests, records, seconds),) = observed
        assert (topic, requests, records) == ("t", 2, 4) and seconds >= 0

    run(main)


def test_each_group_committed_here_reports_its_phases() -> None:
    fake = FakeLog()

    async def main() -> None:
        phases: list[tuple[str, str, float]] = []
        batcher = ProduceBatcher(
            settings(linger_ms=0), on_phase=lambda *observed: phases.append(observed)
        )
        await (await batcher.submit(as_log(fake), batch(2)))
        await (await batcher.submit(as_log(fake), batch(1)))
        await batcher.close()
        # Which phases are reported, and in what order; how long they took is for benchmarks.
        assert [(topic, phase) for topic, phase, _ in phases] == [
            ("t", phase) for phase in COMMIT_PHASES
        ] * 2
        # The phase names are the metric's label values, which dashboards select on.
        assert COMMIT_PHASES == ("stage", "wait", "commit")

    run(main)


def test_linger_expiry_commits_without_more_requests() -> None:
    fake = FakeLog()

    async def main() -> None:
        batcher = ProduceBatcher(settings(linger_ms=20))
        result = await (await batcher.submit(as_log(fake), batch(1)))
        assert result.offsets == [0]
        await batcher.close()

    run(main)
    assert len(fake.calls) == 1


def test_batch_bytes_commits_before_linger_ends() -> None:
    fake = FakeLog()
    small, big = batch(1, value_bytes=10), batch(1, value_bytes=5_000)
    limit = small.size_bytes * 2 + 1
    assert big.size_bytes > limit

    async def main() -> None:
        batcher = ProduceBatcher(settings(linger_ms=60_000, batch_bytes=limit))
        a = await batcher.submit(as_log(fake), small)
        b = await batcher.submit(as_log(fake), small)
        await settle()
        assert not a.done() and not b.done()  # two small ones stay under batch_bytes
        c = await batcher.submit(as_log(fake), small)  # the third reaches it
        await asyncio.gather(a, b, c)
        assert [len(call) for call in fake.calls] == [3]
        # One request at or over batch_bytes goes at once, alone.
        assert (await (await batcher.submit(as_log(fake), big))).offsets == [3]
        assert [len(call) for call in fake.calls] == [3, 1]
        await batcher.close()

    run(main)


def test_a_full_group_waits_for_a_request_still_being_received() -> None:
    # Producers that each wait for their answer send their next requests together; the
    # last of the burst must not miss the group because the others reached batch_bytes.
    fake = FakeLog()
    small = batch(1, value_bytes=10)
    limit = small.size_bytes * 2

    async def main() -> None:
        batcher = ProduceBatcher(settings(linger_ms=60_000, batch_bytes=limit))
        late_can_submit = asyncio.Event()
        receiving = asyncio.Event()

        async def late() -> AppendResult:
            with batcher.receiving("t"):
                receiving.set()
                await late_can_submit.wait()  # its body is still being read
                future = await batcher.submit(as_log(fake), small)
            return await future

        late_task = asyncio.create_task(late())
        await receiving.wait()
        a = await batcher.submit(as_log(fake), small)
        b = await batcher.submit(as_log(fake), small)  # batch_bytes reached
        await settle()
        assert not a.done() and fake.calls == []  # held for the one being received
        late_can_submit.set()
        await asyncio.gather(a, b, late_task)
        assert [len(call) for call in fake.calls] == [3]

        # A request that fails while being received releases the group too.
        async def refused() -> None:
            with batcher.receiving("t"):
                receiving.set()
                await late_can_submit.wait()
                raise ValueError("undecodable body")

        receiving.clear()
        late_can_submit.clear()
        failing = asyncio.create_task(refused())
        await receiving.wait()
        c = await batcher.submit(as_log(fake), small)
        d = await batcher.submit(as_log(fake), small)
        await settle()
        assert not c.done()
        late_can_submit.set()
        with pytest.raises(ValueError, match="undecodable"):
            await failing
        await asyncio.gather(c, d)
        assert [len(call) for call in fake.calls] == [3, 2]

        # Receiving requests of another topic do not hold this one's group.
        with batcher.receiving("other"):
            e = await batcher.submit(as_log(fake), small)
            f = await batcher.submit(as_log(fake), small)
            await asyncio.gather(e, f)
        assert [len(call) for call in fake.calls] == [3, 2, 2]
        await batcher.close()

    run(main)


@pytest.mark.parametrize("linger_ms", [20, 60_000])
def test_a_stalled_request_holds_a_full_group_only_briefly(linger_ms: int) -> None:
    # A client that never finishes sending its body holds a full group neither past
    # linger_ms nor, with a long linger (a minute: longer than the test's guard), for long.
    fake = FakeLog()
    small = batch(1, value_bytes=10)

    async def main() -> None:
        batcher = ProduceBatcher(settings(linger_ms=linger_ms, batch_bytes=small.size_bytes))
        stuck = asyncio.Event()
        receiving = asyncio.Event()

        async def stalled() -> None:
            with batcher.receiving("t"):
                receiving.set()
                await stuck.wait()

        holder = asyncio.create_task(stalled())
        await receiving.wait()
        assert (await (await batcher.submit(as_log(fake), small))).offsets == [0]
        assert not holder.done()
        stuck.set()
        await holder
        await batcher.close()

    run(main)


async def committing(
    fake: FakeLog, max_in_flight_commits: int
) -> tuple[ProduceBatcher, asyncio.Future[AppendResult]]:
    """A batcher whose first group commit (one request) is running, held at the fake's gate."""
    fake.gate.clear()
    batcher = ProduceBatcher(settings(linger_ms=0, max_in_flight_commits=max_in_flight_commits))
    first = await batcher.submit(as_log(fake), batch(1))
    assert await asyncio.to_thread(fake.entered.wait, GUARD)
    return batcher, first


def test_requests_queue_while_a_commit_runs_and_form_the_next_batch() -> None:
    fake = FakeLog()

    async def main() -> None:
        batcher, first = await committing(fake, max_in_flight_commits=1)
        later = [await batcher.submit(as_log(fake), batch(1)) for _ in range(4)]
        await settle()
        assert len(fake.calls) == 1
        fake.gate.set()
        await asyncio.gather(first, *later)
        assert [len(call) for call in fake.calls] == [1, 4]
        await batcher.close()

    run(main)


def test_the_next_group_stages_while_one_commits_and_commits_after_it() -> None:
    fake = FakeLog()

    async def main() -> None:
        batcher, first = await committing(fake, max_in_flight_commits=2)
        second = await batcher.submit(as_log(fake), batch(2))
        for _ in range(200):  # group 2 gets staged without waiting for group 1
            if len(fake.staged) == 2:
                break
            await asyncio.sleep(0.01)
        assert [len(s) for s in fake.staged] == [1, 1]
        assert len(fake.calls) == 1 and not second.done()  # ...but commits after it
        later = [await batcher.submit(as_log(fake), batch(1)) for _ in range(3)]
        await settle()
        assert len(fake.staged) == 2  # two in flight: the rest wait and form group 3
        fake.gate.set()
        assert (await first).offsets == [0]
        assert (await second).offsets == [1, 2]
        assert [r.offsets for r in await asyncio.gather(*later)] == [[3], [4], [5]]
        assert [len(call) for call in fake.calls] == [1, 1, 3]
        await batcher.close()

    run(main)


def test_a_full_pipeline_waits_for_its_oldest_commit_without_looping() -> None:
    """With max_in_flight groups under way, the flusher sleeps until the oldest ends.

    A flusher that looped instead would create a waiting task on every turn of
    the event loop: counted by the loop's task factory.
    """
    fake = FakeLog()

    async def main() -> None:
        created = 0
        loop = asyncio.get_running_loop()

        def counting(
            loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
        ) -> asyncio.Task[Any]:
            nonlocal created
            created += 1
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(counting)
        batcher, first = await committing(fake, max_in_flight_commits=2)
        second = await batcher.submit(as_log(fake), batch(1))
        for _ in range(200):
            if len(fake.staged) == 2:
                break
            await asyncio.sleep(0.01)
        third = await batcher.submit(as_log(fake), batch(1))  # the pipeline is full
        await settle()
        before = created
        await settle()
        assert created == before
        fake.gate.set()
        await asyncio.gather(first, second, third)
        assert [len(call) for call in fake.calls] == [1, 1, 1]
        await batcher.close()

    run(main)


def test_topics_commit_separately() -> None:
    a, b = FakeLog("a"), FakeLog("b")

    async def main() -> None:
        batcher = ProduceBatcher(settings(linger_ms=0))
        futures = [await batcher.submit(as_log(log), batch(1)) for log in (a, b, a)]
        await asyncio.gather(*futures)
        await batcher.close()

    run(main)
    assert [len(call) for call in a.calls] == [2]
    assert [len(call) for call in b.calls] == [1]


def test_full_buffer_throttles_then_fails_after_max_block_ms() -> None:
    fake = FakeLog()
    fake.gate.clear()
    one = batch(1, value_bytes=1_000)

    async def main() -> None:
        batcher = ProduceBatcher(
            settings(linger_ms=0, buffer_memory=one.size_bytes + 10, max_block_ms=50)
        )
        first = await batcher.submit(as_log(fake), one)  # an empty buffer always takes one
        assert await asyncio.to_thread(fake.entered.wait, GUARD)
        with pytest.raises(ThrottlingQuotaExceededError) as refused:
            await batcher.submit(as_log(fake), one)
        assert refused.value.retriable
        assert "buffer is full" in refused.value.message
        assert len(fake.calls) == 1  # the refused request was never queued
        fake.gate.set()
        await first
        assert batcher.buffered_bytes == 0
        # Space is back: the same request is now accepted.
        assert (await (await batcher.submit(as_log(fake), one))).offsets == [1]
        await batcher.close()

    run(main)


def test_throttled_request_proceeds_when_space_frees_in_time() -> None:
    fake = FakeLog()
    fake.gate.clear()
    one = batch(1, value_bytes=1_000)

    async def main() -> None:
        batcher = ProduceBatcher(
            settings(linger_ms=0, buffer_memory=one.size_bytes + 10, max_block_ms=GUARD * 1000)
        )
        first = await batcher.submit(as_log(fake), one)
        assert await asyncio.to_thread(fake.entered.wait, GUARD)
        waiting = asyncio.ensure_future(batcher.submit(as_log(fake), one))
        await settle()
        assert not waiting.done()  # blocked on buffer space, not refused
        fake.gate.set()
        await first
        assert (await (await waiting)).offsets == [1]
        await batcher.close()

    run(main)


def test_partition_buffer_limit_throttles_only_that_partition() -> None:
    fake = FakeLog()
    fake.gate.clear()
    one = batch(1, partition=0, value_bytes=1_000)

    async def main() -> None:
        batcher = ProduceBatcher(
            settings(
                linger_ms=0,
                partition_buffer_bytes=one.size_bytes + 10,
                buffer_memory=100 * one.size_bytes,
                max_block_ms=50,
            )
        )
        first = await batcher.submit(as_log(fake), one)
        assert await asyncio.to_thread(fake.entered.wait, GUARD)
        with pytest.raises(ThrottlingQuotaExceededError):
            await batcher.submit(as_log(fake), batch(1, partition=0, value_bytes=1_000))
        other = await batcher.submit(as_log(fake), batch(1, partition=1, value_bytes=1_000))
        fake.gate.set()
        await asyncio.gather(first, other)
        await batcher.close()

    run(main)


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (KafkaStorageError("bucket unreachable"), KafkaStorageError),
        (RuntimeError("disk on fire"), UnknownServerError),
    ],
)
def test_a_failed_commit_fails_every_request_in_it(
    failure: BaseException, expected: type[LakelogError]
) -> None:
    fake = FakeLog()
    fake.fail_with = failure
    observed: list[int] = []

    async def main() -> None:
        batcher = ProduceBatcher(
            settings(linger_ms=60_000), on_commit=lambda _t, n, _r, _s: observed.append(n)
        )
        futures = [await batcher.submit(as_log(fake), batch(1, partition=i)) for i in range(3)]
        await batcher.close()
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert all(isinstance(o, expected) for o in outcomes), outcomes
        assert all(str(failure.args[0]) in str(o) for o in outcomes)
        assert batcher.buffered_bytes == 0  # the failed requests gave their space back

    run(main)
    assert observed == []  # nothing was committed, so no commit is observed
    assert [len(call) for call in fake.calls] == [3]


def test_per_request_errors_reach_only_their_request() -> None:
    fake = FakeLog()
    fake.per_request = lambda i, _: OutOfOrderSequenceError("gap") if i == 1 else None

    observed: list[tuple[int, int]] = []

    def on_commit(topic: str, requests: int, records: int, seconds: float) -> None:
        observed.append((requests, records))

    async def main() -> None:
        batcher = ProduceBatcher(settings(linger_ms=60_000), on_commit=on_commit)
        futures = [await batcher.submit(as_log(fake), batch(1 + i)) for i in range(3)]
        await batcher.close()
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert isinstance(outcomes[1], OutOfOrderSequenceError)
        assert [o.offsets for o in (outcomes[0], outcomes[2]) if isinstance(o, AppendResult)] == [
            [0],
            [1, 2, 3],
        ]

    run(main)
    assert observed == [(2, 4)]  # the refused request is not part of what was committed


def test_closed_batcher_refuses_new_requests() -> None:
    fake = FakeLog()

    async def main() -> None:
        batcher = ProduceBatcher(settings())
        await batcher.close()
        with pytest.raises(UnknownServerError, match="shutting down"):
            await batcher.submit(as_log(fake), batch(1))

    run(main)
    assert fake.calls == []


def test_close_commits_requests_of_a_replaced_topic_log() -> None:
    """A topic deleted and created again gets a new log; what lingers for the old one still
    gets its answer when the broker shuts down."""
    old, new = FakeLog("t"), FakeLog("t")

    async def main() -> None:
        batcher = ProduceBatcher(settings(linger_ms=60_000))
        stale = await batcher.submit(as_log(old), batch(1))
        fresh = await batcher.submit(as_log(new), batch(1))
        await settle()
        await batcher.close()
        assert stale.done() and fresh.done()
        assert (await stale).offsets == [0] and (await fresh).offsets == [0]

    run(main)
    assert [len(call) for call in old.calls] == [1]
    assert [len(call) for call in new.calls] == [1]


class FakeRouter:
    """A commit leader elsewhere that takes every group at once and stores it in order."""

    def __init__(self) -> None:
        self.groups: list[int] = []
        self.next_offset = 0

    def leader_url(self, topic: str) -> str | None:
        return "http://leader.invalid"

    async def hand_off(
        self,
        url: str,
        topic: str,
        batches: Sequence[PreparedBatch],
        on_taken: Callable[[], None],
    ) -> list[AppendResult | LakelogError]:
        self.groups.append(len(batches))
        on_taken()
        results: list[AppendResult | LakelogError] = []
        for b in batches:
            offsets = list(range(self.next_offset, self.next_offset + b.num_records))
            self.next_offset += b.num_records
            results.append(AppendResult([0] * len(offsets), offsets, [0] * len(offsets), [], 1))
        return results


def test_a_group_for_the_commit_leader_does_not_linger_here() -> None:
    """The leader groups handed-over requests again: a follower sends without lingering.

    With a linger far beyond the test's guard, only a group that leaves at
    once can be answered.
    """
    fake = FakeLog()
    router = FakeRouter()

    async def main() -> None:
        batcher = ProduceBatcher(settings(linger_ms=60_000), router=router)  # type: ignore[arg-type]
        result = await asyncio.wait_for(await batcher.submit(as_log(fake), batch(2)), GUARD / 2)
        assert result.offsets == [0, 1]
        assert router.groups == [1] and fake.calls == []
        await batcher.close()

    run(main)


def test_a_group_committed_here_still_lingers() -> None:
    """Without a commit leader elsewhere the linger holds: a request waits for company."""
    fake = FakeLog()

    async def main() -> None:
        batcher = ProduceBatcher(settings(linger_ms=60_000))
        pending = await batcher.submit(as_log(fake), batch(1))
        await settle()
        assert not pending.done() and fake.staged == []
        await batcher.close()  # closing commits what is queued
        assert (await pending).offsets == [0]

    run(main)
