"""Bad bytes on the Kafka socket: Kafka's error or a closed connection, nothing stored.

Truncated frames, lying and huge size prefixes, unknown APIs and versions,
garbage and CRC-broken record batches, and random frames from hypothesis:
the broker answers with Kafka's error code or closes that connection, keeps
serving every other client, keeps its memory, and stores nothing.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from dataclasses import replace

import httpx
import psutil
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from lakelog.testing.brokers import wait_for
from tests.client.conftest import create_topic
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.raw import RawConnection

TOPIC = "guarded"
CORRUPT_MESSAGE = 2
UNSUPPORTED_VERSION = 35
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
OFFSET_METADATA_TOO_LARGE = 12


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    process = start_module_broker(RootSpec(str(tmp_path_factory.mktemp("root"))))
    create_topic(process.url, TOPIC, 2)
    return process


def connect(broker: BrokerProcess) -> RawConnection:
    assert broker.kafka is not None
    return RawConnection(broker.kafka)


def stored_records(broker: BrokerProcess) -> int:
    response = httpx.get(f"{broker.url}/v1/topics/{TOPIC}/offsets", timeout=60)
    assert response.status_code == 200, response.text
    return sum(int(p["high_watermark"]) for p in response.json()["partitions"])


def still_serves(broker: BrokerProcess) -> None:
    conn = connect(broker)
    try:
        answer = conn.request(
            18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
        assert answer.error_code == 0
    finally:
        conn.close()


def record_batch(n: int = 3) -> bytearray:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
    for i in range(n):
        builder.append(i, 1_700_000_000_000, b"k", b"v%d" % i, [])
    built: bytearray = builder.build()
    return built


def produce_request(records: bytes) -> ProduceRequest:
    return ProduceRequest(
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(
                name=TopicName(TOPIC),
                partition_data=(PartitionProduceData(index=i32(0), records=Records(records)),),
            ),
        ),
    )


def produce_error(broker: BrokerProcess, records: bytes) -> tuple[int, str | None]:
    conn = connect(broker)
    try:
        answer = conn.request(0, 9, produce_request(records))
        (part,) = answer.responses[0].partition_responses
        return int(part.error_code), part.error_message
    finally:
        conn.close()


def test_garbage_and_crc_broken_batches_get_corrupt_message(broker: BrokerProcess) -> None:
    before = stored_records(broker)
    broken = record_batch()
    broken[-1] ^= 0xFF  # a record byte changes: the CRC no longer matches
    code, message = produce_error(broker, bytes(broken))
    assert code == CORRUPT_MESSAGE and message is not None and "CRC" in message
    code, message = produce_error(broker, b"\x00" * 70)
    assert code == CORRUPT_MESSAGE, message
    code, message = produce_error(broker, bytes(record_batch())[:40])
    assert code == CORRUPT_MESSAGE, message
    assert stored_records(broker) == before
    code, _ = produce_error(broker, bytes(record_batch()))
    assert code == 0
    assert stored_records(broker) == before + 3


@pytest.mark.parametrize(
    "size_prefix",
    [2**31 - 1, 2_000_000_000, -1, 0, 3],
    ids=["max-int", "2GB", "negative", "zero", "shorter-than-a-header"],
)
def test_impossible_sizes_close_the_connection_without_reading(
    broker: BrokerProcess, size_prefix: int
) -> None:
    rss = psutil.Process(broker.pid).memory_info().rss
    conn = connect(broker)
    conn.send_bytes(struct.pack(">i", size_prefix) + b"\x00" * 16)
    wait_for(conn.closed_by_broker, "the broker to close the connection", 30)
    conn.close()
    assert psutil.Process(broker.pid).memory_info().rss - rss < 64 << 20
    still_serves(broker)


def test_unknown_api_and_versions(broker: BrokerProcess) -> None:
    conn = connect(broker)
    conn.send_bytes(conn.frame(999, 0, b"", flexible=False))
    wait_for(conn.closed_by_broker, "an unknown API key to close the connection", 30)
    conn.close()

    conn = connect(broker)
    conn.send_bytes(conn.frame(0, 99, b"", flexible=False))  # Produce v99
    wait_for(conn.closed_by_broker, "an unknown Produce version to close the connection", 30)
    conn.close()

    conn = connect(broker)
    try:
        conn.send_bytes(conn.frame(18, 99, b"", flexible=False))  # ApiVersions v99
        answer = conn.read_response(18, 0)
        assert answer.error_code == UNSUPPORTED_VERSION
        assert any(api.api_key == 0 for api in answer.api_keys), "the answer lists the APIs"
    finally:
        conn.close()
    still_serves(broker)


def test_truncated_frame_then_hang_up(broker: BrokerProcess) -> None:
    conn = connect(broker)
    frame = conn.frame(0, 9, b"\x00" * 200)
    conn.send_bytes(frame[:50])
    conn.close()
    still_serves(broker)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    api_key=st.sampled_from([0, 1, 2, 3, 10, 18, 22]),
    version=st.integers(min_value=0, max_value=12),
    body=st.binary(max_size=300),
)
def test_random_frames_never_store_data_or_stop_the_broker(
    broker: BrokerProcess, api_key: int, version: int, body: bytes
) -> None:
    before = stored_records(broker)
    conn = connect(broker)
    try:
        conn.send_bytes(conn.frame(api_key, version, body, flexible=version >= 9))
        conn.read_frame()  # an answer (an error) or None (closed): both are fine
    finally:
        conn.close()
    assert stored_records(broker) == before
    still_serves(broker)


def test_clients_cannot_write_the_internal_offsets_topic(broker: BrokerProcess) -> None:
    commit = httpx.post(
        f"{broker.url}/v1/groups/watchers/offsets",
        json={
            "member_id": "",
            "generation_id": -1,
            "offsets": [{"topic": TOPIC, "partition": 0, "offset": 1}],
        },
        timeout=60,
    )
    assert commit.status_code == 200, commit.text  # the offsets topic exists from here on
    conn = connect(broker)
    try:
        request = produce_request(bytes(record_batch()))
        forged = replace(
            request,
            topic_data=(replace(request.topic_data[0], name=TopicName("__consumer_offsets")),),
        )
        answer = conn.request(0, 9, forged)
        (part,) = answer.responses[0].partition_responses
        assert part.error_code == INVALID_TOPIC_EXCEPTION, part.error_message
    finally:
        conn.close()
    offsets = httpx.get(f"{broker.url}/v1/groups/watchers/offsets", timeout=60).json()
    assert [o["offset"] for o in offsets["offsets"]] == [1]


def offset_commit_error(broker: BrokerProcess, offset: int, metadata: str) -> int:
    conn = connect(broker)
    try:
        answer = conn.request(
            8,
            8,
            OffsetCommitRequest(
                group_id=GroupId("careless"),
                generation_id_or_member_epoch=i32(-1),
                member_id="",
                group_instance_id=None,
                topics=(
                    OffsetCommitRequestTopic(
                        name=TopicName(TOPIC),
                        partitions=(
                            OffsetCommitRequestPartition(
                                partition_index=i32(0),
                                committed_offset=i64(offset),
                                committed_leader_epoch=i32(-1),
                                committed_metadata=metadata,
                            ),
                        ),
                    ),
                ),
            ),
        )
        return int(answer.topics[0].partitions[0].error_code)
    finally:
        conn.close()


def test_bad_offset_commits_are_refused_and_store_nothing(broker: BrokerProcess) -> None:
    assert offset_commit_error(broker, -5, "") == INVALID_REQUEST
    assert offset_commit_error(broker, 1, "m" * 5000) == OFFSET_METADATA_TOO_LARGE
    stored = httpx.get(f"{broker.url}/v1/groups/careless/offsets", timeout=60).json()
    assert stored["offsets"] == []
    assert offset_commit_error(broker, 1, "ok") == 0
