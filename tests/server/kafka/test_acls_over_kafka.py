"""CreateAcls, DescribeAcls and DeleteAcls on real brokers, through unmodified admin clients.

An ACL created over Kafka is the one store's binding: it is listed over Kafka
and HTTP, and refuses or allows Kafka and HTTP requests alike; once deleted it
no longer applies. Bad creations and filters get Kafka's error codes per entry
and store nothing; a principal without CLUSTER ALTER/DESCRIBE is refused; a
broker with authentication off answers SECURITY_DISABLED, as Kafka without an
authorizer does. (aiokafka's admin client has no ACL calls.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.describe_acls.v1.request import DescribeAclsRequest
from kio.static.primitive import i8

from lakelog.testing.brokers import free_port
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import Message, kafka_client
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.sasl import client_settings, sasl_connection
from tests.server.security.helpers import (
    ADMIN,
    StartBroker,
    call,
    create_topic,
    data_snapshot,
    key,
    start_secured,
)

pytestmark = pytest.mark.integration

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 31
INVALID_REQUEST, SECURITY_DISABLED = 42, 54
ADMIN_CLIENTS = ("confluent", "kafka-python")


class Admin:
    """create / describe / delete ACLs through one admin client library, as its users call it.

    Bindings are ``(resource_type, name, pattern_type, principal, operation, permission)``
    tuples of upper-case Kafka names; ``None`` in a filter is ANY.
    """

    def __init__(self, library: str, address: str, principal: str) -> None:
        self.library = library
        settings = client_settings(library, "PLAIN", principal)
        if library == "confluent":
            from confluent_kafka.admin import AdminClient

            self.client: Any = AdminClient({"bootstrap.servers": address, **settings})
        else:
            from kafka.admin import KafkaAdminClient

            self.client = KafkaAdminClient(bootstrap_servers=address, **settings)

    def close(self) -> None:
        if self.library == "kafka-python":
            self.client.close()

    def create(self, *bindings: tuple[str, ...]) -> None:
        if self.library == "confluent":
            from confluent_kafka.admin import (  # type: ignore[attr-defined]
                AclBinding,
                AclOperation,
                AclPermissionType,
                ResourcePatternType,
                ResourceType,
            )

            made = [
                AclBinding(
                    ResourceType[rtype],
                    name,
                    ResourcePatternType[ptype],
                    principal,
                    "*",
                    AclOperation[op],
                    AclPermissionType[perm],
                )
                for rtype, name, ptype, principal, op, perm in bindings
            ]
            for future in self.client.create_acls(made, request_timeout=60).values():
                assert future.result(60) is None
            return
        from kafka.admin import (
            ACL,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            ResourcePattern,
        )
        from kafka.admin import ResourceType as KafkaPythonResourceType

        acls = [
            ACL(
                principal,
                "*",
                ACLOperation[op],
                ACLPermissionType[perm],
                ResourcePattern(
                    KafkaPythonResourceType[rtype], name, ACLResourcePatternType[ptype]
                ),
            )
            for rtype, name, ptype, principal, op, perm in bindings
        ]
        result = self.client.create_acls(acls)
        assert result["failed"] == [], result

    def _confluent_filter(self, wanted: tuple[str | None, ...]) -> Any:
        """librdkafka's filter; its stubs type every field as required, None is its ANY."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        rtype, name, ptype, principal, op, perm = wanted
        make: Any = AclBindingFilter
        return make(
            ResourceType[rtype or "ANY"],
            name,
            ResourcePatternType[ptype or "ANY"],
            principal,
            None,
            AclOperation[op or "ANY"],
            AclPermissionType[perm or "ANY"],
        )

    def _kafka_python_filter(self, wanted: tuple[str | None, ...]) -> Any:
        from kafka.admin import (
            ACLFilter,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            ResourcePatternFilter,
            ResourceType,
        )

        rtype, name, ptype, principal, op, perm = wanted
        return ACLFilter(
            principal,
            None,
            ACLOperation[op or "ANY"],
            ACLPermissionType[perm or "ANY"],
            ResourcePatternFilter(
                ResourceType[rtype or "ANY"], name, ACLResourcePatternType[ptype or "ANY"]
            ),
        )

    def describe(self, *wanted: str | None) -> set[tuple[str, ...]]:
        if self.library == "confluent":
            found = self.client.describe_acls(self._confluent_filter(wanted)).result(60)
            return {_confluent_tuple(b) for b in found}
        acls, _ = self.client.describe_acls(self._kafka_python_filter(wanted))
        return {_kafka_python_tuple(a) for a in acls}

    def delete(self, *wanted: str | None) -> set[tuple[str, ...]]:
        if self.library == "confluent":
            futures = self.client.delete_acls([self._confluent_filter(wanted)], request_timeout=60)
            (future,) = futures.values()
            return {_confluent_tuple(b) for b in future.result(60)}
        ((_, matched, error),) = self.client.delete_acls([self._kafka_python_filter(wanted)])
        assert error.errno == 0, error
        return {_kafka_python_tuple(a) for a in matched}


