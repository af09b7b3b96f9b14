"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

Credentials are kept in the storage root (``lakelog.security.scram``), so a
user altered through one broker authenticates on every broker once it has
refreshed (this one refreshes at once). As in Kafka: describing needs
DESCRIBE on the cluster, altering ALTER (CLUSTER_AUTHORIZATION_FAILED
otherwise); answers never carry salts or keys, only mechanisms and iterations.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from lakelog.errors import (
    ClusterAuthorizationFailedError,
    DuplicateResourceError,
    LakelogError,
    ResourceNotFoundError,
)
from lakelog.security.acl import Operation
from lakelog.security.scram import MECHANISM_NAMES, Deletion, Upsertion
from server.kafka.authorization import cluster_security
from server.kafka.context import RequestContext
from server.kafka.error_codes import error_code
from server.security.state import BrokerSecurity


def _security(ctx: RequestContext, operation: Operation) -> BrokerSecurity:
    security = cluster_security(ctx, operation)
    if security is None:
        raise ClusterAuthorizationFailedError("this listener has no security state to manage")
    return security


async def describe_user_scram_credentials(ctx: RequestContext, body: Any) -> Any:
    try:
        security = _security(ctx, Operation.DESCRIBE)
        await asyncio.to_thread(security.refresh)
    except Exception as exc:  # unexpected ones are logged by ``error_code``
        code, message = error_code(exc, "DescribeUserScramCredentials")
        return ctx.response(error_code=code, error_message=message, results=[])
    by_user: dict[str, list[dict[str, int]]] = {}
    for (user, mechanism), credential in sorted(security.scram.items()):
        by_user.setdefault(user, []).append(
            {"mechanism": MECHANISM_NAMES[mechanism], "iterations": credential.iterations}
        )
    asked = [u.name for u in body.users] if body.users else sorted(by_user)
    twice = {name for name, n in Counter(asked).items() if n > 1}
    results = []
    for user in dict.fromkeys(asked):
        result: dict[str, Any] = {
            "user": user,
            "error_code": 0,
            "error_message": None,
            "credential_infos": by_user.get(user, []),
        }
        error: LakelogError | None = None
        if user in twice:
            error = DuplicateResourceError(
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}"
            )
        elif user not in by_user:
            error = ResourceNotFoundError(
                f"Attempt to describe a user credential that does not exist: {user}"
            )
        if error is not None:
            result.update(error_code=error.code, error_message=error.message, credential_infos=[])
        results.append(result)
    return ctx.response(error_code=0, error_message=None, results=results)


async def alter_user_scram_credentials(ctx: RequestContext, body: Any) -> Any:
    deletions = [Deletion(d.name, int(d.mechanism)) for d in body.deletions]
    upsertions = [
        Upsertion(
            u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password)
        )
        for u in body.upsertions
    ]
    users = list(dict.fromkeys([d.user for d in deletions] + [u.user for u in upsertions]))
    try:
        security = _security(ctx, Operation.ALTER)
        outcome = await asyncio.to_thread(security.scram_store.alter, deletions, upsertions)
        await asyncio.to_thread(security.refresh)
    except Exception as exc:  # unexpected ones are logged by ``error_code``
        code, message = error_code(exc, "AlterUserScramCredentials")
        failed = [{"user": u, "error_code": code, "error_message": message} for u in users]
        return ctx.response(results=failed)
    results = []
    for user, error in outcome.items():
        if error is None:
            results.append({"user": user, "error_code": 0, "error_message": None})
        else:
            results.append({"user": user, "error_code": error.code, "error_message": error.message})
    return ctx.response(results=results)
