"""DescribeAcls, CreateAcls and DeleteAcls: the broker's one ACL store, over Kafka.

The bindings are those of ``/v1/acls`` (``_meta/acls`` in the storage root),
so one created here holds for HTTP and Kafka requests alike, on every broker.
As in Kafka's ``AclApis``: describing needs DESCRIBE on the cluster, changing
ALTER (CLUSTER_AUTHORIZATION_FAILED on every entry otherwise); a broker with
authentication off has no authorizer to manage (SECURITY_DISABLED). Each
creation and filter is answered on its own; a refused creation stores nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lakelog.errors import LakelogError, SecurityDisabledError
from lakelog.security.acl import AclBinding, Operation
from server.kafka.acl_codes import KafkaAclFilter, binding_of, described_resources, kafka_fields
from server.kafka.authorization import cluster_security
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, error_code
from server.security.state import BrokerSecurity


def _authorizer(ctx: RequestContext, operation: Operation) -> BrokerSecurity:
    """The broker's security, if the principal may ``operation`` the cluster's ACLs.

    Kafka checks the cluster ACL first and then finds no authorizer; with
    authentication off the first check allows everything, so the order is the same.
    """
    security = cluster_security(ctx, operation)
    if security is None or not security.enabled:
        raise SecurityDisabledError(
            "No Authorizer is configured on the broker: authentication is off (auth_mode=none)"
        )
    return security


async def describe_acls(ctx: RequestContext, body: Any) -> Any:
    answer: dict[str, Any] = {"error_code": 0, "error_message": None, "resources": []}
    with answered(answer, "DescribeAcls"):
        security = _authorizer(ctx, Operation.DESCRIBE)
        wanted = KafkaAclFilter.of(body).check()
        await asyncio.to_thread(security.refresh)
        chosen = sorted(b for b in security.acls if wanted.matches(b))
        answer["resources"] = described_resources(chosen)
    return ctx.response(**answer)


async def create_acls(ctx: RequestContext, body: Any) -> Any:
    creations = list(body.creations)
    results: list[dict[str, Any]] = [{"error_code": 0, "error_message": None} for _ in creations]
    try:
        security = _authorizer(ctx, Operation.ALTER)
    except LakelogError as exc:
        for result in results:
            result.update(error_code=exc.code, error_message=exc.message)
        return ctx.response(results=results)
    valid: list[tuple[dict[str, Any], AclBinding]] = []
    for creation, result in zip(creations, results, strict=True):
        with answered(result, "CreateAcls entry"):
            binding = binding_of(
                resource_type=int(creation.resource_type),
                resource_name=creation.resource_name,
                pattern_type=int(creation.resource_pattern_type),
                principal=creation.principal,
                host=creation.host,
                operation=int(creation.operation),
                permission=int(creation.permission_type),
            )
            valid.append((result, binding))
    if valid:
        try:
            await asyncio.to_thread(security.acl_store.add, [b for _, b in valid])
            await asyncio.to_thread(security.refresh)
        except Exception as exc:  # an I/O failure: every valid entry reports it (logged)
            code, message = error_code(exc, "CreateAcls")
            for result, _ in valid:
                result.update(error_code=code, error_message=message)
    return ctx.response(results=results)


async def delete_acls(ctx: RequestContext, body: Any) -> Any:
    filters = list(body.filters)
    results: list[dict[str, Any]] = [
        {"error_code": 0, "error_message": None, "matching_acls": []} for _ in filters
    ]
    try:
        security = _authorizer(ctx, Operation.ALTER)
    except LakelogError as exc:
        for result in results:
            result.update(error_code=exc.code, error_message=exc.message)
        return ctx.response(filter_results=results)
    valid: list[tuple[dict[str, Any], KafkaAclFilter]] = []
    for entry, result in zip(filters, results, strict=True):
        with answered(result, "DeleteAcls filter"):
            valid.append((result, KafkaAclFilter.of(entry).check()))
    if valid:
        try:
            removed = await asyncio.to_thread(security.acl_store.remove, [f for _, f in valid])
            await asyncio.to_thread(security.refresh)
        except Exception as exc:  # an I/O failure: every valid filter reports it (logged)
            code, message = error_code(exc, "DeleteAcls")
            for result, _ in valid:
                result.update(error_code=code, error_message=message)
        else:
            for result, chosen in valid:
                result["matching_acls"] = [
                    {"error_code": 0, "error_message": None, **kafka_fields(b)}
                    for b in removed
                    if chosen.matches(b)
                ]
    return ctx.response(filter_results=results)
