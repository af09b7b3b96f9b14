"""A catalog opens each topic once, however many threads ask for it at once.

Two logs of one topic in one process would each have a write lock of their
own and race each other for Delta versions. Pure catalog logic on a local
root: threads released together by a barrier ask a catalog that has never
opened the topic; the pointer read is slowed so that they all arrive while
it is under way.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lakelog import Catalog, CommitStats, Record
from lakelog.catalog import TopicPointer
from lakelog.errors import KafkaStorageError, UnknownTopicOrPartitionError
from lakelog.topic_log import TopicLog

THREADS = 32


class SlowPointerCatalog(Catalog):
    """Counts pointer reads; each waits until ``release`` is set (or fails once if told to)."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.reads = 0
        self.release = threading.Event()
        self.fail_next: Exception | None = None

    def _read_pointer(self, name: str) -> TopicPointer:
        self.reads += 1
        self.release.wait(timeout=60)
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        return super()._read_pointer(name)


def all_at_once(catalog: SlowPointerCatalog, call: Callable[[], object]) -> list[object]:
    """Run ``call`` on THREADS threads started together; results or raised exceptions."""
    gate = threading.Barrier(THREADS + 1)

    def one() -> object:
        gate.wait()
        try:
            return call()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(one) for _ in range(THREADS)]
        gate.wait()
        # The first caller waits in the pointer read until every thread has had the time
        # to ask; the answer does not depend on how many did (the asserts hold either way).
        threading.Event().wait(0.2)
        catalog.release.set()
        return [f.result() for f in futures]


@pytest.fixture
def root(tmp_path: Path) -> str:
    url = str(tmp_path / "root")
    creator = Catalog(url)
    creator.create_topic("t", 2)
    creator.close()
    return url


def test_concurrent_first_requests_share_one_open(root: str) -> None:
    catalog = SlowPointerCatalog(root)
    try:
        logs = all_at_once(catalog, lambda: catalog.topic("t"))
        assert all(isinstance(log, TopicLog) for log in logs), logs
        assert len({id(log) for log in logs}) == 1
        assert catalog.topic_opens() == {"t": 1}
        assert catalog.reads == 1
        assert catalog.open_logs("t") == 1
    finally:
        catalog.close()


def test_a_failed_open_reaches_every_waiter_and_is_not_kept(root: str) -> None:
    catalog = SlowPointerCatalog(root)
    try:
        catalog.fail_next = KafkaStorageError("storage unavailable")
        outcomes = all_at_once(catalog, lambda: catalog.topic("t"))
        assert all(isinstance(o, KafkaStorageError) for o in outcomes), outcomes
        assert catalog.reads == 1
        assert catalog.topic_opens() == {}
        # Not cached: the next request reads the pointer again and opens the topic.
        assert isinstance(catalog.topic("t"), TopicLog)
        assert catalog.reads == 2
        assert catalog.topic_opens() == {"t": 1}
        missing = all_at_once(catalog, lambda: catalog.topic("absent"))
        assert all(isinstance(o, UnknownTopicOrPartitionError) for o in missing), missing
    finally:
        catalog.close()


def test_a_replaced_log_stays_open_while_held(root: str) -> None:
    catalog = Catalog(root, pointer_max_age_s=0.0)
    try:
        held = catalog.topic("t")
        held.append([Record(b"a", partition=0)])
        catalog.delete_topic("t")
        # Deleted, but a request still holds the log: it is not closed under it.
        assert catalog.open_logs("t") == 1
        catalog.create_topic("t", 1)
        recreated = catalog.topic("t")
        assert recreated is not held
        assert recreated.append([Record(b"b")]).offsets == [0]
        assert catalog.open_logs("t") == 2
        assert catalog.topic_opens() == {"t": 2}
        assert catalog.commit_stats()["t"] == CommitStats(commits=2)
        assert held.high_watermark(0) == 1  # still answers from what it knew

        del held
        gc.collect()
        # Let go: closed, and its commits stay in the topic's total.
        assert catalog.open_logs("t") == 1
        assert catalog.commit_stats()["t"] == CommitStats(commits=2)
    finally:
        catalog.close()
    assert catalog.open_logs("t") == 0
