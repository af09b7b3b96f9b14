"""The Kafka listener's security on real brokers: SASL, ACLs and quotas, as Kafka applies them.

Every client library authenticates with PLAIN (an API key) and OAUTHBEARER
(a JWT); bad credentials are refused with SASL_AUTHENTICATION_FAILED and the
broker keeps serving; ACLs refuse produce, commit and describe with Kafka's
error codes and store nothing; quotas show as ``throttle_time_ms``.
"""

from __future__ import annotations

import datetime
import re
import struct
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.types import GroupId, ProducerId, TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from lakelog.testing.brokers import free_port, wait_for
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import CLIENTS, Message, kafka_client
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.sasl import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    authenticate,
    client_settings,
    handshake,
    oauth_bytes,
    plain_bytes,
    sasl_connection,
    token,
)
from tests.server.security.helpers import (
    ADMIN,
    KEYS,
    StartBroker,
    acl,
    add_acls,
    call,
    create_topic,
    data_snapshot,
    eventually,
    start_secured,
)

METADATA, PRODUCE, FETCH, OFFSET_COMMIT, LIST_GROUPS, INIT_PRODUCER_ID = 3, 0, 1, 8, 16, 22
CLUSTER_AUTHORIZATION_FAILED, DESCRIBE_CLUSTER = 31, 60
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE = 58, 33, 34
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30


def secured(start_broker: StartBroker, tmp_path: Path, **settings: object) -> BrokerProcess:
    broker = start_secured(start_broker, RootSpec(str(tmp_path / "root")), tmp_path, **settings)
    assert broker.kafka is not None
    return broker


