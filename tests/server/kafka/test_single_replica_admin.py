"""Kafka's replica and admin APIs answered as Kafka answers them for one-replica partitions.

A real broker per storage root (a local directory, then the S3-protocol
server) answers unmodified clients: librdkafka validates a consumer's
position with OffsetForLeaderEpoch and elects leaders; kafka-python's admin
client describes log dirs, topic partitions and producers, lists and alters
reassignments and deletes a group's offsets. What no client sends in the
shape a rule needs (a null election list is librdkafka's; a newer leader
epoch, a cursor) goes as a raw request. Pure rules are checked on their own.
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    InvalidReplicationAssignmentError,
    NoError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import OffsetAndMetadata
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.offset_for_leader_epoch.v2.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest as OffsetForLeaderEpochRequestV4,
)
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderPartition as OffsetForLeaderPartitionV4,
)
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderTopic as OffsetForLeaderTopicV4,
)
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_writer
from kio.static.primitive import i32

from lakelog import errors
from lakelog.produce import partition_sequences, producer_txn
from server.groups.consumer_protocol import subscribed_topics
from server.kafka.handlers.metadata import LEADER_EPOCH
from server.kafka.handlers.replicas import (
    EpochEnd,
    epoch_end,
    reassignment_refusal,
)
from server.kafka.handlers.topic_partitions import window
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.raw import RawConnection

pytestmark = pytest.mark.integration

TIMEOUT_S = 30
UNKNOWN_TOPIC, TOPIC_DENIED, INVALID_REQUEST = 3, 29, 42
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, ELECTION_NOT_NEEDED = 74, 75, 84


@pytest.fixture(scope="module")
def broker(
    module_root: RootSpec, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    """One broker for the module's tests (each test names its own topics and groups)."""
    return start_module_broker(module_root)


@pytest.fixture
def kafka_admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    assert broker.kafka is not None
    client = KafkaAdminClient(bootstrap_servers=broker.kafka)
    yield client
    client.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(broker: BrokerProcess, name: str, partitions: int) -> None:
    created = httpx.post(
        f"{broker.url}/v1/topics",
        json={"name": name, "partitions": partitions},
        timeout=TIMEOUT_S,
    )
    assert created.status_code == 201, created.text


def produce(broker: BrokerProcess, topic: str, partition: int, count: int) -> None:
    """``count`` records into one partition, over HTTP."""
    records = [{"value": f"record-{i}", "partition": partition} for i in range(count)]
    answer = httpx.post(
        f"{broker.url}/v1/topics/{topic}/records", json={"records": records}, timeout=TIMEOUT_S
    )
    assert answer.status_code == 200, answer.text


def http_partitions(broker: BrokerProcess, topic: str) -> list[dict[str, Any]]:
    described = httpx.get(f"{broker.url}/v1/topics/{topic}", timeout=TIMEOUT_S)
    described.raise_for_status()
    partitions: list[dict[str, Any]] = described.json()["partitions"]
    return partitions


def leader_of(kafka_admin: KafkaAdminClient, topic: str) -> int:
    (described,) = kafka_admin.describe_topics([topic])
    leader: int = described["partitions"][0]["leader_id"]
    return leader


# -- OffsetForLeaderEpoch -------------------------------------------------------------------


