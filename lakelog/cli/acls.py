"""``lakelog acls``: kafka-acls.sh over the brokers' ``/v1/acls`` API.

    lakelog acls --add --allow-principal User:alice --operation Read --topic orders
    lakelog acls --list [--topic orders] [--principal User:alice]

As in Kafka, ``--add`` makes one binding per (principal, host, operation,
resource), and ``--producer``/``--consumer`` add the usual operations.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterable

from lakelog.cli.cluster import admin_client
from lakelog.cli.commands import COMMANDS
from lakelog.cli.common import SubParsers, add_tool
from lakelog.errors import InvalidConfigError
from lakelog.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    parse_operation,
    parse_pattern_type,
    validate_principal,
)


def register(sub: SubParsers) -> None:
    actions = {"add": "add ACLs", "remove": "remove matching ACLs", "list": "list matching ACLs"}
    parser = add_tool(sub, "acls", COMMANDS["acls"].help, run, actions)
    for flag, metavar, text in (
        (
            "--allow-principal",
            "PRINCIPAL",
            "principal the ACL allows, e.g. User:alice (repeatable)",
        ),
        ("--deny-principal", "PRINCIPAL", "principal the ACL denies (repeatable)"),
        (
            "--allow-host",
            "HOST",
            "client address --allow-principal applies from (default: * = any)",
        ),
        ("--deny-host", "HOST", "client address --deny-principal applies from (default: * = any)"),
    ):
        parser.add_argument(flag, action="append", default=[], metavar=metavar, help=text)
    parser.add_argument("--principal", help="--list/--remove: only this principal's ACLs")
    parser.add_argument(
        "--operation", action="append", default=[], help="Read, Write, Create, Delete, ..."
    )
    parser.add_argument("--topic", action="append", default=[], help="topic name, prefix or *")
    parser.add_argument("--group", action="append", default=[], help="group id, prefix or *")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        default=None,
        help="literal or prefixed (--add, default literal); also any (--list/--remove default)",
    )
    parser.add_argument("--producer", action="store_true", help="producer ACLs on --topic")
    parser.add_argument("--consumer", action="store_true", help="consumer ACLs (--topic, --group)")


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _principals(args: argparse.Namespace) -> list[tuple[str, Permission, list[str]]]:
    """(principal, permission, hosts) for every --allow/--deny-principal."""
    allow_hosts = args.allow_host or [WILDCARD]
    deny_hosts = args.deny_host or [WILDCARD]
    chosen = [(validate_principal(p), Permission.ALLOW, allow_hosts) for p in args.allow_principal]
    chosen += [(validate_principal(p), Permission.DENY, deny_hosts) for p in args.deny_principal]
    return chosen


def _operations(args: argparse.Namespace, rtype: ResourceType) -> list[Operation]:
    ops = [parse_operation(o) for o in args.operation]
    if args.producer and rtype is ResourceType.TOPIC:
        ops += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]
    if args.consumer and rtype is ResourceType.TOPIC:
        ops += [Operation.READ, Operation.DESCRIBE]
    if args.consumer and rtype is ResourceType.GROUP:
        ops += [Operation.READ]
    return list(dict.fromkeys(ops))


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    kind = parse_pattern_type(args.resource_pattern_type or "literal")
    resources = _resources(args)
    principals = _principals(args)
    if not resources:
        raise InvalidConfigError("--add needs a resource: --topic, --group or --cluster")
    if not principals:
        raise InvalidConfigError("--add needs --allow-principal or --deny-principal")
    bindings = []
    for (rtype, name), (principal, permission, hosts) in itertools.product(resources, principals):
        ops = _operations(args, rtype)
        if not ops:
            raise InvalidConfigError(
                f"no operation for {rtype.value} {name!r}: give --operation "
                "(or --producer/--consumer)"
            )
        pattern = ResourcePattern(
            rtype, name, kind if rtype is not ResourceType.CLUSTER else PatternType.LITERAL
        )
        for op, host in itertools.product(ops, hosts):
            bindings.append(AclBinding(pattern, principal, op, permission, host))
    return bindings


def filters(args: argparse.Namespace) -> list[AclFilter]:
    """The filters --list/--remove select by (one per resource x principal x operation)."""
    text = (args.resource_pattern_type or "any").strip().lower()
    kind = None if text == "any" else parse_pattern_type(text)
    resources: Iterable[tuple[ResourceType | None, str | None]] = _resources(args) or [(None, None)]
    principals: list[tuple[str | None, Permission | None]] = [
        (p, perm) for p, perm, _ in _principals(args)
    ]
    if args.principal:
        principals.append((validate_principal(args.principal), None))
    ops: list[Operation | None] = [parse_operation(o) for o in args.operation] or [None]
    return [
        AclFilter(
            resource_type=rtype,
            resource_name=name,
            pattern_type=kind,
            principal=principal,
            operation=op,
            permission=permission,
        )
        for (rtype, name), (principal, permission), op in itertools.product(
            resources, principals or [(None, None)], ops
        )
    ]


def describe(binding: AclBinding) -> str:
    p = binding.pattern
    return (
        f"ResourcePattern(resourceType={p.resource_type.value}, name={p.name}, "
        f"patternType={p.pattern_type.value}): (principal={binding.principal}, "
        f"host={binding.host}, operation={binding.operation.value}, "
        f"permissionType={binding.permission.value})"
    )


def _print(title: str, bindings: list[AclBinding]) -> int:
    print(f"{title} ({len(bindings)}):")
    for binding in bindings:
        print(f"  {describe(binding)}")
    return 0


def run(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        if args.add:
            bindings = bindings_to_add(args)
            admin.create_acls(bindings)
            return _print("Adding ACLs", bindings)
        chosen = filters(args)
        if args.remove:
            if all(f == AclFilter(pattern_type=f.pattern_type) for f in chosen):
                raise InvalidConfigError(
                    "--remove needs a resource, principal or operation to select ACLs"
                )
            return _print("Removed ACLs", [b for f in chosen for b in admin.delete_acls(f)])
        return _print("Current ACLs", sorted({b for f in chosen for b in admin.describe_acls(f)}))
