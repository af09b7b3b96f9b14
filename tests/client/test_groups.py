"""Consumer groups from the client's side, against real broker processes.

Members run on their own threads (a join waits for every member to rejoin, so
two members cannot share one polling thread), each with a short session
timeout; the brokers allow it through ``group_min_session_timeout_ms``.
Every wait is bounded by a hang guard; nothing asserts speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from lakelog.client import (
    AdminClient,
    Consumer,
    ConsumerRebalanceListener,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from lakelog.errors import FencedInstanceIdError, InvalidGroupIdError, LakelogError
from tests.client.conftest import create_topic
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

#: Broker settings for fast groups: short sessions allowed, no initial rebalance delay.
GROUP_BROKER = {
    "group_min_session_timeout_ms": 500,
    "group_initial_rebalance_delay_ms": 0,
    "group_tick_ms": 50,
}
#: Consumer settings to match: a member is noticed gone within ~2 s.
FAST: dict[str, Any] = {
    "session_timeout_ms": 2_000,
    "heartbeat_interval_ms": 200,
    "retry_backoff_ms": 50,
}
GUARD_S = 60


@pytest.fixture
def group_broker(root: RootSpec, start_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    return start_broker(root, **GROUP_BROKER)


def produce(url: str, topic: str, values: list[str], partitions: int) -> None:
    with Producer(url) as producer:
        for i, value in enumerate(values):
            producer.send(topic, value.encode(), partition=i % partitions)


def wait_for(
    condition: Callable[[], bool],
    what: str,
    timeout_s: float = GUARD_S,
    members: tuple[Member, ...] = (),
) -> None:
    """Poll ``condition`` until true; the timeout is a hang guard, not a speed check.

    The members' threads are checked on every round, so a member that died
    fails the test with its own error instead of a timeout.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        for member in members:
            member.check()
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", set(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append(("lost", set(lost)))


class Member:
    """A group consumer polling on its own thread, keeping every value it received."""

    def __init__(self, url: str, group: str, topics: list[str] | None, **options: Any) -> None:
        pattern = options.pop("pattern", None)
        settings = {**FAST, "auto_offset_reset": "earliest", **options}
        self.consumer = Consumer(url, group_id=group, **settings)
        self.listener = Recorder()
        self.consumer.subscribe(topics, pattern=pattern, listener=self.listener)
        self.values: list[str] = []
        self.assigned: set[TopicPartition] = set()
        self.error: BaseException | None = None
        self.paused = threading.Event()  # set: stop polling (simulates a stuck application)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self.paused.is_set():
                    time.sleep(0.05)
                    continue
                batch = self.consumer.poll(200)
                with self._lock:
                    for records in batch.values():
                        self.values.extend((r.value or b"").decode() for r in records)
                    self.assigned = self.consumer.assignment()
        except BaseException as exc:  # reported by the test through ``check``
            self.error = exc

    def snapshot(self) -> tuple[list[str], set[TopicPartition]]:
        with self._lock:
            return list(self.values), set(self.assigned)

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"member failed: {self.error!r}") from self.error

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=GUARD_S)
        self.consumer.close()
        self.check()


