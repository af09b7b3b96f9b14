"""The newest layouts of the APIs clients use, as raw frames: topics by id, and each
version's own fields.

Fetch v18, Produce v13, OffsetCommit v10, OffsetFetch v10 and DeleteTopics v6
name topics by the id Metadata answers; they must reach the same records and
offsets as the versions that name topics by name, and an id no topic has is
UNKNOWN_TOPIC_ID (100), as on Kafka. Metadata v13, DescribeGroups v6,
ListGroups v5, DescribeCluster v2 and FindCoordinator v6 are checked for what
their version adds.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.delete_topics.v6 import request as delete_topics_v6
from kio.schema.describe_cluster.v2 import request as describe_cluster_v2
from kio.schema.describe_groups.v6 import request as describe_groups_v6
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch.v18 import request as fetch_v18
from kio.schema.find_coordinator.v6 import request as find_coordinator_v6
from kio.schema.list_groups.v5 import request as list_groups_v5
from kio.schema.metadata.v13 import request as metadata_v13
from kio.schema.offset_commit.v10 import request as offset_commit_v10
from kio.schema.offset_fetch.v8 import request as offset_fetch_v8
from kio.schema.offset_fetch.v10 import request as offset_fetch_v10
from kio.schema.produce.v13 import request as produce_v13
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.test_produce_consume import create_topic

pytestmark = pytest.mark.integration

TOPIC = "by-id"
GROUP = "by-id-group"
RECORDS = 5
UNKNOWN_TOPIC_ID, INVALID_REQUEST, GROUP_ID_NOT_FOUND = 100, 42, 69
NO_ID = uuid.UUID(int=0)
NOBODY = uuid.UUID("0badc0de-0000-4000-8000-000000000000")
PRODUCE, FETCH, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 3, 8, 9
FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_TOPICS, DESCRIBE_CLUSTER = (
    10,
    15,
    16,
    20,
    60,
)


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory,
    start_module_broker: Callable[..., BrokerProcess],
) -> BrokerProcess:
    started = start_module_broker(RootSpec(str(tmp_path_factory.mktemp("root"))))
    create_topic(started, TOPIC, partitions=2)
    records = [{"value": f"v{i}", "partition": 0} for i in range(RECORDS)]
    response = httpx.post(
        f"{started.url}/v1/topics/{TOPIC}/records", json={"records": records}, timeout=60
    )
    assert response.status_code == 200, response.text
    return started


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[RawConnection]:
    assert broker.kafka is not None
    connection = RawConnection(broker.kafka)
    yield connection
    connection.close()


def metadata(conn: RawConnection, name: str | None, topic_id: uuid.UUID = NO_ID) -> Any:
    return conn.request(
        METADATA,
        13,
        metadata_v13.MetadataRequest(
            topics=(
                metadata_v13.MetadataRequestTopic(
                    topic_id=topic_id, name=None if name is None else TopicName(name)
                ),
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )


def topic_id(conn: RawConnection, name: str = TOPIC) -> uuid.UUID:
    (topic,) = metadata(conn, name).topics
    assert topic.error_code == 0 and topic.topic_id != NO_ID
    return uuid.UUID(str(topic.topic_id))


def fetch_by_id(conn: RawConnection, ids: list[uuid.UUID]) -> Any:
    return conn.request(
        FETCH,
        18,
        fetch_v18.FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
            min_bytes=i32(0),
            topics=tuple(
                fetch_v18.FetchTopic(
                    topic_id=i,
                    partitions=(
                        fetch_v18.FetchPartition(
                            partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20)
                        ),
                    ),
                )
                for i in ids
            ),
            forgotten_topics_data=(),
        ),
    )


def fetch_by_name(conn: RawConnection, name: str) -> Any:
    return conn.request(
        FETCH,
        12,
        fetch_v12.FetchRequest(
            replica_id=BrokerId(-1),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
            min_bytes=i32(0),
            topics=(
                fetch_v12.FetchTopic(
                    topic=TopicName(name),
                    partitions=(
                        fetch_v12.FetchPartition(
                            partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20)
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        ),
    )


def test_metadata_v13_answers_a_top_level_error_code_and_topics_by_id(
    conn: RawConnection,
) -> None:
    answer = metadata(conn, TOPIC)
    assert answer.error_code == 0
    by_id = metadata(conn, None, topic_id(conn))
    assert [t.name for t in by_id.topics] == [TOPIC]
    (unknown,) = metadata(conn, None, NOBODY).topics
    assert (unknown.error_code, unknown.name, unknown.topic_id) == (UNKNOWN_TOPIC_ID, None, NOBODY)


def test_fetch_by_topic_id_reads_what_fetch_by_name_reads(conn: RawConnection) -> None:
    by_name = fetch_by_name(conn, TOPIC).responses[0].partitions[0]
    answer = fetch_by_id(conn, [topic_id(conn)])
    (topic,) = answer.responses
    assert topic.topic_id == topic_id(conn)
    (part,) = topic.partitions
    assert part.error_code == 0 and part.high_watermark == RECORDS
    assert bytes(part.records) == bytes(by_name.records) != b""
    assert answer.node_endpoints == ()


def test_fetch_of_an_unknown_topic_id_is_unknown_topic_id(conn: RawConnection) -> None:
    answer = fetch_by_id(conn, [NOBODY, topic_id(conn)])
    unknown, known = answer.responses
    assert unknown.topic_id == NOBODY
    assert [p.error_code for p in unknown.partitions] == [UNKNOWN_TOPIC_ID]
    assert [p.error_code for p in known.partitions] == [0]


def produce_by_id(conn: RawConnection, ids: list[uuid.UUID]) -> Any:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
    builder.append(0, 1_700_000_000_000, b"k", b"by-id", [])
    records = Records(bytes(builder.build()))
    return conn.request(
        PRODUCE,
        13,
        produce_v13.ProduceRequest(
            acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            topic_data=tuple(
                produce_v13.TopicProduceData(
                    topic_id=i,
                    partition_data=(
                        produce_v13.PartitionProduceData(index=i32(1), records=records),
                    ),
                )
                for i in ids
            ),
        ),
    )


def test_produce_by_topic_id_stores_in_that_topic(
    broker: BrokerProcess, conn: RawConnection
) -> None:
    answer = produce_by_id(conn, [topic_id(conn), NOBODY])
    known, unknown = answer.responses
    assert known.topic_id == topic_id(conn) and unknown.topic_id == NOBODY
    assert [(p.error_code, p.base_offset) for p in known.partition_responses] == [(0, 0)]
    assert [p.error_code for p in unknown.partition_responses] == [UNKNOWN_TOPIC_ID]
    stored = httpx.get(
        f"{broker.url}/v1/topics/{TOPIC}/partitions/1/records", params={"offset": 0}, timeout=60
    ).json()
    assert [r["value"] for r in stored["records"]] == ["by-id"]


def commit_and_fetch_by_id(conn: RawConnection) -> None:
    """Commit offset 3 of partition 0 by topic id, and read it back by id."""
    known = topic_id(conn)
    commit = conn.request(
        OFFSET_COMMIT,
        10,
        offset_commit_v10.OffsetCommitRequest(
            group_id=GroupId(GROUP),
            generation_id_or_member_epoch=i32(-1),
            member_id="",
            topics=tuple(
                offset_commit_v10.OffsetCommitRequestTopic(
                    topic_id=i,
                    partitions=(
                        offset_commit_v10.OffsetCommitRequestPartition(
                            partition_index=i32(0), committed_offset=i64(3), committed_metadata="m"
                        ),
                    ),
                )
                for i in (known, NOBODY)
            ),
        ),
    )
    assert [(t.topic_id, t.partitions[0].error_code) for t in commit.topics] == [
        (known, 0),
        (NOBODY, UNKNOWN_TOPIC_ID),
    ]
    fetched = conn.request(
        OFFSET_FETCH,
        10,
        offset_fetch_v10.OffsetFetchRequest(
            groups=(
                offset_fetch_v10.OffsetFetchRequestGroup(
                    group_id=GroupId(GROUP),
                    topics=tuple(
                        offset_fetch_v10.OffsetFetchRequestTopics(
                            topic_id=i, partition_indexes=(i32(0),)
                        )
                        for i in (known, NOBODY)
                    ),
                ),
            ),
        ),
    )
    (group,) = fetched.groups
    assert group.error_code == 0
    assert [
        (t.topic_id, t.partitions[0].committed_offset, t.partitions[0].error_code)
        for t in group.topics
    ] == [(known, 3, 0), (NOBODY, -1, UNKNOWN_TOPIC_ID)]
    everything = conn.request(
        OFFSET_FETCH,
        10,
        offset_fetch_v10.OffsetFetchRequest(
            groups=(
                offset_fetch_v10.OffsetFetchRequestGroup(group_id=GroupId(GROUP), topics=None),
            ),
        ),
    )
    assert [(t.topic_id, t.partitions[0].metadata) for t in everything.groups[0].topics] == [
        (known, "m")
    ]


def test_offsets_committed_and_fetched_by_topic_id(conn: RawConnection) -> None:
    commit_and_fetch_by_id(conn)


def test_offset_fetch_v8_answers_each_group(conn: RawConnection) -> None:
    commit_and_fetch_by_id(conn)
    answer = conn.request(
        OFFSET_FETCH,
        8,
        offset_fetch_v8.OffsetFetchRequest(
            groups=tuple(
                offset_fetch_v8.OffsetFetchRequestGroup(
                    group_id=GroupId(g),
                    topics=(
                        offset_fetch_v8.OffsetFetchRequestTopics(
                            name=TopicName(TOPIC), partition_indexes=(i32(0),)
                        ),
                    ),
                )
                for g in (GROUP, "no-such-group")
            ),
        ),
    )
    offsets = {g.group_id: g.topics[0].partitions[0].committed_offset for g in answer.groups}
    assert offsets == {GROUP: 3, "no-such-group": -1}


def test_describe_groups_v6_answers_an_unknown_group_not_found(conn: RawConnection) -> None:
    commit_and_fetch_by_id(conn)
    answer = conn.request(
        DESCRIBE_GROUPS,
        6,
        describe_groups_v6.DescribeGroupsRequest(
            groups=(GroupId("never-seen"), GroupId(GROUP)),
            include_authorized_operations=False,
        ),
    )
    unknown, stored = answer.groups
    assert (unknown.error_code, unknown.group_state) == (GROUP_ID_NOT_FOUND, "Dead")
    assert unknown.error_message is not None and "never-seen" in unknown.error_message
    assert (stored.error_code, stored.group_state, stored.error_message) == (0, "Empty", None)


@pytest.mark.parametrize(
    ("types", "listed"), [((), True), (("classic",), True), (("Consumer",), False)]
)
def test_list_groups_v5_answers_every_group_classic(
    conn: RawConnection, types: tuple[str, ...], listed: bool
) -> None:
    commit_and_fetch_by_id(conn)
    answer = conn.request(
        LIST_GROUPS, 5, list_groups_v5.ListGroupsRequest(states_filter=(), types_filter=types)
    )
    groups = {g.group_id: g.group_type for g in answer.groups}
    assert groups == ({GROUP: "classic"} if listed else {})


def test_describe_cluster_v2_answers_every_broker_unfenced(conn: RawConnection) -> None:
    answer = conn.request(
        DESCRIBE_CLUSTER,
        2,
        describe_cluster_v2.DescribeClusterRequest(
            include_cluster_authorized_operations=False,
            endpoint_type=i8(1),
            include_fenced_brokers=True,
        ),
    )
    assert answer.error_code == 0
    assert [b.is_fenced for b in answer.brokers] == [False]


def test_find_coordinator_v6_finds_a_group_and_refuses_share_groups(
    conn: RawConnection,
) -> None:
    answer = conn.request(
        FIND_COORDINATOR,
        6,
        find_coordinator_v6.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(GROUP,)),
    )
    assert [(c.key, c.error_code) for c in answer.coordinators] == [(GROUP, 0)]
    share = conn.request(
        FIND_COORDINATOR,
        6,
        find_coordinator_v6.FindCoordinatorRequest(
            key_type=i8(2), coordinator_keys=(f"{GROUP}:{NOBODY}:0",)
        ),
    )
    assert [c.error_code for c in share.coordinators] == [INVALID_REQUEST]


def test_delete_topics_v6_by_id(broker: BrokerProcess, conn: RawConnection) -> None:
    create_topic(broker, "doomed", partitions=1)
    doomed = topic_id(conn, "doomed")
    answer = conn.request(
        DELETE_TOPICS,
        6,
        delete_topics_v6.DeleteTopicsRequest(
            topics=(
                delete_topics_v6.DeleteTopicState(topic_id=doomed),
                delete_topics_v6.DeleteTopicState(topic_id=NOBODY),
                delete_topics_v6.DeleteTopicState(name=TopicName(TOPIC), topic_id=topic_id(conn)),
            ),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        ),
    )
    assert [(r.name, r.topic_id, r.error_code) for r in answer.responses] == [
        ("doomed", doomed, 0),
        (None, NOBODY, UNKNOWN_TOPIC_ID),
        (TOPIC, topic_id(conn), INVALID_REQUEST),
    ]
    (gone,) = metadata(conn, None, doomed).topics
    assert gone.error_code == UNKNOWN_TOPIC_ID
    assert [p.error_code for p in fetch_by_id(conn, [doomed]).responses[0].partitions] == [
        UNKNOWN_TOPIC_ID
    ]
