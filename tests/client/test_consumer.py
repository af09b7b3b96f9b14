"""The consumer against a real broker: positions, seek, long poll, offset reset, pause."""

from __future__ import annotations

import threading
import time

import pytest

from lakelog.client import Consumer, NoOffsetForPartitionError, Producer, TopicPartition
from lakelog.client.wire import WireFormat
from lakelog.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from lakelog.records import ConsumerRecord
from tests.client.conftest import RecordingTransport, create_topic, values
from tests.fixtures.brokers import BrokerProcess

P0, P1 = TopicPartition("c", 0), TopicPartition("c", 1)


def produce(url: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    with Producer(url) as producer:
        for partition, value in records:
            producer.send(topic, value, partition=partition)


def poll_until(
    consumer: Consumer, count: int, max_records: int | None = None
) -> dict[TopicPartition, list[ConsumerRecord]]:
    """Poll until ``count`` records arrived (a 60 s guard turns a hang into a failure)."""
    out: dict[TopicPartition, list[ConsumerRecord]] = {}
    deadline = time.monotonic() + 60
    while sum(len(v) for v in out.values()) < count:
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"only {out} after 60 s")
        for tp, records in consumer.poll(500, max_records=max_records).items():
            assert max_records is None or len(records) <= max_records
            out.setdefault(tp, []).extend(records)
    return out


def test_fetch_formats_agree_and_time_lookup(broker: BrokerProcess) -> None:
    create_topic(broker.url, "c", 1)
    with Producer(broker.url) as producer:
        producer.send("c", b"\x00\xff", key=b"k", headers=[("h", b"\x01"), ("n", None)])
        producer.send("c", None, key=b"tombstone", timestamp_ms=42)
        producer.send("c", b"", key=None)
    read: dict[str, list[ConsumerRecord]] = {}
    formats: list[WireFormat] = ["arrow", "json"]
    for fetch_format in formats:
        with Consumer(broker.url, auto_offset_reset="earliest", fetch_format=fetch_format) as c:
            c.assign([P0])
            read[fetch_format] = poll_until(c, 3)[P0]
    assert read["arrow"] == read["json"]
    first, tombstone, empty = read["arrow"]
    assert (first.key, first.value, first.headers) == (
        b"k",
        b"\x00\xff",
        [("h", b"\x01"), ("n", None)],
    )
    assert (tombstone.value, tombstone.timestamp_ms, tombstone.timestamp_type) == (None, 42, 0)
    assert (empty.key, empty.value) == (None, b"")

    # Lookup by time (ListOffsets), then reading from the offset found.
    create_topic(broker.url, "times", 1)
    t0 = TopicPartition("times", 0)
    with Producer(broker.url) as producer:
        for i, ts in enumerate([1_000, 2_000, 3_000]):
            producer.send("times", f"t{i}", partition=0, timestamp_ms=ts)
    with Consumer(broker.url) as consumer:
        found = consumer.offsets_for_times({t0: 1_500})[t0]
        assert found is not None and (found.offset, found.timestamp_ms) == (1, 2_000)
        assert consumer.offsets_for_times({t0: 9_999}) == {t0: None}
        consumer.assign([t0])
        consumer.seek(t0, found.offset)
        assert values(poll_until(consumer, 2)[t0]) == [b"t1", b"t2"]


