"""Kafka's ACL codes and lakelog's ACL model, both ways. Pure.

CreateAcls, DescribeAcls and DeleteAcls carry resource types, pattern types,
operations and permissions as Kafka's int8 codes. A creation becomes an
``AclBinding`` or an INVALID_REQUEST naming what is wrong (Kafka's
``AclControlManager.validateNewAcl`` and ``AclApis`` rules, then what lakelog's
model cannot hold); a filter selects bindings with Kafka's ``AclBindingFilter``
semantics, MATCH included. Bindings Kafka has no code for (``SUBJECT``, the
Schema Registry's) are neither listed nor deleted through the Kafka APIs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakelog.errors import InvalidRequestError, LakelogError
from lakelog.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    validate_principal,
)

#: Kafka's ``ANY`` in every filter enum, and ``UNKNOWN`` (any code Kafka does not define).
UNKNOWN, ANY = 0, 1
#: Kafka's pattern type MATCH (filters only): literal name, ``*`` and covering prefixes.
MATCH = 2

RESOURCE_TYPES: dict[int, ResourceType] = {
    2: ResourceType.TOPIC,
    3: ResourceType.GROUP,
    4: ResourceType.CLUSTER,
}
#: Kafka resource types lakelog has no resources of (no transactions, tokens or user ACLs).
KAFKA_ONLY_RESOURCE_TYPES = {5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER"}

PATTERN_TYPES: dict[int, PatternType] = {3: PatternType.LITERAL, 4: PatternType.PREFIXED}

OPERATIONS: dict[int, Operation] = {
    2: Operation.ALL,
    3: Operation.READ,
    4: Operation.WRITE,
    5: Operation.CREATE,
    6: Operation.DELETE,
    7: Operation.ALTER,
    8: Operation.DESCRIBE,
    9: Operation.CLUSTER_ACTION,
    10: Operation.DESCRIBE_CONFIGS,
    11: Operation.ALTER_CONFIGS,
    12: Operation.IDEMPOTENT_WRITE,
}
#: Kafka operations on resources lakelog does not have (delegation tokens, 2PC transactions).
KAFKA_ONLY_OPERATIONS = {13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT"}

PERMISSIONS: dict[int, Permission] = {2: Permission.DENY, 3: Permission.ALLOW}


def _codes_of(table: dict[int, Any]) -> dict[Any, int]:
    return {value: code for code, value in table.items()}


RESOURCE_TYPE_CODES = _codes_of(RESOURCE_TYPES)
PATTERN_TYPE_CODES = _codes_of(PATTERN_TYPES)
OPERATION_CODES = _codes_of(OPERATIONS)
PERMISSION_CODES = _codes_of(PERMISSIONS)


def _known_resource_type(code: int) -> bool:
    return code == ANY or code in RESOURCE_TYPES or code in KAFKA_ONLY_RESOURCE_TYPES


def _known_operation(code: int) -> bool:
    return code == ANY or code in OPERATIONS or code in KAFKA_ONLY_OPERATIONS


def binding_of(
    *,
    resource_type: int,
    resource_name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> AclBinding:
    """The binding one CreateAcls entry asks for; INVALID_REQUEST naming the field if none.

    Kafka's checks come first (type, pattern, operation, permission, name,
    the cluster's one name, the principal's ``Type:name`` form), then what
    lakelog's model cannot hold.
    """
    if not _known_resource_type(resource_type) or resource_type == ANY:
        raise InvalidRequestError(f"Invalid resourceType {_resource_type_name(resource_type)}")
    if pattern_type not in PATTERN_TYPES:
        raise InvalidRequestError(
            f"Invalid patternType {_pattern_type_name(pattern_type)}: an ACL is LITERAL (3) "
            "or PREFIXED (4)"
        )
    if not _known_operation(operation) or operation == ANY:
        raise InvalidRequestError(f"Invalid operation {_operation_name(operation)}")
    if permission not in PERMISSIONS:
        raise InvalidRequestError(
            f"Invalid permissionType {_permission_name(permission)}: ALLOW (3) or DENY (2)"
        )
    if not resource_name:
        raise InvalidRequestError("Invalid empty resource name")
    if resource_type == RESOURCE_TYPE_CODES[ResourceType.CLUSTER] and resource_name != CLUSTER_NAME:
        raise InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    validate_principal(principal)
    if resource_type in KAFKA_ONLY_RESOURCE_TYPES:
        raise InvalidRequestError(
            f"resource type {KAFKA_ONLY_RESOURCE_TYPES[resource_type]} ({resource_type}): "
            "lakelog's ACLs cover TOPIC, GROUP and CLUSTER only"
        )
    if operation in KAFKA_ONLY_OPERATIONS:
        raise InvalidRequestError(
            f"operation {KAFKA_ONLY_OPERATIONS[operation]} ({operation}): lakelog has no "
            "delegation tokens or two-phase-commit transactions to guard"
        )
    try:
        return AclBinding(
            pattern=ResourcePattern(
                RESOURCE_TYPES[resource_type], resource_name, PATTERN_TYPES[pattern_type]
            ),
            principal=principal,
            operation=OPERATIONS[operation],
            permission=PERMISSIONS[permission],
            host=host,
        )
    except LakelogError as exc:
        raise InvalidRequestError(exc.message) from None


@dataclass(frozen=True, slots=True)
class KafkaAclFilter:
    """A DescribeAcls or DeleteAcls filter with Kafka's ``AclBindingFilter`` matching.

    ANY (1) matches every value and a None name, principal or host any value;
    pattern type MATCH with a name selects the LITERAL binding of that name,
    the LITERAL ``*`` and every PREFIXED binding the name starts with.
    """

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    @classmethod
    def of(cls, entry: Any) -> KafkaAclFilter:
        """From a kio DescribeAclsRequest or DeleteAclsFilter (v1+: pattern_type_filter)."""
        return cls(
            resource_type=int(entry.resource_type_filter),
            resource_name=entry.resource_name_filter,
            pattern_type=int(entry.pattern_type_filter),
            principal=entry.principal_filter,
            host=entry.host_filter,
            operation=int(entry.operation),
            permission=int(entry.permission_type),
        )

    def check(self) -> KafkaAclFilter:
        """Itself, or INVALID_REQUEST for a code Kafka does not define (its ``UNKNOWN``)."""
        if not _known_resource_type(self.resource_type):
            raise InvalidRequestError(
                f"Unknown patternFilter: resource type {_resource_type_name(self.resource_type)}"
            )
        if self.pattern_type not in (ANY, MATCH, *PATTERN_TYPES):
            raise InvalidRequestError(
                f"Unknown patternFilter: pattern type {_pattern_type_name(self.pattern_type)}"
            )
        if not _known_operation(self.operation):
            raise InvalidRequestError(
                f"Unknown entryFilter: operation {_operation_name(self.operation)}"
            )
        if self.permission not in (ANY, *PERMISSIONS):
            raise InvalidRequestError(
                f"Unknown entryFilter: permission type {_permission_name(self.permission)}"
            )
        return self

    def matches(self, binding: AclBinding) -> bool:
        pattern = binding.pattern
        type_code = RESOURCE_TYPE_CODES.get(pattern.resource_type)
        if type_code is None:  # a SUBJECT binding: Kafka has no code for it
            return False
        if self.resource_type != ANY and self.resource_type != type_code:
            return False
        actual_pattern = PATTERN_TYPE_CODES[pattern.pattern_type]
        if self.pattern_type not in (ANY, MATCH) and self.pattern_type != actual_pattern:
            return False
        if self.resource_name is not None and not self._name_matches(pattern, actual_pattern):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation != ANY and self.operation != OPERATION_CODES[binding.operation]:
            return False
        return self.permission == ANY or self.permission == PERMISSION_CODES[binding.permission]

    def _name_matches(self, pattern: ResourcePattern, actual_pattern: int) -> bool:
        name = self.resource_name
        assert name is not None
        if self.pattern_type in (ANY, actual_pattern):
            return name == pattern.name
        if pattern.pattern_type is PatternType.PREFIXED:
            return name.startswith(pattern.name)
        return pattern.name in (name, WILDCARD)


def kafka_fields(binding: AclBinding) -> dict[str, Any]:
    """The binding in Kafka's field names and codes (a DeleteAcls matching ACL's layout)."""
    pattern = binding.pattern
    return {
        "resource_type": RESOURCE_TYPE_CODES[pattern.resource_type],
        "resource_name": pattern.name,
        "pattern_type": PATTERN_TYPE_CODES[pattern.pattern_type],
        "principal": binding.principal,
        "host": binding.host,
        "operation": OPERATION_CODES[binding.operation],
        "permission_type": PERMISSION_CODES[binding.permission],
    }


def described_resources(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    """Bindings grouped by resource pattern, in DescribeAcls' layout, in the order given."""
    grouped: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for binding in bindings:
        fields = kafka_fields(binding)
        key = (fields["resource_type"], fields["resource_name"], fields["pattern_type"])
        grouped.setdefault(key, []).append(
            {k: fields[k] for k in ("principal", "host", "operation", "permission_type")}
        )
    return [
        {"resource_type": rtype, "resource_name": name, "pattern_type": ptype, "acls": acls}
        for (rtype, name, ptype), acls in grouped.items()
    ]


def _name(code: int, table: dict[int, Any], extra: dict[int, str], any_ok: bool) -> str:
    if code in table:
        return f"{table[code].value} ({code})"
    if code in extra:
        return f"{extra[code]} ({code})"
    if any_ok and code == ANY:
        return "ANY (1)"
    return f"UNKNOWN ({code})"


def _resource_type_name(code: int) -> str:
    return _name(code, RESOURCE_TYPES, KAFKA_ONLY_RESOURCE_TYPES, True)


def _pattern_type_name(code: int) -> str:
    return "MATCH (2)" if code == MATCH else _name(code, PATTERN_TYPES, {}, True)


def _operation_name(code: int) -> str:
    return _name(code, OPERATIONS, KAFKA_ONLY_OPERATIONS, True)


def _permission_name(code: int) -> str:
    return _name(code, PERMISSIONS, {}, True)
