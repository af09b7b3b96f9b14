"""Kafka-style access control lists: bindings, filters and the authorization decision (pure).

The decision follows Kafka's ``AclAuthorizer``/``StandardAuthorizer``:

* super users may do everything;
* a matching DENY (its operation or ``ALL``) wins over any ALLOW;
* an ALLOW matches its operation and ``ALL``; ``DESCRIBE`` is implied by
  ``READ``, ``WRITE``, ``DELETE`` and ``ALTER``, ``DESCRIBE_CONFIGS`` by ``ALTER_CONFIGS``;
* with no binding on the resource, ``allow_if_no_acls`` decides
  (``allow.everyone.if.no.acl.found``, false by default).

Patterns are LITERAL (the name, or ``*``) or PREFIXED. Storage and caching live in
``lakelog.security.stored_config``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from lakelog.errors import InvalidRequestError

WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"
ANONYMOUS = "User:ANONYMOUS"


class ResourceType(enum.StrEnum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    #: A Schema Registry subject, as Confluent's Schema Registry authorizer names it.
    SUBJECT = "SUBJECT"


class PatternType(enum.StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(enum.StrEnum):
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    #: Kafka's IdempotentWrite on the cluster: an idempotent producer's InitProducerId.
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"
    #: Kafka's ClusterAction: broker-to-broker requests (a commit handoff).
    CLUSTER_ACTION = "CLUSTER_ACTION"


class Permission(enum.StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"


#: Operations whose ALLOW also allows DESCRIBE on the same resource (Kafka's rule).
IMPLIES_DESCRIBE = frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER})


E = TypeVar("E", bound=enum.StrEnum)


def _enum_value(kind: type[E], value: object, what: str) -> E:
    """``value`` as a member of ``kind``, case-insensitive (``Read`` is ``READ``)."""
    text = str(value).strip().upper().replace("-", "_")
    try:
        return kind(text)
    except ValueError:
        choices = ", ".join(m.value for m in kind)
        raise InvalidRequestError(f"invalid {what} {value!r}; expected one of {choices}") from None


def parse_resource_type(value: object) -> ResourceType:
    return _enum_value(ResourceType, value, "resource type")


def parse_pattern_type(value: object) -> PatternType:
    return _enum_value(PatternType, value, "pattern type")


def parse_operation(value: object) -> Operation:
    return _enum_value(Operation, value, "operation")


def parse_permission(value: object) -> Permission:
    return _enum_value(Permission, value, "permission type")


def validate_principal(principal: str) -> str:
    """Kafka's ``Type:name`` form (``User:alice``, ``User:*``); anything else is refused."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name or any(c.isspace() for c in principal):
        raise InvalidRequestError(
            f"invalid principal {principal!r}: use Kafka's Type:name form, e.g. User:alice"
        )
    return principal


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidRequestError("a resource pattern needs a name ('*' for every name)")
        if self.pattern_type is PatternType.PREFIXED and self.name == WILDCARD:
            raise InvalidRequestError("a PREFIXED pattern cannot be '*'; use LITERAL '*'")

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern covers the resource ``(resource_type, name)``."""
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (WILDCARD, name)


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    principal: str
    operation: Operation
    permission: Permission
    host: str = WILDCARD

    def __post_init__(self) -> None:
        validate_principal(self.principal)
        if not self.host:
            raise InvalidRequestError("an ACL's host must be an address or '*'")

    def applies_to(self, principal: str, host: str) -> bool:
        """Whether the binding's principal and host cover the requester."""
        principal_ok = self.principal == principal or (
            self.principal.endswith(":" + WILDCARD)
            and principal.partition(":")[0] == self.principal.partition(":")[0]
        )
        return principal_ok and self.host in (WILDCARD, host)

    def to_json(self) -> dict[str, str]:
        return {
            "resource_type": self.pattern.resource_type.value,
            "resource_name": self.pattern.name,
            "pattern_type": self.pattern.pattern_type.value,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.value,
            "permission": self.permission.value,
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> AclBinding:
        """A binding from its JSON form; names the missing or invalid field."""
        try:
            return cls(
                pattern=ResourcePattern(
                    parse_resource_type(body["resource_type"]),
                    str(body["resource_name"]),
                    parse_pattern_type(body.get("pattern_type", PatternType.LITERAL)),
                ),
                principal=validate_principal(str(body["principal"])),
                operation=parse_operation(body["operation"]),
                permission=parse_permission(body.get("permission", Permission.ALLOW)),
                host=str(body.get("host", WILDCARD)),
            )
        except KeyError as exc:
            raise InvalidRequestError(f"an ACL binding needs the field {exc.args[0]!r}") from None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Selects bindings for list/delete; ``None`` fields match anything (Kafka's ANY).

    A ``resource_name`` matches bindings with exactly that pattern name, as Kafka's
    filters do, not every pattern that would cover it.
    """

    resource_type: ResourceType | None = None
    resource_name: str | None = None
    pattern_type: PatternType | None = None
    principal: str | None = None
    host: str | None = None
    operation: Operation | None = None
    permission: Permission | None = None

    def matches(self, binding: AclBinding) -> bool:
        pattern = binding.pattern
        checks: tuple[tuple[object, object], ...] = (
            (self.resource_type, pattern.resource_type),
            (self.resource_name, pattern.name),
            (self.pattern_type, pattern.pattern_type),
            (self.principal, binding.principal),
            (self.host, binding.host),
            (self.operation, binding.operation),
            (self.permission, binding.permission),
        )
        return all(wanted is None or wanted == actual for wanted, actual in checks)


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one authorization check, with the reason (for the audit log)."""

    allowed: bool
    reason: str


def _allow_covers(binding_op: Operation, requested: Operation) -> bool:
    if binding_op in (Operation.ALL, requested):
        return True
    if requested is Operation.DESCRIBE_CONFIGS:
        return binding_op is Operation.ALTER_CONFIGS
    return requested is Operation.DESCRIBE and binding_op in IMPLIES_DESCRIBE


def authorize(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: Operation,
    resource_type: ResourceType,
    name: str,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acls: bool = False,
) -> Decision:
    """Whether ``principal`` from ``host`` may do ``operation`` on ``(resource_type, name)``."""
    if operation is Operation.ALL:
        raise InvalidRequestError("ALL is not an operation a request performs")
    if principal in super_users:
        return Decision(True, "super user")
    on_resource = [b for b in bindings if b.pattern.matches(resource_type, name)]
    if not on_resource:
        if allow_if_no_acls:
            return Decision(True, "no ACLs on the resource and allow_if_no_acls is set")
        return Decision(False, "no ACL on the resource")
    mine = [b for b in on_resource if b.applies_to(principal, host)]
    for binding in mine:
        if binding.permission is Permission.DENY and binding.operation in (
            Operation.ALL,
            operation,
        ):
            return Decision(False, f"denied by {_describe(binding)}")
    for binding in mine:
        if binding.permission is Permission.ALLOW and _allow_covers(binding.operation, operation):
            return Decision(True, f"allowed by {_describe(binding)}")
    return Decision(False, "no ALLOW ACL matches")


def _describe(binding: AclBinding) -> str:
    p = binding.pattern
    return (
        f"{binding.permission.value} {binding.principal} {binding.operation.value} "
        f"{p.resource_type.value}:{p.pattern_type.value}:{p.name} from {binding.host}"
    )


def encode_bindings(bindings: Iterable[AclBinding]) -> list[dict[str, str]]:
    """Bindings as JSON objects, sorted so equal sets encode equally."""
    return [b.to_json() for b in sorted(set(bindings))]


def decode_bindings(items: Iterable[Mapping[str, Any]]) -> frozenset[AclBinding]:
    return frozenset(AclBinding.from_json(item) for item in items)


def parse_super_users(value: str) -> frozenset[str]:
    """Kafka's ``super.users`` list: principals separated by ``;`` (``,`` also accepted)."""
    names = [p.strip() for p in value.replace(",", ";").split(";") if p.strip()]
    return frozenset(validate_principal(n) for n in names)