def test_poll_seek_positions_and_pause(broker: BrokerProcess) -> None:
    create_topic(broker.url, "c", 2)
    produce(broker.url, "c", [(0, f"a{i}".encode()) for i in range(10)] + [(1, b"b0"), (1, b"")])
    with Consumer(broker.url, auto_offset_reset="earliest") as consumer:
        consumer.assign([P0, P1])
        assert consumer.assignment() == {P0, P1}
        got = poll_until(consumer, 12, max_records=5)
        assert values(got[P0]) == [f"a{i}".encode() for i in range(10)]
        assert values(got[P1]) == [b"b0", b""]
        assert [r.offset for r in got[P0]] == list(range(10))
        assert (consumer.position(P0), consumer.position(P1)) == (10, 2)
        assert consumer.highwater(P0) == 10

        consumer.seek(P0, 7)
        consumer.seek_to_beginning(P1)
        again = poll_until(consumer, 5)
        assert values(again[P0]) == [b"a7", b"a8", b"a9"]
        assert values(again[P1]) == [b"b0", b""]

        consumer.seek_to_end()
        assert consumer.position(P0) == 10
        assert consumer.poll(300) == {}

        consumer.pause(P0)
        assert consumer.paused() == {P0}
        produce(broker.url, "c", [(0, b"a10"), (1, b"b2")])
        only_p1 = poll_until(consumer, 1)
        assert set(only_p1) == {P1} and values(only_p1[P1]) == [b"b2"]
        assert consumer.poll(300) == {}, "a paused partition returned records"
        consumer.resume(P0)
        assert values(poll_until(consumer, 1)[P0]) == [b"a10"]

        assert consumer.beginning_offsets([P0, P1]) == {P0: 0, P1: 0}
        assert consumer.end_offsets([P0, P1]) == {P0: 11, P1: 3}
        consumer.unassign()
        assert consumer.assignment() == set()
        with pytest.raises(ValueError):
            consumer.seek(P0, 0)


def test_long_poll_waits_on_the_broker(broker: BrokerProcess) -> None:
    """A record produced while the consumer waits arrives through one long-poll fetch,
    not through a loop of empty fetches (counted, not timed)."""
    create_topic(broker.url, "c", 1)
    transport = RecordingTransport()
    consumer = Consumer(
        broker.url, auto_offset_reset="latest", fetch_max_wait_ms=20_000, transport=transport
    )
    with consumer:
        consumer.assign([P0])
        assert consumer.position(P0) == 0
        started = threading.Event()

        def produce_later() -> None:
            started.wait()
            time.sleep(0.3)
            produce(broker.url, "c", [(0, b"late")])

        thread = threading.Thread(target=produce_later)
        thread.start()
        started.set()
        got = consumer.poll(timeout_ms=25_000)
        thread.join()
        assert values(got[P0]) == [b"late"]
        fetches = [c for c in transport.calls if c[1].endswith("/records") and c[0] == "GET"]
        assert len(fetches) <= 2, f"expected one long poll, saw {len(fetches)} fetches"
        # End the prefetch poll() left waiting on the broker: brokers do not notice a
        # client that went away, and would hold their shutdown for it.
        produce(broker.url, "c", [(0, b"wake")])
        assert values(poll_until(consumer, 1)[P0]) == [b"wake"]
        produce(broker.url, "c", [(0, b"wake again")])


def test_offset_reset_policies(broker: BrokerProcess) -> None:
    create_topic(broker.url, "c", 1)
    produce(broker.url, "c", [(0, f"r{i}".encode()) for i in range(5)])

    with Consumer(broker.url, auto_offset_reset="latest") as latest:
        latest.assign([P0])
        assert latest.poll(200) == {}
        assert latest.position(P0) == 5
        latest.seek(P0, 1000)  # past the high watermark: OFFSET_OUT_OF_RANGE, reset to the end
        assert latest.poll(500) == {}
        assert latest.position(P0) == 5

    with Consumer(broker.url, auto_offset_reset="earliest") as earliest:
        earliest.assign([P0])
        earliest.seek(P0, 1000)
        assert values(poll_until(earliest, 5)[P0]) == [f"r{i}".encode() for i in range(5)]

    with Consumer(broker.url, auto_offset_reset="none") as strict:
        strict.assign([P0])
        with pytest.raises(NoOffsetForPartitionError):
            strict.poll(100)
        strict.seek(P0, 1000)
        with pytest.raises(OffsetOutOfRangeError) as info:
            poll_until(strict, 1)
        assert info.value.details["high_watermark"] == 5
        strict.seek(P0, 3)
        assert values(poll_until(strict, 2)[P0]) == [b"r3", b"r4"]

    with Consumer(broker.url, auto_offset_reset="earliest") as lost:
        lost.assign([TopicPartition("no-such-topic", 0)])
        with pytest.raises(UnknownTopicOrPartitionError):
            lost.poll(100)