def _confluent_tuple(b: Any) -> tuple[str, ...]:
    return (
        b.restype.name,
        b.name,
        b.resource_pattern_type.name,
        b.principal,
        b.operation.name,
        b.permission_type.name,
    )


def _kafka_python_tuple(a: Any) -> tuple[str, ...]:
    pattern = a.resource_pattern
    return (
        pattern.resource_type.name,
        pattern.resource_name,
        pattern.pattern_type.name,
        a.principal,
        a.operation.name,
        a.permission_type.name,
    )


def produce_error(address: str, principal: str, topic: str) -> str:
    """The string ok, or the Kafka error a confluent-kafka producer's delivery failed with."""
    try:
        kafka_client("confluent").produce(
            address,
            topic,
            [Message(b"k", b"v")],
            **{**client_settings("confluent", "PLAIN", principal), "message.timeout.ms": 20_000},
        )
    except AssertionError as exc:
        return (
            "TOPIC_AUTHORIZATION_FAILED" if "TOPIC_AUTHORIZATION_FAILED" in str(exc) else str(exc)
        )
    return "ok"


def http_produce_status(broker: BrokerProcess, principal: str, topic: str) -> int:
    body = {"records": [{"value": "over-http"}]}
    return call(
        broker, "POST", f"/v1/topics/{topic}/records", key(principal), json=body
    ).status_code


