"""The ACL decision (pure): Kafka's rules as properties over generated bindings and requests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog.errors import InvalidRequestError
from lakelog.security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    authorize,
    decode_bindings,
    encode_bindings,
    parse_operation,
    parse_super_users,
)

NAMES = st.sampled_from(["orders", "orders-eu", "ord", "payments", "pay", "x"])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:carol"])
REQUEST_OPS = st.sampled_from([op for op in Operation if op is not Operation.ALL])
TYPES = st.sampled_from(list(ResourceType))


@st.composite
def patterns(draw: st.DrawFn) -> ResourcePattern:
    kind = draw(st.sampled_from(list(PatternType)))
    name = "*" if kind is PatternType.LITERAL and draw(st.booleans()) else draw(NAMES)
    return ResourcePattern(draw(TYPES), name, kind)


@st.composite
def bindings(draw: st.DrawFn) -> AclBinding:
    principal = draw(st.one_of(PRINCIPALS, st.just("User:*")))
    return AclBinding(
        draw(patterns()),
        principal,
        draw(st.sampled_from(list(Operation))),
        draw(st.sampled_from(list(Permission))),
        draw(st.sampled_from(["*", "10.0.0.1"])),
    )


ACL_SETS = st.lists(bindings(), max_size=12)


def check(
    acls: list[AclBinding],
    principal: str,
    op: Operation,
    rtype: ResourceType,
    name: str,
    host: str = "10.0.0.1",
    **kw: object,
) -> bool:
    return authorize(acls, principal, host, op, rtype, name, **kw).allowed  # type: ignore[arg-type]


@given(ACL_SETS, bindings(), PRINCIPALS, REQUEST_OPS, TYPES, NAMES)
def test_adding_a_deny_never_allows_more(
    acls: list[AclBinding],
    extra: AclBinding,
    principal: str,
    op: Operation,
    rtype: ResourceType,
    name: str,
) -> None:
    deny = AclBinding(extra.pattern, extra.principal, extra.operation, Permission.DENY)
    if check([*acls, deny], principal, op, rtype, name):
        assert check(acls, principal, op, rtype, name)


@given(ACL_SETS, bindings(), PRINCIPALS, REQUEST_OPS, TYPES, NAMES)
def test_adding_an_allow_never_denies_more(
    acls: list[AclBinding],
    extra: AclBinding,
    principal: str,
    op: Operation,
    rtype: ResourceType,
    name: str,
) -> None:
    allow = AclBinding(extra.pattern, extra.principal, extra.operation, Permission.ALLOW)
    if check(acls, principal, op, rtype, name):
        assert check([*acls, allow], principal, op, rtype, name)


@given(ACL_SETS, PRINCIPALS, REQUEST_OPS, TYPES, NAMES)
def test_deny_all_for_the_principal_beats_every_allow(
    acls: list[AclBinding], principal: str, op: Operation, rtype: ResourceType, name: str
) -> None:
    deny = AclBinding(ResourcePattern(rtype, "*"), principal, Operation.ALL, Permission.DENY)
    allow = AclBinding(ResourcePattern(rtype, name), principal, op, Permission.ALLOW)
    assert not check([*acls, allow, deny], principal, op, rtype, name)


@given(ACL_SETS, PRINCIPALS, REQUEST_OPS, TYPES, NAMES)
def test_super_users_bypass_every_acl(
    acls: list[AclBinding], principal: str, op: Operation, rtype: ResourceType, name: str
) -> None:
    deny = AclBinding(ResourcePattern(rtype, "*"), principal, Operation.ALL, Permission.DENY)
    assert check([*acls, deny], principal, op, rtype, name, super_users=frozenset({principal}))


@given(ACL_SETS, PRINCIPALS, REQUEST_OPS, TYPES, NAMES)
def test_a_decision_only_depends_on_bindings_of_the_principal_or_wildcard(
    acls: list[AclBinding], principal: str, op: Operation, rtype: ResourceType, name: str
) -> None:
    # Bindings of *other* principals only matter through "is there any ACL on the resource".
    anchor = AclBinding(ResourcePattern(rtype, name), "User:zed", Operation.READ, Permission.DENY)
    mine = [b for b in acls if b.principal in (principal, "User:*")]
    assert check([*acls, anchor], principal, op, rtype, name) == check(
        [*mine, anchor], principal, op, rtype, name
    )


@pytest.mark.parametrize(
    "granted", [Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER]
)
def test_read_write_delete_alter_imply_describe(granted: Operation) -> None:
    acl = AclBinding(ResourcePattern(ResourceType.TOPIC, "t"), "User:a", granted, Permission.ALLOW)
    assert check([acl], "User:a", Operation.DESCRIBE, ResourceType.TOPIC, "t")
    assert check([acl], "User:a", granted, ResourceType.TOPIC, "t")
    others = {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER} - {granted}
    for op in others | {Operation.CREATE}:
        assert not check([acl], "User:a", op, ResourceType.TOPIC, "t")


def test_describe_and_create_imply_nothing_else_and_deny_read_keeps_describe() -> None:
    p = ResourcePattern(ResourceType.TOPIC, "t")
    describe = AclBinding(p, "User:a", Operation.DESCRIBE, Permission.ALLOW)
    assert not check([describe], "User:a", Operation.READ, ResourceType.TOPIC, "t")
    acls = [
        AclBinding(p, "User:a", Operation.ALL, Permission.ALLOW),
        AclBinding(p, "User:a", Operation.READ, Permission.DENY),
    ]
    assert not check(acls, "User:a", Operation.READ, ResourceType.TOPIC, "t")
    assert check(acls, "User:a", Operation.DESCRIBE, ResourceType.TOPIC, "t")
    assert check(acls, "User:a", Operation.WRITE, ResourceType.TOPIC, "t")


def test_prefixed_and_literal_patterns() -> None:
    prefixed = AclBinding(
        ResourcePattern(ResourceType.TOPIC, "orders", PatternType.PREFIXED),
        "User:a",
        Operation.READ,
        Permission.ALLOW,
    )
    literal = AclBinding(
        ResourcePattern(ResourceType.TOPIC, "pay"), "User:a", Operation.READ, Permission.ALLOW
    )
    acls = [prefixed, literal]
    assert check(acls, "User:a", Operation.READ, ResourceType.TOPIC, "orders")
    assert check(acls, "User:a", Operation.READ, ResourceType.TOPIC, "orders-eu")
    assert not check(acls, "User:a", Operation.READ, ResourceType.TOPIC, "order")
    assert check(acls, "User:a", Operation.READ, ResourceType.TOPIC, "pay")
    assert not check(acls, "User:a", Operation.READ, ResourceType.TOPIC, "payments")
    assert not check(acls, "User:a", Operation.READ, ResourceType.GROUP, "orders")


def test_literal_wildcard_and_wildcard_principal_and_host() -> None:
    acl = AclBinding(
        ResourcePattern(ResourceType.GROUP, "*"), "User:*", Operation.READ, Permission.ALLOW
    )
    assert check([acl], "User:anyone", Operation.READ, ResourceType.GROUP, "g1")
    from_host = AclBinding(
        ResourcePattern(ResourceType.GROUP, "g"),
        "User:a",
        Operation.READ,
        Permission.ALLOW,
        "1.2.3.4",
    )
    assert check([from_host], "User:a", Operation.READ, ResourceType.GROUP, "g", host="1.2.3.4")
    assert not check([from_host], "User:a", Operation.READ, ResourceType.GROUP, "g", host="5.6.7.8")


def test_no_acl_on_the_resource_follows_allow_if_no_acls() -> None:
    other = AclBinding(
        ResourcePattern(ResourceType.TOPIC, "other"), "User:b", Operation.READ, Permission.ALLOW
    )
    assert not check([other], "User:a", Operation.READ, ResourceType.TOPIC, "t")
    assert check([other], "User:a", Operation.READ, ResourceType.TOPIC, "t", allow_if_no_acls=True)
    # an ACL for someone else on the same resource means it is protected
    mine = AclBinding(
        ResourcePattern(ResourceType.TOPIC, "t"), "User:b", Operation.READ, Permission.ALLOW
    )
    assert not check(
        [mine], "User:a", Operation.READ, ResourceType.TOPIC, "t", allow_if_no_acls=True
    )


@given(st.lists(bindings(), max_size=8))
def test_json_round_trip(acls: list[AclBinding]) -> None:
    assert decode_bindings(encode_bindings(acls)) == frozenset(acls)


def test_filters_match_like_kafka_filters() -> None:
    acl = AclBinding(
        ResourcePattern(ResourceType.TOPIC, "o", PatternType.PREFIXED),
        "User:a",
        Operation.READ,
        Permission.ALLOW,
    )
    assert AclFilter().matches(acl)
    assert AclFilter(resource_type=ResourceType.TOPIC, resource_name="o").matches(acl)
    assert not AclFilter(resource_name="orders").matches(acl)
    assert not AclFilter(pattern_type=PatternType.LITERAL).matches(acl)
    assert AclFilter(principal="User:a", operation=Operation.READ).matches(acl)


def test_bad_input_is_named() -> None:
    with pytest.raises(InvalidRequestError, match="operation"):
        parse_operation("fly")
    assert parse_operation("Read") is Operation.READ
    with pytest.raises(InvalidRequestError, match="principal"):
        AclBinding(
            ResourcePattern(ResourceType.TOPIC, "t"), "alice", Operation.READ, Permission.ALLOW
        )
    with pytest.raises(InvalidRequestError, match="PREFIXED"):
        ResourcePattern(ResourceType.TOPIC, "*", PatternType.PREFIXED)
    with pytest.raises(InvalidRequestError, match="resource_type"):
        AclBinding.from_json({"resource_name": "t", "principal": "User:a", "operation": "READ"})
    with pytest.raises(InvalidRequestError, match="ALL"):
        authorize([], "User:a", "*", Operation.ALL, ResourceType.TOPIC, "t")
    assert parse_super_users("User:a; User:b,User:c") == {"User:a", "User:b", "User:c"}
    with pytest.raises(InvalidRequestError):
        parse_super_users("admin")
