"""DescribeCluster: the live brokers on the client's listener, the cluster id, the controller.

There are no separate controllers, so controller endpoints (type 2) are
UNSUPPORTED_ENDPOINT_TYPE (docs/kafka-protocol.md, "Admin APIs"). A broker is
live or gone from the registry, never fenced (KIP-1073), so v2's
``include_fenced_brokers`` adds none and every broker answers ``is_fenced`` false.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from lakelog.errors import ClusterAuthorizationFailedError
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from server.kafka.authorization import allowed
from server.kafka.context import RequestContext
from server.kafka.handlers.metadata import OPERATIONS_OMITTED

BROKERS_ENDPOINT = 1


async def describe_cluster(ctx: RequestContext, body: Any) -> Any:
    session = ctx.session
    endpoint_type = int(getattr(body, "endpoint_type", BROKERS_ENDPOINT))
    answer: dict[str, Any] = {
        "endpoint_type": endpoint_type,
        "cluster_id": session.broker.settings.cluster_id,
        "cluster_authorized_operations": OPERATIONS_OMITTED,
        "error_code": 0,
        "error_message": None,
        "controller_id": -1,
        "brokers": [],
    }
    if not allowed(ctx, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        answer.update(
            error_code=ClusterAuthorizationFailedError.code,
            error_message=f"principal {ctx.principal} is not authorized to DESCRIBE the cluster",
        )
    elif endpoint_type != BROKERS_ENDPOINT:
        answer.update(
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message=f"endpoint type {endpoint_type}: lakelog brokers answer only "
            f"for brokers ({BROKERS_ENDPOINT}); there are no separate controllers",
        )
    else:
        cluster = session.cluster
        answer.update(
            controller_id=cluster.controller_id(),
            brokers=[
                {
                    "broker_id": n.node_id,
                    "host": n.host,
                    "port": n.port,
                    "rack": None,
                    "is_fenced": False,
                }
                for n in cluster.nodes(session.listener)
            ],
        )
    return ctx.response(**answer)
