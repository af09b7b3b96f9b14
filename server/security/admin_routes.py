"""HTTP administration of ACLs and client quotas: ``/v1/acls``, ``/v1/quotas``, ``/v1/whoami``.

Changes are written to the storage root (so every broker enforces them) and
this broker re-reads them at once; other brokers follow within
``acl_refresh_ms``. The routes are protected like all others through
``route_acls``: describing needs CLUSTER DESCRIBE, changing CLUSTER ALTER.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from lakelog.errors import InvalidRequestError, SecurityDisabledError
from lakelog.security.acl import (
    AclBinding,
    AclFilter,
    parse_operation,
    parse_pattern_type,
    parse_permission,
    parse_resource_type,
    validate_principal,
)
from lakelog.security.quota import QuotaEntity, QuotaKind, encode_quotas, parse_limits
from server.http import ERROR_RESPONSES
from server.request_bodies import RequestBody
from server.security.enforce import identity_of
from server.security.state import BrokerSecurity

router = APIRouter(prefix="/v1", tags=["security"], responses=ERROR_RESPONSES)


class AclIn(RequestBody):
    resource_type: str = Field(description="TOPIC, GROUP, CLUSTER or SUBJECT")
    resource_name: str = Field(description="Name, prefix, or * (LITERAL only)")
    pattern_type: str = Field("LITERAL", description="LITERAL or PREFIXED")
    principal: str = Field(description="Kafka principal, e.g. User:alice or User:*")
    host: str = "*"
    operation: str = Field(description="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE or ALL")
    permission: str = Field("ALLOW", description="ALLOW or DENY")


class CreateAclsRequest(RequestBody):
    acls: list[AclIn] = Field(min_length=1)


class AclOut(BaseModel):
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


class AclList(BaseModel):
    acls: list[AclOut]


class QuotaEntityIn(RequestBody):
    user: str | None = Field(None, description="User name, or <default>")
    client_id: str | None = Field(None, description="Client id, or <default>")


class AlterQuotasRequest(RequestBody):
    entity: QuotaEntityIn
    set: dict[str, float] = Field(default_factory=dict)
    delete: list[str] = Field(default_factory=list)


class QuotaOut(BaseModel):
    user: str | None
    client_id: str | None
    quotas: dict[str, float]


class QuotaList(BaseModel):
    quotas: list[QuotaOut]


class WhoAmI(BaseModel):
    principal: str
    method: str


def _security(request: Request) -> BrokerSecurity:
    security: BrokerSecurity = request.app.state.security
    return security


def _out(bindings: list[AclBinding]) -> AclList:
    return AclList(acls=[AclOut(**b.to_json()) for b in bindings])


@dataclass(frozen=True)
class AclQuery:
    """The query parameters of an ACL search, as sent (absent ones are None)."""

    resource_type: str | None = None
    resource_name: str | None = None
    pattern_type: str | None = None
    principal: str | None = None
    host: str | None = None
    operation: str | None = None
    permission: str | None = None

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def acl_filter(self) -> AclFilter:
        """The parameters as a filter; ``ANY`` (or absence) matches everything."""

        def given(value: str | None) -> str | None:
            return None if value is None or value.strip().upper() == "ANY" else value

        return AclFilter(
            resource_type=parse_resource_type(v) if (v := given(self.resource_type)) else None,
            resource_name=self.resource_name,
            pattern_type=parse_pattern_type(v) if (v := given(self.pattern_type)) else None,
            principal=validate_principal(self.principal) if self.principal else None,
            host=self.host,
            operation=parse_operation(v) if (v := given(self.operation)) else None,
            permission=parse_permission(v) if (v := given(self.permission)) else None,
        )


Q = Annotated[str | None, Query()]


async def acl_query(
    resource_type: Q = None,
    resource_name: Q = None,
    pattern_type: Q = None,
    principal: Q = None,
    host: Q = None,
    operation: Q = None,
    permission: Q = None,
) -> AclQuery:
    """The search parameters, all optional (a coroutine: FastAPI would run a plain ``def``
    dependency on its thread pool)."""
    return AclQuery(
        resource_type, resource_name, pattern_type, principal, host, operation, permission
    )


AclSearch = Annotated[AclQuery, Depends(acl_query)]


@router.get("/acls", response_model=AclList, summary="List ACL bindings matching the filter")
def list_acls(request: Request, query: AclSearch) -> AclList:
    security = _security(request)
    security.refresh()
    chosen = query.acl_filter()
    return _out(sorted(b for b in security.acls if chosen.matches(b)))


@router.post("/acls", response_model=AclList, status_code=201, summary="Add ACL bindings")
def create_acls(body: CreateAclsRequest, request: Request) -> AclList:
    security = _security(request)
    bindings = [AclBinding.from_json(a.model_dump()) for a in body.acls]
    added = security.acl_store.add(bindings)
    security.refresh()
    return _out(added)


@router.delete("/acls", response_model=AclList, summary="Delete ACL bindings matching the filter")
def delete_acls(request: Request, query: AclSearch) -> AclList:
    if query.is_empty():
        raise InvalidRequestError(
            "deleting ACLs needs at least one filter (resource_type, resource_name, "
            "pattern_type, principal, host, operation, permission)"
        )
    security = _security(request)
    removed = security.acl_store.remove([query.acl_filter()])
    security.refresh()
    return _out(removed)


@router.get("/quotas", response_model=QuotaList, summary="Client quota overrides")
def list_quotas(request: Request, user: Q = None, client_id: Q = None) -> QuotaList:
    security = _security(request)
    security.refresh()
    items = encode_quotas(security.quotas.overrides)
    chosen = [
        i
        for i in items
        if (user is None or i["user"] == user)
        and (client_id is None or i["client_id"] == client_id)
    ]
    return QuotaList(quotas=[QuotaOut(**item) for item in chosen])


@router.patch("/quotas", response_model=QuotaOut, summary="Set/remove one entity's quotas")
def alter_quotas(body: AlterQuotasRequest, request: Request) -> QuotaOut:
    security = _security(request)
    entity = QuotaEntity(body.entity.user, body.entity.client_id).check()
    limits = parse_limits(body.set)
    delete = [parse_limits({name: 1}).popitem()[0] for name in body.delete]
    after = security.quota_store.alter(entity, limits, delete)
    security.refresh()
    return QuotaOut(
        user=entity.user,
        client_id=entity.client_id,
        quotas={k.value: v for k, v in sorted(after.items())},
    )


@router.get("/whoami", response_model=WhoAmI, summary="The principal this request authenticated as")
def whoami(request: Request) -> WhoAmI:
    security = _security(request)
    if not security.enabled:
        raise SecurityDisabledError("authentication is off on this broker (auth_mode=none)")
    identity = identity_of(request)
    return WhoAmI(principal=identity.principal, method=identity.method)


__all__ = ["QuotaKind", "router"]
