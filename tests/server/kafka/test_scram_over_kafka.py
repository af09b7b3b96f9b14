"""SASL/SCRAM-SHA-256 and -512 on real brokers: credentials set with AlterUserScramCredentials
through confluent-kafka's AdminClient, then used by every client library.

The user's principal is ``User:<name>`` for ACLs; a wrong password is refused
with SASL authentication failed; bad alterations get Kafka's codes and store
nothing; only CLUSTER ALTER/DESCRIBE may alter/describe credentials.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.static.primitive import i8, i32

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import CLIENTS, Message, kafka_client
from tests.server.kafka.sasl import client_settings, sasl_connection
from tests.server.security.helpers import (
    StartBroker,
    acl,
    add_acls,
    create_topic,
    data_snapshot,
    eventually,
    start_secured,
)

pytestmark = pytest.mark.integration

DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 31, 33
RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL = 91, 93
PASSWORDS = {"alice": "alice-scram-pw", "bob": "bob-scram-pw"}
MECHANISM = {"alice": "SCRAM-SHA-256", "bob": "SCRAM-SHA-512"}


def confluent_admin(address: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {"bootstrap.servers": address, **client_settings("confluent", "PLAIN", "User:admin")}
    )


def set_credentials(address: str) -> None:
    """alice with SCRAM-SHA-256, bob with SCRAM-SHA-512, as confluent-kafka's users do it."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    mechanisms = {"alice": ScramMechanism.SCRAM_SHA_256, "bob": ScramMechanism.SCRAM_SHA_512}
    upsertions = [
        UserScramCredentialUpsertion(
            user, ScramCredentialInfo(mechanisms[user], 8192), PASSWORDS[user].encode()
        )
        for user in PASSWORDS
    ]
    admin = confluent_admin(address)
    for future in admin.alter_user_scram_credentials(upsertions, request_timeout=60).values():
        assert future.result(60) is None
    described = admin.describe_user_scram_credentials(request_timeout=60).result(60)
    assert {
        user: [(i.mechanism.name, i.iterations) for i in d.scram_credential_infos]
        for user, d in described.items()
    } == {"alice": [("SCRAM_SHA_256", 8192)], "bob": [("SCRAM_SHA_512", 8192)]}


def scram_settings(library: str, user: str, password: str | None = None) -> dict[str, Any]:
    secret = PASSWORDS[user] if password is None else password
    if library == "confluent":
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": MECHANISM[user],
            "sasl.username": user,
            "sasl.password": secret,
        }
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": MECHANISM[user],
        "sasl_plain_username": user,
        "sasl_plain_password": secret,
    }


@pytest.mark.parametrize("library", CLIENTS)
def test_each_client_authenticates_with_scram_credentials_set_over_kafka(
    library: str,
    make_root: Callable[[], RootSpec],
    start_broker: StartBroker,
    tmp_path: Path,
) -> None:
    broker = start_secured(start_broker, make_root(), tmp_path)
    address = broker.kafka or ""
    create_topic(broker, "salted")
    set_credentials(address)
    # the SCRAM users are principals User:alice and User:bob for ACLs
    add_acls(
        broker,
        acl("User:alice", "WRITE", "salted"),
        acl("User:bob", "READ", "salted"),
        acl("User:bob", "READ", "unused-assign-only", "GROUP"),
    )
    client = kafka_client(library)
    sent = [Message(f"k{i}".encode(), f"v{i}".encode()) for i in range(4)]
    delivered = client.produce(address, "salted", sent, **scram_settings(library, "alice"))
    assert sorted(d.offset for d in delivered) == [0, 1, 2, 3]
    got = client.consume(address, "salted", [0], 4, 60, **scram_settings(library, "bob"))
    assert [m.body for m in got] == [m.body for m in sent]
    # bob's SCRAM identity has READ only: his produce is refused as User:bob
    with pytest.raises(AssertionError, match="TOPIC_AUTHORIZATION_FAILED"):
        kafka_client("confluent").produce(
            address, "salted", sent[:1], **scram_settings("confluent", "bob")
        )


