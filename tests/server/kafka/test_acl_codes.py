"""Kafka's ACL codes mapped onto lakelog's ACL model and back, and Kafka's filter matching."""

from __future__ import annotations

from typing import Any

import pytest

from lakelog.errors import InvalidRequestError
from lakelog.security.acl import (
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from server.kafka.acl_codes import (
    KafkaAclFilter,
    binding_of,
    described_resources,
    kafka_fields,
)

TOPIC, GROUP, CLUSTER, USER = 2, 3, 4, 7
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, DESCRIBE, CREATE_TOKENS = 2, 3, 4, 8, 13
DENY, ALLOW = 2, 3


def creation(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "resource_type": TOPIC,
        "resource_name": "orders",
        "pattern_type": LITERAL,
        "principal": "User:alice",
        "host": "*",
        "operation": WRITE,
        "permission": ALLOW,
    }
    fields.update(changes)
    return fields


def binding(
    name: str,
    pattern: PatternType = PatternType.LITERAL,
    rtype: ResourceType = ResourceType.TOPIC,
    operation: Operation = Operation.READ,
    principal: str = "User:alice",
) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), principal, operation, Permission.ALLOW)


def kafka_filter(**changes: Any) -> KafkaAclFilter:
    fields: dict[str, Any] = {
        "resource_type": ANY,
        "resource_name": None,
        "pattern_type": ANY,
        "principal": None,
        "host": None,
        "operation": ANY,
        "permission": ANY,
    }
    fields.update(changes)
    return KafkaAclFilter(**fields).check()


def test_a_creation_maps_to_the_binding_and_back_to_the_same_codes() -> None:
    made = binding_of(**creation(pattern_type=PREFIXED, permission=DENY))
    assert made == AclBinding(
        ResourcePattern(ResourceType.TOPIC, "orders", PatternType.PREFIXED),
        "User:alice",
        Operation.WRITE,
        Permission.DENY,
    )
    assert kafka_fields(made) == {
        "resource_type": TOPIC,
        "resource_name": "orders",
        "pattern_type": PREFIXED,
        "principal": "User:alice",
        "host": "*",
        "operation": WRITE,
        "permission_type": DENY,
    }
    cluster = binding_of(**creation(resource_type=CLUSTER, resource_name="kafka-cluster"))
    assert cluster.pattern.resource_type is ResourceType.CLUSTER


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"resource_type": 99}, "Invalid resourceType UNKNOWN (99)"),
        ({"resource_type": ANY}, "Invalid resourceType ANY (1)"),
        ({"pattern_type": ANY}, "Invalid patternType ANY (1)"),
        ({"pattern_type": MATCH}, "Invalid patternType MATCH (2)"),
        ({"operation": ANY}, "Invalid operation ANY (1)"),
        ({"operation": 0}, "Invalid operation UNKNOWN (0)"),
        ({"permission": ANY}, "Invalid permissionType ANY (1)"),
        ({"resource_name": ""}, "Invalid empty resource name"),
        ({"resource_type": CLUSTER, "resource_name": "other"}, "only valid name for the CLUSTER"),
        ({"principal": "alice"}, "invalid principal 'alice'"),
        ({"resource_type": USER, "resource_name": "bob"}, "USER (7): lakelog's ACLs cover"),
        ({"operation": CREATE_TOKENS}, "CREATE_TOKENS (13)"),
        ({"pattern_type": PREFIXED, "resource_name": "*"}, "PREFIXED pattern cannot be '*'"),
    ],
)
def test_a_creation_lakelog_or_kafka_refuses_names_the_field(
    changes: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidRequestError, match=named.replace("(", r"\(").replace(")", r"\)")):
        binding_of(**creation(**changes))


def test_match_selects_the_literal_name_the_wildcard_and_covering_prefixes() -> None:
    exact = binding("orders-eu")
    wildcard = binding("*")
    prefix = binding("orders-", PatternType.PREFIXED)
    other_prefix = binding("pay", PatternType.PREFIXED)
    other = binding("orders")
    group = binding("orders-eu", rtype=ResourceType.GROUP)
    everything = [exact, wildcard, prefix, other_prefix, other, group]

    def chosen(f: KafkaAclFilter) -> list[AclBinding]:
        return [b for b in everything if f.matches(b)]

    assert chosen(kafka_filter(resource_name="orders-eu", pattern_type=MATCH)) == [
        exact,
        wildcard,
        prefix,
        group,
    ]
    # ANY and a concrete pattern type compare the name exactly
    assert chosen(kafka_filter(resource_name="orders-eu")) == [exact, group]
    assert chosen(kafka_filter(resource_name="orders-", pattern_type=PREFIXED)) == [prefix]
    assert chosen(kafka_filter(resource_type=TOPIC, pattern_type=LITERAL)) == [
        exact,
        wildcard,
        other,
    ]
    assert chosen(kafka_filter(resource_type=GROUP)) == [group]
    assert chosen(kafka_filter(resource_type=USER)) == []


def test_entry_fields_filter_exactly_and_subject_bindings_stay_out_of_kafka() -> None:
    alice = binding("orders")
    bob_write = binding("orders", operation=Operation.WRITE, principal="User:bob")
    subject = binding("orders-value", rtype=ResourceType.SUBJECT)
    assert not kafka_filter().matches(subject)
    assert [b for b in (alice, bob_write) if kafka_filter(principal="User:bob").matches(b)] == [
        bob_write
    ]
    assert kafka_filter(operation=READ, permission=ALLOW, host="*").matches(alice)
    assert not kafka_filter(operation=READ, permission=DENY).matches(alice)
    assert not kafka_filter(operation=ALL).matches(alice)  # ALL is a value, not a wildcard
    assert not kafka_filter(host="10.0.0.1").matches(alice)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"resource_type": 0}, "resource type UNKNOWN (0)"),
        ({"pattern_type": 9}, "pattern type UNKNOWN (9)"),
        ({"operation": 0}, "operation UNKNOWN (0)"),
        ({"permission": 0}, "permission type UNKNOWN (0)"),
    ],
)
def test_a_filter_with_a_code_kafka_does_not_define_is_invalid(
    changes: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidRequestError, match=named.replace("(", r"\(").replace(")", r"\)")):
        kafka_filter(**changes)


def test_described_resources_group_bindings_by_pattern() -> None:
    read = binding("orders")
    write = binding("orders", operation=Operation.WRITE)
    prefix = binding("orders", PatternType.PREFIXED)
    assert described_resources([read, write, prefix]) == [
        {
            "resource_type": TOPIC,
            "resource_name": "orders",
            "pattern_type": LITERAL,
            "acls": [
                {"principal": "User:alice", "host": "*", "operation": READ, "permission_type": 3},
                {"principal": "User:alice", "host": "*", "operation": WRITE, "permission_type": 3},
            ],
        },
        {
            "resource_type": TOPIC,
            "resource_name": "orders",
            "pattern_type": PREFIXED,
            "acls": [
                {"principal": "User:alice", "host": "*", "operation": READ, "permission_type": 3}
            ],
        },
    ]
