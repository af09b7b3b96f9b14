"""DescribeClientQuotas and AlterClientQuotas: the broker's one quota store, over Kafka.

The overrides are those of ``/v1/quotas`` (``_meta/quotas`` in the storage
root), so a quota altered here meters Kafka and HTTP requests alike, on every
broker once it has refreshed (this one refreshes at once). As in Kafka:
describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS
(CLUSTER_AUTHORIZATION_FAILED, on every entry for Alter). Quotas apply with
authentication off too, so both APIs serve then. What Kafka's model has and
lakelog's has not is refused per entry (``server.kafka.client_quotas``); the
valid entries of one request are stored in one change, or none with
``validate_only``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lakelog.errors import ClusterAuthorizationFailedError
from lakelog.security.acl import Operation
from server.kafka.authorization import cluster_security
from server.kafka.client_quotas import Alteration, QuotaFilter, alteration_of, described
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, error_code, refuse_repeated, repeated
from server.security.state import BrokerSecurity


def _quota_security(ctx: RequestContext, operation: Operation) -> BrokerSecurity:
    """The broker's security state (which holds the quota store), if the principal may
    ``operation`` the cluster's configs."""
    security = cluster_security(ctx, operation)
    if security is None:
        raise ClusterAuthorizationFailedError("this listener has no quota store to manage")
    return security


async def describe_client_quotas(ctx: RequestContext, body: Any) -> Any:
    answer: dict[str, Any] = {"error_code": 0, "error_message": None, "entries": None}
    with answered(answer, "DescribeClientQuotas"):
        security = _quota_security(ctx, Operation.DESCRIBE_CONFIGS)
        chosen = QuotaFilter.of(
            ((c.entity_type, int(c.match_type), c.match) for c in body.components),
            bool(body.strict),
        )
        await asyncio.to_thread(security.refresh)
        answer["entries"] = described(security.quotas.overrides, chosen)
    return ctx.response(**answer)


def _entity_fields(entry: Any) -> list[dict[str, Any]]:
    return [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]


def _entity_key(entry: Any) -> frozenset[tuple[str, str | None]]:
    return frozenset((e.entity_type, e.entity_name) for e in entry.entity)


async def alter_client_quotas(ctx: RequestContext, body: Any) -> Any:
    entries = list(body.entries)
    results: list[dict[str, Any]] = [
        {"error_code": 0, "error_message": None, "entity": _entity_fields(e)} for e in entries
    ]
    try:
        security = _quota_security(ctx, Operation.ALTER_CONFIGS)
    except Exception as exc:  # unexpected ones are logged by ``error_code``
        code, message = error_code(exc, "AlterClientQuotas")
        for result in results:
            result.update(error_code=code, error_message=message)
        return ctx.response(entries=results)
    twice = repeated(_entity_key(e) for e in entries)
    valid: list[tuple[dict[str, Any], Alteration]] = []
    for entry, result in zip(entries, results, strict=True):
        with answered(result, "AlterClientQuotas entry"):
            if _entity_key(entry) in twice:
                raise refuse_repeated("quota entity")
            alteration = alteration_of(
                ((e.entity_type, e.entity_name) for e in entry.entity),
                ((op.key, float(op.value), bool(op.remove)) for op in entry.ops),
            )
            valid.append((result, alteration))
    if valid and not body.validate_only:
        changes = [(a.entity, a.set_limits, a.remove) for _, a in valid]
        try:
            await asyncio.to_thread(security.quota_store.alter_many, changes)
            await asyncio.to_thread(security.refresh)
        except Exception as exc:  # an I/O failure: every valid entry reports it (logged)
            code, message = error_code(exc, "AlterClientQuotas")
            for result, _ in valid:
                result.update(error_code=code, error_message=message)
    return ctx.response(entries=results)