def partitions(topic: str, n: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(n)}


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_members_split_partitions_and_take_over_on_leave(group_broker: BrokerProcess) -> None:
    url = group_broker.url
    create_topic(url, "orders", 4)
    a = Member(url, "split", ["orders"])
    b = Member(url, "split", ["orders"])
    try:

        def split() -> bool:
            pa, pb = a.snapshot()[1], b.snapshot()[1]
            return bool(pa) and bool(pb) and pa | pb == partitions("orders", 4)

        wait_for(split, "both members to own partitions")
        pa, pb = a.snapshot()[1], b.snapshot()[1]
        assert not pa & pb, "a partition is owned by two members"

        produce(url, "orders", [f"o{i}" for i in range(40)], 4)
        wait_for(lambda: len(a.snapshot()[0]) + len(b.snapshot()[0]) >= 40, "40 records")
        va, vb = a.snapshot()[0], b.snapshot()[0]
        assert va and vb, "records were not spread over both members"
        assert sorted(va + vb) == sorted(f"o{i}" for i in range(40))

        b.close()  # commits and leaves: a takes everything over without waiting for a timeout
        wait_for(lambda: a.snapshot()[1] == partitions("orders", 4), "a to own every partition")
        produce(url, "orders", [f"p{i}" for i in range(8)], 4)
        wait_for(lambda: sum(v.startswith("p") for v in a.snapshot()[0]) == 8, "p records")
        # b committed what it read before leaving: a did not read b's records again
        assert sorted(v for v in a.snapshot()[0] if v.startswith("o")) == sorted(va)
        kinds = [kind for kind, _ in a.listener.events]
        assert kinds[0] == "assigned" and "revoked" in kinds
        a.check()
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_a_second_instance_with_one_group_instance_id_fences_the_first(
    group_broker: BrokerProcess,
) -> None:
    """Static membership (KIP-345): two processes started with one group.instance.id must not
    both consume; the newer takes the partitions over and the older stops with
    FENCED_INSTANCE_ID."""
    url = group_broker.url
    create_topic(url, "stock", 2)
    first = Member(url, "static", ["stock"], group_instance_id="node-1")
    second: Member | None = None
    try:
        every = partitions("stock", 2)
        wait_for(lambda: first.snapshot()[1] == every, "first to own all", members=(first,))
        second = Member(url, "static", ["stock"], group_instance_id="node-1")
        newer = second
        wait_for(lambda: newer.snapshot()[1] == every, "second to own all", members=(newer,))
        wait_for(lambda: first.error is not None, "first to be fenced", members=(newer,))
        assert isinstance(first.error, FencedInstanceIdError), repr(first.error)
        assert first.error.details["group_instance_id"] == "node-1"
        produce(url, "stock", [f"s{i}" for i in range(6)], 2)
        wait_for(lambda: len(newer.snapshot()[0]) >= 6, "6 records", members=(newer,))
        assert not first.snapshot()[0], "the fenced instance consumed"
    finally:
        first.error = None  # the fence was the expected outcome; close what is left
        first.close()
        if second is not None:
            second.close()


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_commit_committed_resume_and_async_callbacks(group_broker: BrokerProcess) -> None:
    url = group_broker.url
    create_topic(url, "pay", 2)
    produce(url, "pay", [f"v{i}" for i in range(10)], 2)
    p0, p1 = TopicPartition("pay", 0), TopicPartition("pay", 1)
    with Consumer(
        url, group_id="resume", auto_offset_reset="earliest", enable_auto_commit=False, **FAST
    ) as consumer:
        consumer.subscribe(["pay"])
        seen: list[str] = []
        deadline = time.monotonic() + GUARD_S
        while len(seen) < 10 and time.monotonic() < deadline:
            for records in consumer.poll(200).values():
                seen += [(r.value or b"").decode() for r in records]
        assert sorted(seen) == sorted(f"v{i}" for i in range(10))
        assert consumer.committed([p0, p1]) == {p0: None, p1: None}
        consumer.commit({p0: OffsetAndMetadata(3, "three")})
        committed = consumer.committed([p0])[p0]
        assert committed is not None and (committed.offset, committed.metadata) == (3, "three")

        results: list[tuple[dict[TopicPartition, int], LakelogError | None]] = []
        consumer.commit_async(
            callback=lambda offsets, error: results.append(
                ({tp: om.offset for tp, om in offsets.items()}, error)
            )
        )
        wait_for(lambda: bool(consumer.poll(0) == {} and results), "the async commit callback")
        assert results == [({p0: 5, p1: 5}, None)]
        # seek / pause / position inside a group
        consumer.seek(p1, 1)
        consumer.pause(p0)
        assert consumer.paused() == {p0}
        again: list[str] = []
        while len(again) < 4 and time.monotonic() < deadline:
            for tp, records in consumer.poll(200).items():
                assert tp == p1
                again += [(r.value or b"").decode() for r in records]
        assert again == ["v3", "v5", "v7", "v9"]
        assert consumer.position(p1) == 5
        consumer.resume(p0)
    # enable_auto_commit=False: close committed nothing, so the group still has 5 and 5.
    with Consumer(url, group_id="resume", auto_offset_reset="earliest", **FAST) as consumer:
        consumer.subscribe(["pay"])
        deadline = time.monotonic() + GUARD_S
        while time.monotonic() < deadline and consumer.assignment() != {p0, p1}:
            consumer.poll(100)
        # restarts from the committed offsets, not from the beginning (auto_offset_reset)
        assert consumer.position(p0) == 5 and consumer.position(p1) == 5
        consumer.seek(p0, 2)
    with AdminClient(url) as admin:
        offsets = admin.list_group_offsets("resume")
    # auto-commit (the default) committed the positions on close, and it left the group
    assert {tp: om.offset for tp, om in offsets.items()} == {p0: 2, p1: 5}
    with AdminClient(url) as admin:
        assert admin.describe_group("resume").members == []


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_pattern_subscription_and_poll_interval(group_broker: BrokerProcess) -> None:
    url = group_broker.url
    create_topic(url, "metrics-a", 1)
    create_topic(url, "other", 1)
    a = Member(
        url,
        "pattern",
        None,
        pattern=r"metrics-.*",
        max_poll_interval_ms=1_500,
        metadata_max_age_ms=300,
        partition_assignment_strategy=["roundrobin"],
    )
    try:
        wait_for(lambda: a.snapshot()[1] == {TopicPartition("metrics-a", 0)}, "metrics-a")
        create_topic(url, "metrics-b", 1)
        want = {TopicPartition("metrics-a", 0), TopicPartition("metrics-b", 0)}
        wait_for(lambda: a.snapshot()[1] == want, "the new matching topic")
        assert a.consumer.subscription() == {"metrics-a", "metrics-b"}

        # An application that stops polling leaves the group after max_poll_interval_ms ...
        b = Member(
            url,
            "pattern",
            ["metrics-a", "metrics-b"],
            max_poll_interval_ms=30_000,
            partition_assignment_strategy=["roundrobin"],
        )
        try:
            wait_for(lambda: bool(b.snapshot()[1]), "b to join")
            a.paused.set()
            wait_for(
                lambda: b.snapshot()[1] == want, "b to take every partition over", members=(a, b)
            )
            # ... and on its next poll hears its partitions were lost, then rejoins.
            a.paused.clear()
            wait_for(
                lambda: any(k == "lost" for k, _ in a.listener.events),
                "on_partitions_lost",
                members=(a, b),
            )
            wait_for(lambda: bool(a.snapshot()[1]) and bool(b.snapshot()[1]), "a to rejoin")
        finally:
            b.close()
    finally:
        a.close()


def test_bad_group_usage_is_refused(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, **GROUP_BROKER)
    with pytest.raises(InvalidGroupIdError, match="group_id"):
        Consumer(broker.url).subscribe(["t"])
    with pytest.raises(InvalidGroupIdError, match="illegal"):
        Consumer(broker.url, group_id="bad group!")
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        Consumer(broker.url, group_id="g", session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(ValueError, match="partition_assignment_strategy"):
        Consumer(broker.url, group_id="g", partition_assignment_strategy=["nope"])
    with Consumer(broker.url, group_id="g") as consumer:
        consumer.assign([TopicPartition("t", 0)])
        with pytest.raises(RuntimeError, match="mutually exclusive"):
            consumer.subscribe(["t"])
        consumer.unassign()
        with pytest.raises(ValueError, match="not the string"):
            consumer.subscribe("t")
        with pytest.raises(ValueError, match="either"):
            consumer.subscribe()
        consumer.subscribe(["t"])
        with pytest.raises(RuntimeError, match="mutually exclusive"):
            consumer.assign([TopicPartition("t", 0)])
        with pytest.raises(ValueError, match=">= 0"):
            consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(-1)})
