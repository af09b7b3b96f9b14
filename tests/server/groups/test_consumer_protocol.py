"""Kafka's consumer-protocol assignments, as Kafka clients encode them, read back."""

from __future__ import annotations

from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

from lakelog.structs import TopicPartition
from server.groups.consumer_protocol import assigned_partitions


def test_a_clients_assignment_is_read_as_its_partitions() -> None:
    raw = ConsumerProtocolMemberAssignment(0, [("orders", [2, 0]), ("audit", [1])], b"u").encode()
    assert assigned_partitions(raw) == [
        TopicPartition("audit", 1),
        TopicPartition("orders", 0),
        TopicPartition("orders", 2),
    ]


def test_a_newer_version_is_read_as_the_newest_known() -> None:
    raw = ConsumerProtocolMemberAssignment(0, [("orders", [1])], b"").encode()
    assert assigned_partitions(b"\x00\x07" + raw[2:] + b"appended") == [TopicPartition("orders", 1)]


def test_bytes_of_another_protocol_are_no_assignment() -> None:
    for raw in (b"", b"\x00", b"\xff\xff", b"\x00\x00\x00\x00\x00\x05x"):
        assert assigned_partitions(raw) is None
