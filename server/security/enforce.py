"""The dependency every router runs first: authenticate, apply quotas, check the route's ACL.

``enforce`` is attached to each router with ``include_router(...,
dependencies=[Depends(enforce)])``; it finds the matched route's rule in
``route_acls`` and refuses routes that have none (fail closed). Handlers
whose bodies name further resources (an offset commit names topics) call
``authorize(request, "TOPIC", name, "READ")`` themselves.

Refusals: no or bad credentials -> 401 SASL_AUTHENTICATION_FAILED (58); an
ACL denial -> 403 TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED (29/30/31). Both
are logged with principal, operation and resource, never with credentials.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable

from fastapi import Request

from lakelog.errors import ClusterAuthorizationFailedError, SaslAuthenticationFailedError
from lakelog.security.acl import (
    ANONYMOUS,
    CLUSTER_NAME,
    Operation,
    ResourceType,
    parse_operation,
    parse_resource_type,
)
from lakelog.security.quota import QuotaKind
from server.groups.forward import ACL_VERSION_HEADER
from server.security.credentials import Identity, authenticate
from server.security.route_acls import Access, RouteRule, rule_for
from server.security.state import BrokerSecurity, denial

log = logging.getLogger("lakelog.security")

IDENTITY_KEY = "lakelog_identity"
RULE_KEY = "lakelog_route_rule"
CLIENT_ID_HEADER = "x-lakelog-client-id"


def security_of(request: Request) -> BrokerSecurity | None:
    security: BrokerSecurity | None = getattr(request.app.state, "security", None)
    return security


def client_host(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def client_id_of(request: Request) -> str:
    """Kafka's client.id, sent by lakelog clients as ``X-Lakelog-Client-Id`` (quota entity)."""
    return request.headers.get(CLIENT_ID_HEADER, "")[:255]


def identity_of(request: Request) -> Identity:
    """The caller's identity, authenticated once per request (401 when it does not check out)."""
    cached: Identity | None = getattr(request.state, IDENTITY_KEY, None)
    if cached is not None:
        return cached
    security = security_of(request)
    if security is None or not security.enabled:
        identity = Identity(ANONYMOUS, "none")
    else:
        try:
            identity = authenticate(
                security.mode, request.headers, security.api_keys, security.verifier
            )
        except SaslAuthenticationFailedError as exc:
            security.metrics.authentication_failures.inc()
            log.warning(
                "authentication failed: %s %s from %s: %s",
                request.method,
                request.url.path,
                client_host(request),
                exc.message,
            )
            raise
    setattr(request.state, IDENTITY_KEY, identity)
    return identity


def authorize(
    request: Request,
    resource_type: ResourceType | str,
    name: str,
    operation: Operation | str,
) -> None:
    """Raise the resource's *_AUTHORIZATION_FAILED (403) unless the caller may do ``operation``.

    For handlers whose body names resources the route rule cannot see; a no-op
    when authentication is off.
    """
    security = security_of(request)
    if security is None or not security.enabled:
        return
    rtype = parse_resource_type(resource_type)
    op = parse_operation(operation)
    principal = identity_of(request).principal
    if not security.permits(principal, client_host(request), op, rtype, name):
        raise denial(principal, op, rtype, name)


def describable(request: Request, resource_type: ResourceType, names: Iterable[str]) -> list[str]:
    """The names the caller may DESCRIBE, for listing routes (``BrokerSecurity.describable``)."""
    security = security_of(request)
    if security is None or not security.enabled:
        return list(names)
    principal = identity_of(request).principal
    return security.describable(principal, client_host(request), resource_type, names)


def _resource_name(request: Request, rule: RouteRule) -> str:
    if rule.resource_type is ResourceType.CLUSTER:
        return CLUSTER_NAME
    for param in rule.name_params:
        value = request.path_params.get(param)
        if isinstance(value, str):
            return value
    raise ClusterAuthorizationFailedError(
        f"route {request.method} {request.url.path} has no {'/'.join(rule.name_params)} "
        "parameter to authorize; refused"
    )


async def _body_name(request: Request, field: str) -> str | None:
    """A resource name from the (already received) JSON body, if it has one."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return None
    value = body.get(field) if isinstance(body, dict) else None
    return value if isinstance(value, str) else None


async def _check_rule(request: Request, rule: RouteRule) -> None:
    assert rule.resource_type is not None and rule.operation is not None
    if rule.body_name is None:
        authorize(request, rule.resource_type, _resource_name(request, rule), rule.operation)
        return
    # Kafka's CreateTopics: CREATE on the cluster, or else CREATE on the topic itself.
    security = security_of(request)
    assert security is not None
    principal = identity_of(request).principal
    on_cluster = security.check(
        principal, client_host(request), rule.operation, ResourceType.CLUSTER, CLUSTER_NAME
    )
    if on_cluster.allowed:
        return
    name = await _body_name(request, rule.body_name)
    if name is None:
        authorize(request, ResourceType.CLUSTER, CLUSTER_NAME, rule.operation)
    else:
        authorize(request, ResourceType.TOPIC, name, rule.operation)


async def _apply_quotas(request: Request, security: BrokerSecurity, rule: RouteRule) -> None:
    """Wait out an earlier throttle of the caller's budgets, then count this request."""
    quotas = security.quotas
    if not quotas.active:
        return
    principal = identity_of(request).principal
    client_id = client_id_of(request)
    kinds = [QuotaKind.REQUEST] + ([rule.quota] if rule.quota is not None else [])
    muted = quotas.muted_ms(kinds, principal, client_id)
    if muted > 0:
        await asyncio.sleep(muted / 1000)
    throttle = quotas.record(QuotaKind.REQUEST, principal, client_id, 1)
    note_throttle(request, throttle)


THROTTLE_KEY = "lakelog_throttle_ms"


def note_throttle(request: Request, throttle_ms: int) -> None:
    """Remember the longest throttle of this request; ``ThrottleMiddleware`` applies it."""
    current: int = getattr(request.state, THROTTLE_KEY, 0)
    setattr(request.state, THROTTLE_KEY, max(current, throttle_ms))


def _forwarded_acl_version(request: Request) -> int:
    try:
        return int(request.headers.get(ACL_VERSION_HEADER, "0"))
    except ValueError:
        return 0


async def enforce(request: Request) -> None:
    """Router dependency: authentication, quotas, then the route's ACL check."""
    security = security_of(request)
    route = request.scope.get("route")
    template = getattr(route, "path", "")
    rule = rule_for(request.method, template)
    if rule is None:
        if security is not None and security.enabled:
            log.error("no access rule for %s %s: refused (fail closed)", request.method, template)
            raise ClusterAuthorizationFailedError(
                f"{request.method} {template} has no access rule on this broker; refused"
            )
        return
    setattr(request.state, RULE_KEY, rule)
    metrics_open = security is None or not security.settings.metrics_require_auth
    if rule.access is Access.OPEN or (rule.access is Access.METRICS and metrics_open):
        return
    identity_of(request)  # 401 before anything else happens
    if security is None:
        return
    await security.catch_up(_forwarded_acl_version(request))
    await _apply_quotas(request, security, rule)
    if not security.enabled or rule.access is Access.AUTHENTICATED:
        return
    if rule.access is Access.METRICS:
        authorize(request, ResourceType.CLUSTER, CLUSTER_NAME, Operation.DESCRIBE)
        return
    await _check_rule(request, rule)
