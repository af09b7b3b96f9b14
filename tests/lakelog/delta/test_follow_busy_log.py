"""A reader one round trip away keeps up with a writer that commits faster than that.

On an object store every read is a round trip. A reader that fetched the
log's next commit, then the one after, one at a time, could never open a
topic another broker was writing quickly: each answer brought news of more
commits (a broker's first request to a busy topic hung until the writer
paused). Here the writer's requests to moto are delayed a little and the
reader's five times as much, so the writer commits faster than the reader
could read one commit per round trip.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

import pytest

from lakelog import Catalog, Record, TopicLog
from lakelog.storage import S3Settings
from lakelog.testing.proxy import TcpProxy

WRITE_DELAY_S = 0.03
READ_DELAY_S = 0.15
#: How long the reader gets while the writer keeps writing; only a hang reaches it.
GIVE_UP_S = 120.0


@pytest.fixture
def delayed(s3_settings: S3Settings) -> Iterator[Callable[[float], S3Settings]]:
    """S3 settings whose every request reaches moto ``delay`` seconds late."""
    endpoint = urlparse(str(s3_settings.endpoint_url))
    proxies: list[TcpProxy] = []

    def settings(delay: float) -> S3Settings:
        proxy = TcpProxy(endpoint.hostname or "127.0.0.1", endpoint.port or 80)
        proxy.request_delay_s = delay
        proxy.start()
        proxies.append(proxy)
        return s3_settings.model_copy(update={"endpoint_url": proxy.url})

    yield settings
    for proxy in proxies:
        proxy.stop()


class BusyWriter:
    """Appends one record per commit until stopped."""

    def __init__(self, log: TopicLog) -> None:
        self.log = log
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="busy-writer")

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self.log.append([Record(b"v")])
        except BaseException as exc:  # handed to the test's thread by finish()
            self.error = exc

    def wait_for_version(self, version: int) -> None:
        while self.log.version < version and self.thread.is_alive():
            self.stop.wait(0.05)

    def finish(self) -> int:
        self.stop.set()
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.log.version


def test_a_topic_opens_and_follows_while_another_writer_commits_faster_than_a_round_trip(
    delayed: Callable[[float], S3Settings], make_bucket: Callable[[], str]
) -> None:
    url = f"s3://{make_bucket()}/lakelog"
    writing = Catalog(url, s3=delayed(WRITE_DELAY_S), checkpoint_interval=10_000)
    writing.create_topic("t", 1)
    writer = BusyWriter(writing.topic("t"))
    writer.thread.start()
    reading = Catalog(url, s3=delayed(READ_DELAY_S))
    try:
        writer.wait_for_version(60)
        seen_before_open = writer.log.version
        opened: list[TopicLog] = []
        opener = threading.Thread(target=lambda: opened.append(reading.topic("t")))
        opener.start()
        opener.join(GIVE_UP_S)
        opened_while_writing = not opener.is_alive() and writer.thread.is_alive()
        last = writer.finish()
        opener.join()
        assert opened_while_writing, "the topic opened only once its writer stopped"
        reader = opened[0]
        assert reader.version >= seen_before_open
        while reader.version < last:
            assert reader.refresh(), "a refresh found nothing new below the writer's version"
        assert reader.version == last
        assert reader.high_watermark(0) == writer.log.high_watermark(0)
    finally:
        writer.stop.set()
        writer.thread.join()
        reading.close()
        writing.close()