def metric(broker: BrokerProcess, name: str) -> float:
    text = httpx.get(f"{broker.url}/metrics", timeout=60).text
    found = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def metadata(conn: RawConnection, topics: list[str] | None) -> dict[str, int]:
    """Topic name -> error code of a Metadata v12 answer (all topics when ``topics`` is None)."""
    wanted = (
        None
        if topics is None
        else tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics)
    )
    answer = conn.request(
        METADATA,
        12,
        MetadataRequest(
            topics=wanted,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    return {str(t.name): int(t.error_code) for t in answer.topics}


@pytest.mark.parametrize("client_name", CLIENTS)
def test_each_client_authenticates_with_plain_and_oauthbearer(
    client_name: str, start_broker: StartBroker, tmp_path: Path
) -> None:
    broker = secured(start_broker, tmp_path)
    assert broker.kafka is not None
    create_topic(broker, "signed")
    add_acls(
        broker,
        acl("User:alice", "WRITE", "signed"),
        acl("User:bob", "READ", "signed"),
        # librdkafka looks up the coordinator of its group.id even when it only assigns
        acl("User:bob", "READ", "unused-assign-only", "GROUP"),
    )
    sent = [Message(f"k{i}".encode(), f"v{i}".encode()) for i in range(5)]
    client = kafka_client(client_name)
    eventually(lambda: metadata(sasl_connection(broker.kafka or "", "User:alice"), None) != {})
    # alice produces with PLAIN (username + API key), bob consumes with OAUTHBEARER (a JWT)
    delivered = client.produce(
        broker.kafka, "signed", sent, **client_settings(client_name, "PLAIN", "User:alice")
    )
    assert sorted(d.offset for d in delivered) == list(range(5))
    got = client.consume(
        broker.kafka,
        "signed",
        [0],
        5,
        60,
        **client_settings(client_name, "OAUTHBEARER", "User:bob"),
    )
    assert [m.body for m in got] == [m.body for m in sent]


def refused(address: str, mechanism: str, auth_bytes: bytes) -> tuple[int, str]:
    """(error code, message) of a SaslAuthenticate answer; the broker then hangs up."""
    conn = RawConnection(address)
    try:
        answer = authenticate(conn, mechanism, auth_bytes)
        wait_for(conn.closed_by_broker, "the refused connection to be closed", 30)
        return int(answer.error_code), str(answer.error_message)
    finally:
        conn.close()


def test_bad_credentials_are_refused_and_the_broker_keeps_serving(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    broker = secured(start_broker, tmp_path)
    address = broker.kafka or ""
    create_topic(broker, "guarded")
    failures = metric(broker, "lakelog_authentication_failures_total")
    wrong_password = "not-alices-key"
    # a wrong password, another principal's key, a JWT signed with the wrong secret
    code, message = refused(address, "PLAIN", plain_bytes("alice", wrong_password))
    assert code == SASL_AUTHENTICATION_FAILED and "alice" in message, message
    assert wrong_password not in message
    code, _ = refused(address, "PLAIN", plain_bytes("alice", KEYS["User:bob"]))
    assert code == SASL_AUTHENTICATION_FAILED
    forged = token("User:admin", secret="not-the-broker-secret-0123456789abcdef")
    code, message = refused(address, "OAUTHBEARER", oauth_bytes(forged))
    assert code == SASL_AUTHENTICATION_FAILED and "bearer token rejected" in message, message
    assert forged not in message

    # an unknown mechanism: Kafka's UNSUPPORTED_SASL_MECHANISM with the enabled ones
    conn = RawConnection(address)
    answer = handshake(conn, "GSSAPI")
    assert int(answer.error_code) == UNSUPPORTED_SASL_MECHANISM
    assert list(answer.mechanisms) == ["PLAIN", "OAUTHBEARER", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    conn.close()
    # SaslAuthenticate before the handshake: ILLEGAL_SASL_STATE, then the connection ends
    conn = RawConnection(address)
    answer = conn.request(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"x"))
    assert int(answer.error_code) == ILLEGAL_SASL_STATE
    wait_for(conn.closed_by_broker, "the out-of-order connection to be closed", 30)
    conn.close()
    # any other request before authentication ends the connection unanswered
    conn = RawConnection(address)
    with pytest.raises(ConnectionError):
        metadata(conn, None)
    conn.close()

    # SaslHandshake v0: the token follows as a bare frame, answered by a bare (empty) frame
    conn = RawConnection(address)
    answer = conn.request(SASL_HANDSHAKE, 0, SaslHandshakeRequestV0(mechanism="PLAIN"))
    assert int(answer.error_code) == 0
    token_bytes = plain_bytes("admin", KEYS["User:admin"])
    conn.send_bytes(struct.pack(">i", len(token_bytes)) + token_bytes)
    assert conn.read_frame() == b""
    assert metadata(conn, ["guarded"]) == {"guarded": 0}
    conn.close()
    conn = RawConnection(address)
    conn.request(SASL_HANDSHAKE, 0, SaslHandshakeRequestV0(mechanism="PLAIN"))
    token_bytes = plain_bytes("admin", wrong_password)
    conn.send_bytes(struct.pack(">i", len(token_bytes)) + token_bytes)
    assert conn.read_frame() is None  # a bad bare token ends the connection
    conn.close()

    eventually(lambda: metric(broker, "lakelog_authentication_failures_total") >= failures + 5)
    log = broker.log_path.read_text()
    assert "SASL authentication failed" in log
    assert wrong_password not in log and forged not in log

    # the broker goes on serving authenticated clients
    conn = sasl_connection(address, "User:admin")
    assert metadata(conn, None) == {"guarded": 0}
    conn.close()
    conn = sasl_connection(address, "User:admin", "OAUTHBEARER")
    assert metadata(conn, ["guarded"]) == {"guarded": 0}
    conn.close()


def record_batch(n: int = 3, value_size: int = 10) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
    for i in range(n):
        builder.append(i, 1_700_000_000_000, b"k", bytes([65 + i % 26]) * value_size, [])
    return bytes(builder.build())


def produce(conn: RawConnection, topic: str, records: bytes) -> tuple[int, int]:
    """(error code of partition 0, throttle_time_ms) of a Produce v9."""
    answer = conn.request(
        PRODUCE,
        9,
        ProduceRequest(
            acks=i16(-1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            topic_data=(
                TopicProduceData(
                    name=TopicName(topic),
                    partition_data=(PartitionProduceData(index=i32(0), records=Records(records)),),
                ),
            ),
        ),
    )
    (part,) = answer.responses[0].partition_responses
    return int(part.error_code), throttle_ms(answer)


def fetch(conn: RawConnection, topic: str) -> tuple[int, int, int]:
    """(error code, record bytes, throttle_time_ms) of a Fetch v12 of partition 0 from 0."""
    answer = conn.request(
        FETCH,
        12,
        FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
            min_bytes=i32(1),
            topics=(
                FetchTopic(
                    topic=TopicName(topic),
                    partitions=(
                        FetchPartition(
                            partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20)
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        ),
    )
    (part,) = answer.responses[0].partitions
    return int(part.error_code), len(part.records or b""), throttle_ms(answer)


def throttle_ms(answer: Any) -> int:
    throttle = answer.throttle_time
    return int(throttle.total_seconds() * 1000)


def offset_commit(conn: RawConnection, group: str, topic: str) -> int:
    answer = conn.request(
        OFFSET_COMMIT,
        8,
        OffsetCommitRequest(
            group_id=GroupId(group),
            generation_id_or_member_epoch=i32(-1),
            member_id="",
            group_instance_id=None,
            topics=(
                OffsetCommitRequestTopic(
                    name=TopicName(topic),
                    partitions=(
                        OffsetCommitRequestPartition(
                            partition_index=i32(0),
                            committed_offset=i64(1),
                            committed_leader_epoch=i32(-1),
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        ),
    )
    return int(answer.topics[0].partitions[0].error_code)


def init_producer_id(conn: RawConnection) -> int:
    answer = conn.request(
        INIT_PRODUCER_ID,
        4,
        InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
            producer_id=ProducerId(-1),
        ),
    )
    return int(answer.error_code)


def listed_groups(conn: RawConnection) -> list[str]:
    answer = conn.request(LIST_GROUPS, 4, ListGroupsRequest(states_filter=()))
    return sorted(str(g.group_id) for g in answer.groups)


def test_acls_refuse_kafka_requests_with_kafkas_codes_and_store_nothing(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    broker = secured(start_broker, tmp_path)
    address = broker.kafka or ""
    for name in ("orders", "payments", "audit"):
        create_topic(broker, name)
    add_acls(
        broker,
        acl("User:alice", "WRITE", "orders"),
        acl("User:alice", "READ", "orders"),
        acl("User:alice", "READ", "team-", "GROUP", pattern_type="PREFIXED"),
        acl("User:bob", "READ", "orders"),
        acl("User:bob", "READ", "payments"),
        acl("User:bob", "DESCRIBE", "team-b", "GROUP"),
        acl("User:carol", "READ", "ops", "GROUP"),
    )
    storage = RootSpec(str(tmp_path / "root")).open()
    alice = sasl_connection(address, "User:alice")
    eventually(lambda: metadata(alice, None) == {"orders": 0})

    # Metadata: all topics lists only describable ones; a named one is refused
    bob = sasl_connection(address, "User:bob", "OAUTHBEARER")
    assert metadata(bob, None) == {"orders": 0, "payments": 0}
    assert metadata(alice, ["payments", "no-such-topic"]) == {
        "payments": TOPIC_AUTHORIZATION_FAILED,
        "no-such-topic": TOPIC_AUTHORIZATION_FAILED,
    }

    # Produce needs WRITE: bob (READ only) is refused and nothing is stored
    before = data_snapshot(storage)
    assert produce(bob, "orders", record_batch())[0] == TOPIC_AUTHORIZATION_FAILED
    assert produce(alice, "payments", record_batch())[0] == TOPIC_AUTHORIZATION_FAILED
    assert data_snapshot(storage) == before
    assert produce(alice, "orders", record_batch())[0] == 0
    # the same refusal through a client library: the delivery fails, nothing is stored
    before = data_snapshot(storage)
    with pytest.raises(AssertionError, match="TOPIC_AUTHORIZATION_FAILED"):
        kafka_client("confluent").produce(
            address,
            "orders",
            [Message(b"k", b"v")],
            **client_settings("confluent", "PLAIN", "User:bob"),
        )
    assert data_snapshot(storage) == before
    # an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    assert init_producer_id(alice) == 0
    assert init_producer_id(bob) == CLUSTER_AUTHORIZATION_FAILED
    # Fetch needs READ
    assert fetch(bob, "orders")[:1] == (0,) and fetch(bob, "orders")[1] > 0
    assert fetch(alice, "payments") == (TOPIC_AUTHORIZATION_FAILED, 0, 0)

    # OffsetCommit needs READ on the group, then READ on the topic
    before = data_snapshot(storage)
    assert offset_commit(bob, "team-b", "orders") == GROUP_AUTHORIZATION_FAILED
    assert offset_commit(alice, "team-a", "payments") == TOPIC_AUTHORIZATION_FAILED
    assert data_snapshot(storage) == before
    assert offset_commit(alice, "team-a", "orders") == 0
    assert offset_commit(alice, "team-b", "orders") == 0
    committed = call(broker, "GET", "/v1/groups/team-a/offsets", ADMIN).json()["offsets"]
    assert [(o["topic"], o["offset"]) for o in committed] == [("orders", 1)]
    # ListGroups shows only the groups the principal may DESCRIBE
    carol = sasl_connection(address, "User:carol")
    assert listed_groups(alice) == ["team-a", "team-b"]
    assert listed_groups(bob) == ["team-b"]
    assert listed_groups(carol) == []
    for conn in (alice, bob, carol):
        conn.close()
    assert metric(broker, "lakelog_authorization_denials_total") > 0


def test_quotas_show_as_throttle_time_in_kafka_answers(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    broker = secured(start_broker, tmp_path, quota_window_num=3, quota_window_size_ms=500)
    address = broker.kafka or ""
    create_topic(broker, "metered")
    overrides = [
        ("alice", {"producer_byte_rate": 1000}),
        ("bob", {"consumer_byte_rate": 1000}),
        ("carol", {"request_rate": 2}),
    ]
    for user, quotas in overrides:
        change = {"entity": {"user": user}, "set": quotas}
        assert call(broker, "PATCH", "/v1/quotas", ADMIN, json=change).status_code == 200
    add_acls(
        broker,
        acl("User:alice", "WRITE", "metered"),
        acl("User:bob", "READ", "metered"),
        acl("User:carol", "DESCRIBE", "metered"),
    )
    admin = sasl_connection(address, "User:admin")
    assert produce(admin, "metered", record_batch(20, 500)) == (0, 0)  # admin has no quota
    alice = sasl_connection(address, "User:alice")
    eventually(lambda: produce(alice, "metered", record_batch(20, 500))[1] > 0)
    bob = sasl_connection(address, "User:bob")
    eventually(lambda: fetch(bob, "metered")[2] > 0)
    carol = sasl_connection(address, "User:carol")
    eventually(lambda: metadata_throttle(carol) > 0)
    for conn in (admin, alice, bob, carol):
        conn.close()


def metadata_throttle(conn: RawConnection) -> int:
    answer = conn.request(
        METADATA,
        12,
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
    )
    return throttle_ms(answer)


def test_sasl_ssl_listener_serves_tls_with_the_brokers_certificate(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from tests.server.security.test_tls import self_signed

    cert, key = self_signed(tmp_path)
    address = f"127.0.0.1:{free_port()}"
    start_secured(
        start_broker,
        RootSpec(str(tmp_path / "root")),
        tmp_path,
        ssl_certfile=cert,
        ssl_keyfile=key,
        kafka_listeners=f"SASL_SSL://{address}",
    )
    tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(cert)}
    plain = {**client_settings("confluent", "PLAIN", "User:admin"), **tls}
    oauth = {**client_settings("confluent", "OAUTHBEARER", "User:admin"), **tls}
    admin = AdminClient({"bootstrap.servers": address, **plain})
    for future in admin.create_topics([NewTopic("sealed", 1, 1)]).values():
        future.result(60)
    client = kafka_client("confluent")
    sent = [Message(b"k", f"v{i}".encode()) for i in range(3)]
    assert len(client.produce(address, "sealed", sent, **oauth)) == 3
    got = client.consume(address, "sealed", [0], 3, 60, **plain)
    assert [m.body for m in got] == [m.body for m in sent]
    # the listener speaks TLS only: a plaintext Kafka request gets no Kafka answer
    conn = RawConnection(address)
    with pytest.raises((ConnectionError, OSError)):
        handshake(conn, "PLAIN")
    conn.close()


def test_admin_apis_need_their_acls(start_broker: StartBroker, tmp_path: Path) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    broker = secured(start_broker, tmp_path)
    address = broker.kafka or ""
    create_topic(broker, "settled")
    add_acls(
        broker,
        acl("User:alice", "CREATE", "alice-", pattern_type="PREFIXED"),
        acl("User:alice", "DELETE", "alice-", pattern_type="PREFIXED"),
        acl("User:alice", "DESCRIBE_CONFIGS", "settled"),
        acl("User:bob", "READ", "settled"),
    )
    alice = AdminClient(
        {"bootstrap.servers": address, **client_settings("confluent", "PLAIN", "User:alice")}
    )
    bob = AdminClient(
        {"bootstrap.servers": address, **client_settings("confluent", "PLAIN", "User:bob")}
    )

    def error_of(future: Any) -> str:
        try:
            future.result(60)
        except KafkaException as exc:
            return str(exc.args[0].name())
        return "NO_ERROR"

    eventually(
        lambda: error_of(alice.create_topics([NewTopic("alice-1", 1, 1)])["alice-1"]) == "NO_ERROR"
    )
    assert (
        error_of(bob.create_topics([NewTopic("bobs", 1, 1)])["bobs"])
        == "TOPIC_AUTHORIZATION_FAILED"
    )
    assert error_of(bob.delete_topics(["settled"])["settled"]) == "TOPIC_AUTHORIZATION_FAILED"
    topics = call(broker, "GET", "/v1/topics", ADMIN).json()
    names = sorted(t if isinstance(t, str) else t["name"] for t in topics.get("topics", topics))
    assert names == ["alice-1", "settled"]
    assert error_of(alice.delete_topics(["alice-1"])["alice-1"]) == "NO_ERROR"
    settled = ConfigResource(ResourceType.TOPIC, "settled")
    assert error_of(alice.describe_configs([settled])[settled]) == "NO_ERROR"
    assert error_of(bob.describe_configs([settled])[settled]) == "TOPIC_AUTHORIZATION_FAILED"
    # DescribeCluster needs DESCRIBE on the cluster (librdkafka answers describe_cluster
    # from Metadata, so the request is sent raw)
    for principal, code in (("User:bob", CLUSTER_AUTHORIZATION_FAILED), ("User:admin", 0)):
        conn = sasl_connection(address, principal)
        answer = conn.request(
            DESCRIBE_CLUSTER, 1, DescribeClusterRequest(include_cluster_authorized_operations=False)
        )
        assert int(answer.error_code) == code, answer.error_message
        conn.close()
