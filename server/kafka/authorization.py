"""ACL checks for Kafka requests: the broker's one authorizer, asked with the SASL principal.

Every decision is ``BrokerSecurity.check`` (the HTTP routes' authorizer)
with the principal the connection authenticated as and the socket's peer
address as host. Denials are counted in ``lakelog_authorization_denials``
and logged with principal, operation and resource, as over HTTP; resources
that are only hidden from a listing (Metadata of all topics, ListGroups) are
not denials and are not logged. With authentication off everything is allowed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from lakelog.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    LakelogError,
    TopicAuthorizationFailedError,
)
from lakelog.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    Operation,
    Permission,
    ResourceType,
)
from server.kafka.context import RequestContext

if TYPE_CHECKING:
    from server.security.state import BrokerSecurity

log = logging.getLogger("lakelog.security")

DENIED: dict[ResourceType, type[LakelogError]] = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
}


def _security(ctx: RequestContext) -> BrokerSecurity | None:
    """The broker's security, or None when authentication is off (everything is allowed)."""
    security = ctx.session.security
    return security if security is not None and security.enabled else None


def allowed(
    ctx: RequestContext,
    operation: Operation,
    resource_type: ResourceType,
    name: str,
    *,
    quiet: bool = False,
) -> bool:
    """Whether the connection's principal may; a denial is counted and logged unless ``quiet``
    (for what a listing only leaves out)."""
    security = _security(ctx)
    if security is None:
        return True
    host = ctx.session.client_host
    decision = security.check(ctx.principal, host, operation, resource_type, name)
    if decision.allowed or quiet:
        return decision.allowed
    security.metrics.authorization_denials.labels(resource_type.value, operation.value).inc()
    log.warning(
        "authorization denied (Kafka %s): principal=%s host=%s operation=%s resource=%s:%s (%s)",
        ctx.session.listener,
        ctx.principal,
        host,
        operation.value,
        resource_type.value,
        name,
        decision.reason,
    )
    return False


def refusal(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str
) -> LakelogError | None:
    """The resource's *_AUTHORIZATION_FAILED error unless ``allowed`` (None then)."""
    if allowed(ctx, operation, resource_type, name):
        return None
    return DENIED[resource_type](
        f"principal {ctx.principal} is not authorized to {operation.value} "
        f"{resource_type.value} {name!r}"
    )


def require(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str
) -> None:
    """Raise the resource's *_AUTHORIZATION_FAILED unless ``allowed``."""
    if (error := refusal(ctx, operation, resource_type, name)) is not None:
        raise error


def denied(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, names: Iterable[str]
) -> frozenset[str]:
    """The names the principal may not ``operation`` on (each checked once, in order)."""
    return frozenset(
        name for name in dict.fromkeys(names) if not allowed(ctx, operation, resource_type, name)
    )


def describable(
    ctx: RequestContext, resource_type: ResourceType, names: Iterable[str]
) -> list[str]:
    """The names the principal may DESCRIBE, in order (CLUSTER DESCRIBE shows every group)."""
    names = list(names)
    if resource_type is ResourceType.GROUP and allowed(
        ctx, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True
    ):
        return names
    return [n for n in names if allowed(ctx, Operation.DESCRIBE, resource_type, n, quiet=True)]


def allowed_on_some(ctx: RequestContext, operation: Operation, resource_type: ResourceType) -> bool:
    """Whether the principal may do ``operation`` on at least one resource of the type.

    Kafka's ``authorizeByResourceType``, asked through the one authorizer: each
    name an applicable ALLOW binding covers (its literal name, its prefix, or
    ``*``) is checked as a resource, so a DENY covering that name wins as usual.
    """
    security = _security(ctx)
    if security is None:
        return True
    host = ctx.session.client_host
    candidates = {
        b.pattern.name
        for b in security.acls
        if b.permission is Permission.ALLOW
        and b.pattern.resource_type is resource_type
        and b.operation in (operation, Operation.ALL)
        and b.applies_to(ctx.principal, host)
    }
    if ctx.principal in security.super_users:
        candidates.add(WILDCARD)
    return any(
        security.check(ctx.principal, host, operation, resource_type, name).allowed
        for name in sorted(candidates)
    )
