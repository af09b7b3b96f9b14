"""Static group members (KIP-345): a restart within the session timeout moves no partition.

Two confluent-kafka consumers with ``group.instance.id`` share a topic. One
is closed (a static member sends no LeaveGroup) and a new process with the
same instance id joins before its session times out: it gets the partitions
the old one had, and the other member sees no rebalance (no revocation, no
new assignment, the same generation), as on Kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.test_produce_consume import create_topic

TOPIC = "static"
GROUP = "static-members"
SESSION_TIMEOUT_MS = 30_000


class StaticMember:
    """A confluent-kafka consumer with a group.instance.id, recording its rebalances."""

    def __init__(self, bootstrap: str, instance_id: str, assignor: str) -> None:
        self.assignments: list[set[int]] = []
        self.revocations = 0
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "group.instance.id": instance_id,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "partition.assignment.strategy": assignor,
                "auto.offset.reset": "earliest",
            }
        )
        self.consumer.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, _consumer: Any, partitions: list[Any]) -> None:
        self.assignments.append({p.partition for p in partitions})

    def _revoked(self, _consumer: Any, partitions: list[Any]) -> None:
        if partitions:
            self.revocations += 1

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is not None and message.error():
            raise AssertionError(str(message.error()))


def poll(
    members: list[StaticMember],
    until: Callable[[], bool] = lambda: False,
    what: str = "",
    timeout_s: float = 60,
) -> None:
    """Poll every member (each must, to take part in a rebalance) until ``until`` holds;
    with no condition, for ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() >= deadline:
            assert not what, f"timed out waiting for {what}"
            return
        for member in members:
            member.poll()


def generation(broker: BrokerProcess) -> int:
    response = httpx.get(f"{broker.url}/v1/groups/{GROUP}", timeout=30)
    assert response.status_code == 200, response.text
    return int(response.json()["generation_id"])


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_a_static_member_restarted_within_its_session_keeps_its_partitions(
    assignor: str, root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    assert broker.kafka is not None
    create_topic(broker, TOPIC, partitions=4)
    first = StaticMember(broker.kafka, "instance-a", assignor)
    second = StaticMember(broker.kafka, "instance-b", assignor)
    try:

        def settled() -> bool:
            return bool(first.assignments and second.assignments) and (
                first.assignments[-1] | second.assignments[-1] == {0, 1, 2, 3}
            )

        poll([first, second], settled, "both members to be assigned the four partitions")
        before = generation(broker)
        owned = first.assignments[-1]
        seen_by_second = len(second.assignments)
        first.consumer.close()  # a static member leaves no LeaveGroup behind

        restarted = StaticMember(broker.kafka, "instance-a", assignor)
        try:
            members = [restarted, second]
            poll(members, lambda: bool(restarted.assignments), "the restarted member's partitions")
            poll(members, timeout_s=3)  # time for a rebalance, were there one
            assert restarted.assignments == [owned], "the restarted member got its partitions"
            assert len(second.assignments) == seen_by_second, "the other member rebalanced"
            assert second.revocations == 0
            assert generation(broker) == before
        finally:
            restarted.consumer.close()
    finally:
        second.consumer.close()
