"""FindCoordinator: the broker that coordinates a consumer group, on the client's listener.

Needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED otherwise), as in Kafka.
Only consumer groups have coordinators: transactions (key type 1, whose v5
TRANSACTION_ABORTABLE goes with them) and share groups (key type 2, v6) are
INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from lakelog.errors import InvalidRequestError
from lakelog.security.acl import Operation, ResourceType
from server.kafka.authorization import require
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered

GROUP = 0
BATCHED_VERSION = 4


async def find_coordinator(ctx: RequestContext, body: Any) -> Any:
    key_type = int(getattr(body, "key_type", GROUP))
    if ctx.version >= BATCHED_VERSION:
        return ctx.response(
            coordinators=[_find(ctx, key, key_type) for key in body.coordinator_keys]
        )
    return ctx.response(**_find(ctx, body.key, key_type))


def _find(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "key": key,
        "error_code": 0,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    with answered(answer, f"coordinator of {key!r}"):
        if key_type != GROUP:
            raise InvalidRequestError(
                f"coordinator key type {key_type}: only groups (0) have coordinators; "
                "transactions and share groups are not supported"
            )
        require(ctx, Operation.DESCRIBE, ResourceType.GROUP, key)
        node = ctx.session.cluster.coordinator(key, ctx.session.listener)
        answer.update(node_id=node.node_id, host=node.host, port=node.port)
    return answer