@pytest.mark.parametrize("library", ADMIN_CLIENTS)
def test_an_acl_created_over_kafka_is_listed_enforced_and_deleted(
    library: str,
    make_root: Callable[[], RootSpec],
    start_broker: StartBroker,
    tmp_path: Path,
) -> None:
    broker = start_secured(start_broker, make_root(), tmp_path)
    address = broker.kafka or ""
    create_topic(broker, "ledger")
    admin = Admin(library, address, "User:admin")
    allow_write = ("TOPIC", "ledger", "LITERAL", "User:alice", "WRITE", "ALLOW")
    allow_read = ("TOPIC", "ledger", "PREFIXED", "User:alice", "READ", "ALLOW")
    read_group = ("GROUP", "unused-assign-only", "LITERAL", "User:alice", "READ", "ALLOW")
    # with no ACL on the topic alice may not produce, over Kafka or HTTP
    assert produce_error(address, "User:alice", "ledger") == "TOPIC_AUTHORIZATION_FAILED"
    assert http_produce_status(broker, "User:alice", "ledger") == 403

    admin.create(allow_write, allow_read, read_group)
    assert admin.describe(None, None, None, None, None, None) == {
        allow_write,
        allow_read,
        read_group,
    }
    # MATCH: the literal name and the prefixes covering it; a type narrows it
    assert admin.describe("TOPIC", "ledger", "MATCH", None, None, None) == {
        allow_write,
        allow_read,
    }
    assert admin.describe(None, None, None, "User:alice", "READ", None) == {allow_read, read_group}
    # the same store over HTTP
    listed = call(broker, "GET", "/v1/acls", ADMIN, params={"principal": "User:alice"}).json()
    assert len(listed["acls"]) == 3
    # the ACLs take effect: alice produces and consumes over Kafka, and produces over HTTP
    assert produce_error(address, "User:alice", "ledger") == "ok"
    assert http_produce_status(broker, "User:alice", "ledger") == 200
    got = kafka_client("confluent").consume(
        address, "ledger", [0], 2, 60, **client_settings("confluent", "PLAIN", "User:alice")
    )
    assert sorted(m.value or b"" for m in got) == [b"over-http", b"v"]

    # a DENY wins over the ALLOW for Kafka and HTTP requests
    deny_write = ("TOPIC", "ledger", "LITERAL", "User:alice", "WRITE", "DENY")
    admin.create(deny_write)
    assert produce_error(address, "User:alice", "ledger") == "TOPIC_AUTHORIZATION_FAILED"
    assert http_produce_status(broker, "User:alice", "ledger") == 403
    assert admin.delete("TOPIC", "ledger", "LITERAL", "User:alice", "WRITE", "DENY") == {deny_write}
    assert produce_error(address, "User:alice", "ledger") == "ok"

    # deleting the ALLOW: it no longer applies, nor is it listed anywhere
    assert admin.delete("TOPIC", None, "ANY", "User:alice", "WRITE", None) == {allow_write}
    assert produce_error(address, "User:alice", "ledger") == "TOPIC_AUTHORIZATION_FAILED"
    assert http_produce_status(broker, "User:alice", "ledger") == 403
    assert admin.describe(None, None, None, None, None, None) == {allow_read, read_group}
    listed = call(broker, "GET", "/v1/acls", ADMIN, params={"principal": "User:alice"}).json()
    assert len(listed["acls"]) == 2
    admin.close()


def creation(**changes: Any) -> AclCreation:
    fields: dict[str, Any] = {
        "resource_type": i8(2),
        "resource_name": "ledger",
        "resource_pattern_type": i8(3),
        "principal": "User:bob",
        "host": "*",
        "operation": i8(3),
        "permission_type": i8(3),
    }
    fields.update({k: i8(v) if isinstance(v, int) else v for k, v in changes.items()})
    return AclCreation(**fields)


def delete_filter(**changes: Any) -> DeleteAclsFilter:
    fields: dict[str, Any] = {
        "resource_type_filter": i8(1),
        "resource_name_filter": None,
        "pattern_type_filter": i8(1),
        "principal_filter": None,
        "host_filter": None,
        "operation": i8(1),
        "permission_type": i8(1),
    }
    fields.update({k: i8(v) if isinstance(v, int) else v for k, v in changes.items()})
    return DeleteAclsFilter(**fields)


def describe_all() -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=i8(1),
        resource_name_filter=None,
        pattern_type_filter=i8(1),
        principal_filter=None,
        host_filter=None,
        operation=i8(1),
        permission_type=i8(1),
    )


