"""ACL checks for Kafka requests: the HTTP routes' authorizer, asked with the SASL principal.

The host is the socket's peer address. Denials are counted and logged as over
HTTP; what a listing only hides is not a denial. Authentication off allows everything.
"""

from __future__ import annotations

from collections.abc import Iterable

from lakelog.errors import LakelogError
from lakelog.security.acl import CLUSTER_NAME, WILDCARD, Operation, Permission, ResourceType
from server.kafka.context import RequestContext
from server.security.state import BrokerSecurity, denial


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
    principal, host = ctx.principal, ctx.session.client_host
    if quiet:
        return security.check(principal, host, operation, resource_type, name).allowed
    via = f" (Kafka {ctx.session.listener})"
    return security.permits(principal, host, operation, resource_type, name, via=via)


def refusal(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str
) -> LakelogError | None:
    """The resource's *_AUTHORIZATION_FAILED error unless ``allowed`` (None then)."""
    if allowed(ctx, operation, resource_type, name):
        return None
    return denial(ctx.principal, operation, resource_type, name)


def require(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str
) -> None:
    """Raise the resource's *_AUTHORIZATION_FAILED unless ``allowed``."""
    if (error := refusal(ctx, operation, resource_type, name)) is not None:
        raise error


def cluster_security(ctx: RequestContext, operation: Operation) -> BrokerSecurity | None:
    """The connection's security state (ACL, quota and credential stores), once the
    principal may ``operation`` on the cluster (the refusal raised otherwise); None on a
    listener without one."""
    require(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)
    return ctx.session.security


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
    """The names the principal may DESCRIBE, in order (``BrokerSecurity.describable``)."""
    security = _security(ctx)
    if security is None:
        return list(names)
    return security.describable(ctx.principal, ctx.session.client_host, resource_type, names)


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