def first_offset_read(broker: BrokerProcess, topic: str, offset: int, leader_epoch: int) -> int:
    """The offset of the first record a librdkafka consumer reads when assigned at
    ``offset`` with ``leader_epoch`` (it validates that position with OffsetForLeaderEpoch
    before fetching; a position the log does not have resets to the earliest offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.kafka,
            "group.id": unique("epoch"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, offset, leader_epoch=leader_epoch)])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            for message in consumer.consume(10, 0.5):
                found = message.offset()
                if message.error() is None and found is not None:
                    return int(found)
        raise AssertionError(f"no record of {topic} read in {TIMEOUT_S} s")
    finally:
        consumer.close()


def test_a_consumer_keeps_a_position_of_the_current_epoch_and_resets_one_of_a_later_epoch(
    broker: BrokerProcess,
) -> None:
    """The current epoch ends at the high watermark, so a position in it is valid; a later
    epoch is unknown to the log (-1), which librdkafka treats as truncation."""
    topic = unique("epochs")
    create_topic(broker, topic, 1)
    produce(broker, topic, 0, 3)
    assert first_offset_read(broker, topic, 2, LEADER_EPOCH) == 2
    assert first_offset_read(broker, topic, 2, LEADER_EPOCH + 5) == 0


def test_offset_for_leader_epoch_answers_kafkas_end_offsets(
    broker: BrokerProcess, kafka_admin: KafkaAdminClient
) -> None:
    topic = unique("epoch-ends")
    create_topic(broker, topic, 2)
    produce(broker, topic, 1, 4)
    (described,) = kafka_admin.describe_topic_partitions([topic])["topics"]
    assert {p["leader_epoch"] for p in described["partitions"]} == {LEADER_EPOCH}

    def partition(index: int, epoch: int, current: int = -1) -> OffsetForLeaderPartition:
        return OffsetForLeaderPartition(
            partition=i32(index), current_leader_epoch=i32(current), leader_epoch=i32(epoch)
        )

    asked = [
        partition(1, LEADER_EPOCH, LEADER_EPOCH),
        partition(0, LEADER_EPOCH),
        partition(1, LEADER_EPOCH + 3),
        partition(1, -1),
        partition(1, LEADER_EPOCH, LEADER_EPOCH + 1),
        partition(7, LEADER_EPOCH),
    ]
    assert broker.kafka is not None
    conn = RawConnection(broker.kafka)
    try:
        answer = conn.request(
            23,
            2,
            OffsetForLeaderEpochRequest(
                topics=(
                    OffsetForLeaderTopic(topic=TopicName(topic), partitions=tuple(asked)),
                    OffsetForLeaderTopic(
                        topic=TopicName(unique("missing")), partitions=(partition(0, 0),)
                    ),
                )
            ),
        )
        got = [
            [(int(p.error_code), int(p.leader_epoch), int(p.end_offset)) for p in t.partitions]
            for t in answer.topics
        ]
        assert got == [
            [
                (0, LEADER_EPOCH, 4),
                (0, LEADER_EPOCH, 0),
                (0, -1, -1),
                (0, -1, -1),
                (UNKNOWN_LEADER_EPOCH, -1, -1),
                (UNKNOWN_TOPIC, -1, -1),
            ],
            [(UNKNOWN_TOPIC, -1, -1)],
        ]
        newest = conn.request(
            23,
            4,
            OffsetForLeaderEpochRequestV4(
                replica_id=BrokerId(-1),
                topics=(
                    OffsetForLeaderTopicV4(
                        topic=TopicName(topic),
                        partitions=(
                            OffsetForLeaderPartitionV4(
                                partition=i32(1),
                                current_leader_epoch=i32(LEADER_EPOCH),
                                leader_epoch=i32(LEADER_EPOCH),
                            ),
                        ),
                    ),
                ),
            ),
        )
        (only,) = newest.topics[0].partitions
        assert (int(only.error_code), int(only.end_offset)) == (0, 4)
    finally:
        conn.close()


def test_epoch_ends_follow_kafkas_leader_epoch_cache() -> None:
    assert epoch_end(LEADER_EPOCH, -1, 5, 9) == EpochEnd(LEADER_EPOCH, 9)
    assert epoch_end(LEADER_EPOCH + 1, LEADER_EPOCH, 5, 9) == EpochEnd(-1, -1)
    assert epoch_end(-1, -1, 5, 9) == EpochEnd(-1, -1)
    # Older than the first epoch kept: that epoch's start, the log start offset.
    assert epoch_end(LEADER_EPOCH - 2, -1, 5, 9) == EpochEnd(LEADER_EPOCH - 2, 5)
    with pytest.raises(errors.UnknownLeaderEpochError):
        epoch_end(LEADER_EPOCH, LEADER_EPOCH + 1, 5, 9)
    with pytest.raises(errors.FencedLeaderEpochError):
        epoch_end(LEADER_EPOCH, LEADER_EPOCH - 2, 5, 9)


# -- DescribeLogDirs ------------------------------------------------------------------------


def test_log_dirs_name_the_root_and_each_partitions_segment_bytes(
    broker: BrokerProcess, kafka_admin: KafkaAdminClient, module_root: RootSpec
) -> None:
    topic = unique("sizes")
    create_topic(broker, topic, 3)
    produce(broker, topic, 0, 5)
    produce(broker, topic, 2, 1)
    expected = {p["partition"]: p["size_bytes"] for p in http_partitions(broker, topic)}
    assert expected[0] > expected[2] > 0 and expected[1] == 0

    (every,) = kafka_admin.describe_log_dirs()
    (log_dir,) = every["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == module_root.open().url
    (described,) = [t for t in log_dir["topics"] if t["name"] == topic]
    assert {p["partition_index"]: p["partition_size"] for p in described["partitions"]} == expected
    assert {(p["offset_lag"], p["is_future_key"]) for p in described["partitions"]} == {(0, False)}
    if module_root.s3 is not None:
        assert (log_dir["total_bytes"], log_dir["usable_bytes"]) == (-1, -1)
    else:
        assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0

    (named,) = kafka_admin.describe_log_dirs({topic: [2, 9], unique("missing"): [0]})
    (only,) = named["log_dirs"][0]["topics"]
    assert only["name"] == topic
    assert [(p["partition_index"], p["partition_size"]) for p in only["partitions"]] == [
        (2, expected[2])
    ]


# -- DescribeTopicPartitions ----------------------------------------------------------------


def test_topic_partitions_are_metadatas_answer_a_page_at_a_time(
    broker: BrokerProcess, kafka_admin: KafkaAdminClient
) -> None:
    prefix = unique("pages")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(broker, first, 3)
    create_topic(broker, second, 2)
    missing = f"{prefix}-c"
    metadata = {t["name"]: t for t in kafka_admin.describe_topics([first, second])}

    page = kafka_admin.describe_topic_partitions(
        [second, missing, first], response_partition_limit=4
    )
    assert [(t["name"], t["error_code"]) for t in page["topics"]] == [(first, 0), (second, 0)]
    assert [p["partition_index"] for p in page["topics"][0]["partitions"]] == [0, 1, 2]
    assert [p["partition_index"] for p in page["topics"][1]["partitions"]] == [0]
    assert page["next_cursor"] == {"topic_name": second, "partition_index": 1}
    for answered in page["topics"]:
        shown = {p["partition_index"]: p for p in metadata[answered["name"]]["partitions"]}
        for p in answered["partitions"]:
            same = shown[p["partition_index"]]
            keys = ("leader_id", "leader_epoch", "replica_nodes", "isr_nodes", "offline_replicas")
            assert {k: p[k] for k in keys} == {k: same[k] for k in keys}
        assert answered["topic_id"] == uuid.UUID(http_topic_id(broker, answered["name"]))

    rest = kafka_admin.describe_topic_partitions(
        [first, second, missing], cursor=page["next_cursor"]
    )
    assert [(t["name"], t["error_code"]) for t in rest["topics"]] == [
        (second, 0),
        (missing, UNKNOWN_TOPIC),
    ]
    assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [1]
    assert rest["next_cursor"] is None

    assert broker.kafka is not None
    conn = RawConnection(broker.kafka)
    try:
        refused = conn.request(
            75,
            0,
            DescribeTopicPartitionsRequest(
                topics=(TopicRequest(name=TopicName(first)),),
                response_partition_limit=i32(10),
                cursor=Cursor(topic_name=TopicName(second), partition_index=i32(0)),
            ),
        )
        assert [(t.name, int(t.error_code)) for t in refused.topics] == [(first, INVALID_REQUEST)]
    finally:
        conn.close()


def http_topic_id(broker: BrokerProcess, topic: str) -> str:
    described = httpx.get(f"{broker.url}/v1/topics/{topic}", timeout=TIMEOUT_S)
    described.raise_for_status()
    topic_id: str = described.json()["topic_id"]
    return topic_id


def test_a_page_holds_at_most_the_limit_and_points_past_it() -> None:
    assert window(3, 0, 10) == (range(0, 3), None)
    assert window(5, 1, 2) == (range(1, 3), 3)
    assert window(2, 4, 3) == (range(4, 2), None)


# -- ElectLeaders ---------------------------------------------------------------------------


def test_no_partition_needs_an_election(
    broker: BrokerProcess, kafka_admin: KafkaAdminClient
) -> None:
    topic = unique("elected")
    create_topic(broker, topic, 2)
    assert broker.kafka is not None
    admin = AdminClient({"bootstrap.servers": broker.kafka})
    asked = [TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 5)]
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        answer = admin.elect_leaders(election, asked).result(timeout=TIMEOUT_S)
        codes = {
            (tp.topic, tp.partition): None if error is None else error.code()
            for tp, error in answer.items()
        }
        assert codes == {
            (topic, 0): ELECTION_NOT_NEEDED,
            (topic, 1): ELECTION_NOT_NEEDED,
            (topic, 5): UNKNOWN_TOPIC,
        }
    # Every partition: only those an election changed are answered, so none.
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=TIMEOUT_S) == {}

    answer = kafka_admin.elect_leaders(0, {topic: [1]}, raise_errors=False)
    assert answer.error_code == 0
    ((partition,),) = [r.partition_result for r in answer.replica_election_results]
    assert (partition.partition_id, partition.error_code) == (1, ELECTION_NOT_NEEDED)


# -- Partition reassignments ----------------------------------------------------------------


def test_partitions_stay_on_their_one_replica(
    broker: BrokerProcess, kafka_admin: KafkaAdminClient
) -> None:
    topic = unique("placed")
    create_topic(broker, topic, 2)
    leader = leader_of(kafka_admin, topic)
    tp0, tp1 = KpTopicPartition(topic, 0), KpTopicPartition(topic, 1)

    assert kafka_admin.list_partition_reassignments() == {}
    assert kafka_admin.list_partition_reassignments({topic: [0], unique("missing"): [0]}) == {}
    answer = kafka_admin.alter_partition_reassignments(
        {tp0: [leader], tp1: [leader + 1], KpTopicPartition(topic, 4): [leader]}
    )
    assert answer == {
        tp0: None,
        tp1: InvalidReplicationAssignmentError,
        KpTopicPartition(topic, 4): UnknownTopicOrPartitionError,
    }
    assert kafka_admin.alter_partition_reassignments({tp0: None}) == {
        tp0: NoReassignmentInProgressError
    }
    assert kafka_admin.list_partition_reassignments() == {}
    assert leader_of(kafka_admin, topic) == leader


def test_a_reassignment_is_refused_unless_it_names_the_leader_alone() -> None:
    live = frozenset({1, 2})
    assert reassignment_refusal([1], 1, live, False) is None
    cancel = reassignment_refusal(None, 1, live, True)
    assert isinstance(cancel, errors.NoReassignmentInProgressError)
    for target in ([], [1, 1], [3], [2]):
        refused = reassignment_refusal(target, 1, live, True)
        assert isinstance(refused, errors.InvalidReplicaAssignmentError), target
    grown = reassignment_refusal([1, 2], 1, live, False)
    assert isinstance(grown, errors.InvalidReplicationFactorError)
    moved = reassignment_refusal([2], 1, live, True)
    assert moved is not None and "storage root keeps the copies" in moved.message


# -- OffsetDelete ---------------------------------------------------------------------------


def subscribed_consumer(broker: BrokerProcess, group: str, topic: str) -> Consumer:
    """A librdkafka consumer of ``group`` subscribed to ``topic``, once it has its partitions."""
    assigned: list[Any] = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.kafka,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 10_000,
        }
    )
    consumer.subscribe([topic], on_assign=lambda _, partitions: assigned.extend(partitions))
    deadline = time.monotonic() + TIMEOUT_S
    while not assigned and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert assigned, f"the consumer of {group} got no partitions in {TIMEOUT_S} s"
    return consumer


def test_offsets_are_deleted_unless_the_group_consumes_their_topic(
    broker: BrokerProcess, kafka_admin: KafkaAdminClient
) -> None:
    consumed, other = unique("consumed"), unique("kept")
    create_topic(broker, consumed, 1)
    create_topic(broker, other, 2)
    group = unique("offsets")
    committed = {
        KpTopicPartition(consumed, 0): OffsetAndMetadata(1, "", -1),
        KpTopicPartition(other, 0): OffsetAndMetadata(2, "", -1),
        KpTopicPartition(other, 1): OffsetAndMetadata(3, "", -1),
    }
    assert set(kafka_admin.alter_group_offsets(group, committed).values()) == {NoError}

    missing = KpTopicPartition(unique("missing"), 0)
    gone = kafka_admin.delete_group_offsets(
        group, [KpTopicPartition(other, 0), KpTopicPartition(other, 7), missing]
    )
    assert gone == {
        KpTopicPartition(other, 0): NoError,
        KpTopicPartition(other, 7): UnknownTopicOrPartitionError,
        missing: UnknownTopicOrPartitionError,
    }
    left = kafka_admin.list_group_offsets({group: None})[group]
    assert set(left) == {KpTopicPartition(consumed, 0), KpTopicPartition(other, 1)}

    consumer = subscribed_consumer(broker, group, consumed)
    try:
        busy = kafka_admin.delete_group_offsets(
            group, [KpTopicPartition(consumed, 0), KpTopicPartition(other, 1)]
        )
        assert busy == {
            KpTopicPartition(consumed, 0): GroupSubscribedToTopicError,
            KpTopicPartition(other, 1): NoError,
        }
    finally:
        consumer.close()
    left = kafka_admin.list_group_offsets({group: None})[group]
    assert set(left) == {KpTopicPartition(consumed, 0)}

    with pytest.raises(GroupIdNotFoundError):
        kafka_admin.delete_group_offsets(unique("no-group"), [KpTopicPartition(other, 0)])


def test_a_consumers_subscription_names_its_topics() -> None:
    out = io.BytesIO(b"\x00\x01")
    out.seek(2)
    entity_writer(ConsumerProtocolSubscription)(
        out, ConsumerProtocolSubscription(topics=("a", "b"), user_data=None, owned_partitions=())
    )
    assert subscribed_topics(out.getvalue()) == {"a", "b"}
    assert subscribed_topics(b"\xff\xff") is None
    assert subscribed_topics(b"") is None


# -- DescribeProducers ----------------------------------------------------------------------


def test_producers_are_the_idempotent_ones_the_partition_kept(
    broker: BrokerProcess, kafka_admin: KafkaAdminClient
) -> None:
    topic = unique("producers")
    create_topic(broker, topic, 2)
    producer = Producer(
        {"bootstrap.servers": broker.kafka, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(4):
        producer.produce(topic, value=b"v%d" % i, partition=1)
    assert producer.flush(TIMEOUT_S) == 0
    tp0, tp1 = KpTopicPartition(topic, 0), KpTopicPartition(topic, 1)
    described = kafka_admin.describe_producers([tp0, tp1])
    assert described[tp0].active_producers == []
    (state,) = described[tp1].active_producers
    assert (state.producer_epoch, state.last_sequence) == (0, 3)
    assert state.producer_id >= 0
    assert (state.coordinator_epoch, state.current_transaction_start_offset) == (-1, -1)

    with pytest.raises(UnknownTopicOrPartitionError):
        leader = leader_of(kafka_admin, topic)
        kafka_admin.describe_producers([KpTopicPartition(topic, 5)], broker_id=leader)


def test_sequences_are_read_from_per_partition_streams() -> None:
    txns = {
        producer_txn(7, 1): 9,
        producer_txn(7, 11): 4,
        producer_txn(8): 2,
        producer_txn(9, 1): 0,
        "lakelog.partition.1": 40,
    }
    assert partition_sequences(txns, 1) == {7: 9, 9: 0}
    assert partition_sequences(txns, 11) == {7: 4}
    assert partition_sequences(txns, 2) == {}