def test_bad_acls_and_unauthorized_principals_get_kafkas_codes_and_store_nothing(
    make_root: Callable[[], RootSpec], start_broker: StartBroker, tmp_path: Path
) -> None:
    root = make_root()
    broker = start_secured(start_broker, root, tmp_path)
    address = broker.kafka or ""
    storage = root.open()
    admin = sasl_connection(address, "User:admin")
    bad = [
        (creation(resource_type=99), "Invalid resourceType UNKNOWN (99)"),
        (creation(resource_pattern_type=1), "Invalid patternType ANY (1)"),
        (creation(principal="bob"), "invalid principal 'bob'"),
        (creation(resource_type=4, resource_name="ledger"), "only valid name for the CLUSTER"),
        (creation(resource_type=7, resource_name="bob"), "USER (7)"),
        (creation(operation=1), "Invalid operation ANY (1)"),
    ]
    before = data_snapshot(storage)
    answer = admin.request(CREATE_ACLS, 3, CreateAclsRequest(creations=tuple(c for c, _ in bad)))
    for result, (_, named) in zip(answer.results, bad, strict=True):
        assert int(result.error_code) == INVALID_REQUEST
        assert named in (result.error_message or "")
    assert data_snapshot(storage) == before
    described = admin.request(DESCRIBE_ACLS, 1, describe_all())
    assert (int(described.error_code), described.resources) == (0, ())
    # one good entry among bad ones: it alone is stored
    answer = admin.request(
        CREATE_ACLS, 3, CreateAclsRequest(creations=(creation(), creation(resource_type=99)))
    )
    assert [int(r.error_code) for r in answer.results] == [0, INVALID_REQUEST]
    listed = call(broker, "GET", "/v1/acls", ADMIN).json()["acls"]
    assert [(a["principal"], a["operation"]) for a in listed] == [("User:bob", "READ")]
    # a filter with a code Kafka does not define deletes nothing
    answer = admin.request(
        DELETE_ACLS, 3, DeleteAclsRequest(filters=(delete_filter(resource_type_filter=0),))
    )
    assert int(answer.filter_results[0].error_code) == INVALID_REQUEST
    assert len(call(broker, "GET", "/v1/acls", ADMIN).json()["acls"]) == 1

    # bob has no CLUSTER ACL: every entry of each request is refused, nothing changes
    bob = sasl_connection(address, "User:bob")
    before = data_snapshot(storage)
    answer = bob.request(CREATE_ACLS, 3, CreateAclsRequest(creations=(creation(operation=4),)))
    assert [int(r.error_code) for r in answer.results] == [CLUSTER_AUTHORIZATION_FAILED]
    answer = bob.request(DELETE_ACLS, 3, DeleteAclsRequest(filters=(delete_filter(),)))
    assert [int(r.error_code) for r in answer.filter_results] == [CLUSTER_AUTHORIZATION_FAILED]
    described = bob.request(DESCRIBE_ACLS, 1, describe_all())
    assert (int(described.error_code), described.resources) == (CLUSTER_AUTHORIZATION_FAILED, ())
    assert data_snapshot(storage) == before
    for conn in (admin, bob):
        conn.close()


def test_a_broker_without_authentication_answers_security_disabled(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    address = f"127.0.0.1:{free_port()}"
    root = RootSpec(str(tmp_path / "root"))
    start_broker(root, kafka_listeners=f"PLAINTEXT://{address}")
    # kafka-python raises the answer's error; librdkafka's describe_acls reports an empty list
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KafkaPythonResourceType
    from kafka.errors import SecurityDisabledError

    everything = ACLFilter(
        None,
        None,
        ACLOperation.ANY,
        ACLPermissionType.ANY,
        ResourcePatternFilter(KafkaPythonResourceType.ANY, None, ACLResourcePatternType.ANY),
    )
    kafka_python = KafkaAdminClient(bootstrap_servers=address)
    with pytest.raises(SecurityDisabledError, match="No Authorizer is configured"):
        kafka_python.describe_acls(everything)
    kafka_python.close()
    before = data_snapshot(root.open())
    made = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:bob",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    admin = AdminClient({"bootstrap.servers": address})
    (future,) = admin.create_acls([made], request_timeout=60).values()
    with pytest.raises(KafkaException) as created:
        future.result(60)
    assert created.value.args[0].name() == "SECURITY_DISABLED"
    conn = RawConnection(address)
    answer = conn.request(DELETE_ACLS, 3, DeleteAclsRequest(filters=(delete_filter(),)))
    assert [int(r.error_code) for r in answer.filter_results] == [SECURITY_DISABLED]
    conn.close()
    assert data_snapshot(root.open()) == before
