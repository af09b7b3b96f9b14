"""Commit writes that fail in transit: the log must neither lose nor duplicate a batch.

On a local root a storage wrapper reports the failure; on S3 a TCP proxy in
front of moto forwards the commit's conditional PUT and drops moto's answer,
so the object lands and the client sees a broken connection, as when a
network fails at the worst moment. Either way the writer must recognise its
own commit by the commit id it carries instead of writing the batch again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from lakelog import Catalog, Record, TopicLog
from lakelog.errors import AmbiguousCommitError, KafkaStorageError
from lakelog.storage import S3Settings
from lakelog.storage.local import LocalStorage
from lakelog.testing.proxy import TcpProxy


class FlakyCommits(LocalStorage):
    """A local root whose next commit PUT reports failure, after writing (or not)."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.fail_next_commit: str | None = None  # "after-write" | "before-write"
        self.fail_reads = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (FlakyCommits, (self.directory,))

    def put_if_absent(
        self, path: str, data: bytes, ready: Callable[[], None] | None = None
    ) -> bool:
        mode, self.fail_next_commit = self.fail_next_commit, None
        if mode == "before-write" and "_delta_log" in path:
            raise OSError("connection reset before the write")
        written = super().put_if_absent(path, data, ready)
        if mode == "after-write" and "_delta_log" in path:
            raise OSError("connection reset after the write")
        return written

    def read_bytes(self, path: str) -> bytes:
        if self.fail_reads and "_delta_log" in path:
            raise OSError("storage unreachable")
        return super().read_bytes(path)


def _setup(tmp_path: Path) -> tuple[FlakyCommits, Catalog]:
    storage = FlakyCommits(str(tmp_path / "root"))
    catalog = Catalog(storage)
    catalog.create_topic("t", 1)
    catalog.topic("t").append([Record(b"first")])
    return storage, catalog


def test_put_that_landed_counts_as_committed(tmp_path: Path) -> None:
    storage, catalog = _setup(tmp_path)
    storage.fail_next_commit = "after-write"
    log = catalog.topic("t")
    result = log.append([Record(b"second")])
    assert result.offsets == [1]
    assert log.commit_stats.recognised_after_error == 1, log.commit_stats
    reader = Catalog(str(tmp_path / "root")).topic("t")
    assert [r.value for r in reader.read(0, 0).to_records("t")] == [b"first", b"second"]


def test_put_that_did_not_land_is_a_retriable_error(tmp_path: Path) -> None:
    storage, catalog = _setup(tmp_path)
    storage.fail_next_commit = "before-write"
    with pytest.raises(KafkaStorageError) as info:
        catalog.topic("t").append([Record(b"lost")])
    assert info.value.retriable
    log = catalog.topic("t")
    assert log.high_watermark(0) == 1
    assert log.append([Record(b"again")]).offsets == [1]


def test_unknown_outcome_keeps_the_segment_files(tmp_path: Path) -> None:
    storage, catalog = _setup(tmp_path)
    log = catalog.topic("t")
    storage.fail_next_commit = "after-write"
    storage.fail_reads = True
    with pytest.raises(AmbiguousCommitError) as info:
        log.append([Record(b"maybe")])
    assert info.value.retriable
    storage.fail_reads = False
    reader = Catalog(str(tmp_path / "root")).topic("t")
    # The commit did land, and its segment is still there to be read.
    assert [r.value for r in reader.read(0, 0).to_records("t")] == [b"first", b"maybe"]


@pytest.fixture
def s3_proxy(s3_settings: S3Settings) -> Iterator[TcpProxy]:
    """A proxy in front of moto whose answers the test can make go missing."""
    endpoint = urlparse(str(s3_settings.endpoint_url))
    proxy = TcpProxy(endpoint.hostname or "127.0.0.1", endpoint.port or 80)
    proxy.start()
    yield proxy
    proxy.stop()


def _s3_topic(s3_settings: S3Settings, proxy: TcpProxy, bucket: str) -> tuple[str, TopicLog]:
    """A one-partition topic holding b"first", reached through ``proxy``; returns (url, log)."""
    url = f"s3://{bucket}/lakelog"
    through_proxy = s3_settings.model_copy(update={"endpoint_url": proxy.url})
    catalog = Catalog(url, s3=through_proxy)
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    log.append([Record(b"first")], producer_id=9, base_sequence=0)
    return url, log


def _next_commit_put(log: TopicLog) -> bytes:
    """The request line of the PUT that writes the log's next Delta commit.

    Any version of this table's log, since nothing else commits to it meanwhile;
    only this table's, so that no other commit of the same version number is
    the one whose answer goes missing.
    """
    table = re.escape(log.table_path.rstrip("/").rsplit("/", 1)[-1].encode())
    return rb"PUT \S*/" + table + rb"/_delta_log/\d{20}\.json[ ?]"


def _stored_values(url: str, s3_settings: S3Settings) -> list[bytes | None]:
    """The topic as a fresh reader sees it, straight from moto (not through the proxy)."""
    reader = Catalog(url, s3=s3_settings)
    try:
        return [r.value for r in reader.topic("t").read(0, 0).to_records("t")]
    finally:
        reader.close()


@pytest.mark.s3
def test_s3_put_whose_answer_was_lost_counts_as_committed(
    s3_settings: S3Settings, s3_proxy: TcpProxy, make_bucket: Callable[[], str]
) -> None:
    url, log = _s3_topic(s3_settings, s3_proxy, make_bucket())
    version = log.version
    s3_proxy.drop_response_to(_next_commit_put(log))
    result = log.append([Record(b"second")], producer_id=9, base_sequence=1)
    assert len(s3_proxy.dropped) == 1, "the commit PUT's answer was not dropped"
    print(f"answer dropped for {s3_proxy.dropped[0]!r}; {log.commit_stats}")
    # The writer saw an error (or, after the S3 client's own retry, a conflict) and
    # found its commit id in the version it wanted: committed once, at that version.
    assert log.commit_stats.recognised_after_error == 1, log.commit_stats
    assert (result.offsets, result.version, log.version) == ([1], version + 1, version + 1)
    assert _stored_values(url, s3_settings) == [b"first", b"second"]


@pytest.mark.s3
def test_s3_put_of_unknown_outcome_is_retriable_and_resolved_by_the_retry(
    s3_settings: S3Settings,
    s3_proxy: TcpProxy,
    make_bucket: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two attempts per S3 call instead of five: against a store that stays down the
    # outcome is the same, seconds of backoff sooner.
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    url, log = _s3_topic(s3_settings, s3_proxy, make_bucket())
    # The answer is lost and the store stays unreachable: nobody can tell the writer.
    s3_proxy.drop_response_to(_next_commit_put(log), then_stop=True)
    with pytest.raises(AmbiguousCommitError) as info:
        log.append([Record(b"maybe")], producer_id=9, base_sequence=1)
    assert info.value.retriable
    assert len(s3_proxy.dropped) == 1
    s3_proxy.start()
    # The commit landed, its segment kept; the idempotent retry gets the original offset.
    assert _stored_values(url, s3_settings) == [b"first", b"maybe"]
    retried = log.append([Record(b"maybe")], producer_id=9, base_sequence=1)
    assert retried.duplicate and retried.offsets == [1]
    assert _stored_values(url, s3_settings) == [b"first", b"maybe"]