def confluent_auth_error(address: str, user: str, password: str) -> str:
    """The string ok, or what librdkafka reports for an admin call with these credentials."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[str] = []
    config: dict[str, Any] = {
        "bootstrap.servers": address,
        "error_cb": lambda error: errors.append(str(error)),
        **scram_settings("confluent", user, password),
    }
    admin = AdminClient(config)
    try:
        admin.list_topics(timeout=20)
    except KafkaException as exc:
        admin.poll(1)  # delivers the error callbacks
        return " / ".join([*errors, str(exc.args[0])])
    return "ok"


def test_a_wrong_password_fails_sasl_authentication(
    start_broker: StartBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    broker = secured(start_broker, tmp_path)
    address = broker.kafka or ""
    set_credentials(address)
    eventually(lambda: confluent_auth_error(address, "alice", PASSWORDS["alice"]) == "ok")
    refused = confluent_auth_error(address, "alice", "not-alices-password")
    assert "SASL authentication error" in refused and "invalid credentials" in refused, refused
    assert "not-alices-password" not in refused
    unknown = confluent_auth_error(address, "bob", PASSWORDS["alice"])
    assert "SASL authentication error" in unknown, unknown
    # kafka-python keeps retrying until its bootstrap times out, logging the broker's reason
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaError):
        KafkaAdminClient(
            bootstrap_servers=address, **scram_settings("kafka-python", "bob", "wrong-password")
        )
    reasons = [r.getMessage() for r in caplog.records if r.name.startswith("kafka")]
    assert any("invalid credentials" in reason for reason in reasons), reasons


def secured(start_broker: StartBroker, tmp_path: Path) -> BrokerProcess:
    return start_secured(start_broker, RootSpec(str(tmp_path / "root")), tmp_path)


def upsertion(name: str, mechanism: int = 1, iterations: int = 4096) -> ScramCredentialUpsertion:
    return ScramCredentialUpsertion(
        name=name,
        mechanism=i8(mechanism),
        iterations=i32(iterations),
        salt=os.urandom(16),
        salted_password=os.urandom(32),
    )


def test_bad_alterations_get_kafkas_codes_and_store_nothing(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    broker = secured(start_broker, tmp_path)
    address = broker.kafka or ""
    storage = RootSpec(str(tmp_path / "root")).open()
    admin = sasl_connection(address, "User:admin")
    before = data_snapshot(storage)
    answer = admin.request(
        ALTER_SCRAM,
        0,
        AlterUserScramCredentialsRequest(
            deletions=(ScramCredentialDeletion(name="nobody", mechanism=i8(1)),),
            upsertions=(
                upsertion("few", iterations=1000),
                upsertion("many", iterations=20000),
                upsertion("odd", mechanism=9),
                upsertion(""),
            ),
        ),
    )
    assert {r.user: (int(r.error_code), r.error_message) for r in answer.results} == {
        "nobody": (
            RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ),
        "few": (UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "odd": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism (type 9)"),
        "": (UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
    }
    assert data_snapshot(storage) == before
    described = admin.request(
        DESCRIBE_SCRAM, 0, DescribeUserScramCredentialsRequest(users=(UserName(name="few"),))
    )
    assert [(r.user, int(r.error_code)) for r in described.results] == [("few", RESOURCE_NOT_FOUND)]
    # a principal without CLUSTER ALTER / DESCRIBE
    bob = sasl_connection(address, "User:bob")
    answer = bob.request(
        ALTER_SCRAM,
        0,
        AlterUserScramCredentialsRequest(deletions=(), upsertions=(upsertion("bob"),)),
    )
    assert [int(r.error_code) for r in answer.results] == [CLUSTER_AUTHORIZATION_FAILED]
    described = bob.request(DESCRIBE_SCRAM, 0, DescribeUserScramCredentialsRequest(users=None))
    assert int(described.error_code) == CLUSTER_AUTHORIZATION_FAILED
    assert data_snapshot(storage) == before
    for conn in (admin, bob):
        conn.close()
