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

log = logging.getLogger("lakelog.security")

DENIED: dict[ResourceType, type[LakelogError]] = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
}


def allowed(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str
) -> bool:
    """Whether the connection's principal may; a denial is counted and logged."""
    security = ctx.session.security
    if security is None or not security.enabled:
        return True
    host = ctx.session.client_host
    decision = security.check(ctx.principal, host, operation, resource_type, name)
    if decision.allowed:
        return True
    security.metrics.authorization_denials.labels(resource_type.value, operation.value).inc()
    log.warning(
        "authorization denied (Kafka %s): principal=%s host=%s operation=%s resource=%s:%s (%s)",
        ctx.session.listener,
        ctx.principal,
        ctx.session.client_host,
        operation.value,
        resource_type.value,
        name,
        decision.reason,
    )
    return False


def require(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str
) -> None:
    """Raise the resource's *_AUTHORIZATION_FAILED unless ``allowed``."""
    if not allowed(ctx, operation, resource_type, name):
        raise denial(ctx, operation, resource_type, name)


def denial(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str
) -> LakelogError:
    return DENIED[resource_type](
        f"principal {ctx.principal} is not authorized to {operation.value} "
        f"{resource_type.value} {name!r}"
    )


def quietly_allowed(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str
) -> bool:
    """``allowed`` without counting or logging: for what a listing only leaves out."""
    security = ctx.session.security
    if security is None or not security.enabled:
        return True
    client_host = ctx.session.client_host
    return security.check(ctx.principal, client_host, operation, resource_type, name).allowed


def describable(
    ctx: RequestContext, resource_type: ResourceType, names: Iterable[str]
) -> list[str]:
    """The names the principal may DESCRIBE, in order (CLUSTER DESCRIBE shows every group)."""
    names = list(names)
    if resource_type is ResourceType.GROUP and quietly_allowed(
        ctx, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return names
    return [n for n in names if quietly_allowed(ctx, Operation.DESCRIBE, resource_type, n)]


def allowed_on_some(ctx: RequestContext, operation: Operation, resource_type: ResourceType) -> bool:
    """Whether the principal may do ``operation`` on at least one resource of the type.

    Kafka's ``authorizeByResourceType``, asked through the one authorizer: each
    name an applicable ALLOW binding covers (its literal name, its prefix, or
    ``*``) is checked as a resource, so a DENY covering that name wins as usual.
    """
    security = ctx.session.security
    if security is None or not security.enabled:
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
