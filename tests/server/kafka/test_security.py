"""The Kafka listener's security on real brokers: SASL, ACLs and quotas, as Kafka applies them.

Every client library authenticates with PLAIN (an API key) and OAUTHBEARER
(a JWT); bad credentials are refused with SASL_AUTHENTICATION_FAILED and the
broker keeps serving; ACLs refuse produce, commit and describe with Kafka's
error codes and store nothing; quotas show as ``throttle_time_ms``.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import CLIENTS, Message, kafka_client
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.sasl import (
    client_settings,
    sasl_connection,
)
from tests.server.security.helpers import (
    StartBroker,
    acl,
    add_acls,
    create_topic,
    eventually,
    start_secured,
)

METADATA, PRODUCE, FETCH, OFFSET_COMMIT, LIST_GROUPS = 3, 0, 1, 8, 16
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33
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
