"""InitProducerId: a new producer id for an idempotent producer, unique across brokers.

Needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic, as in Kafka 2.8+.
"""

from __future__ import annotations

from typing import Any

from lakelog.errors import ClusterAuthorizationFailedError, InvalidRequestError
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from server.kafka.authorization import allowed, allowed_on_some
from server.kafka.context import RequestContext
from server.kafka.error_codes import error_code


async def init_producer_id(ctx: RequestContext, body: Any) -> Any:
    """Every call gets a fresh id at epoch 0: sequences start again, as after Kafka's bump."""
    try:
        if body.transactional_id is not None:
            raise InvalidRequestError(
                f"transactional id {body.transactional_id!r}: transactions are not supported"
            )
        if not (
            allowed(ctx, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True)
            or allowed_on_some(ctx, Operation.WRITE, ResourceType.TOPIC)
        ):
            raise ClusterAuthorizationFailedError(
                f"principal {ctx.principal} may not produce idempotently: it needs "
                "IDEMPOTENT_WRITE on the cluster or WRITE on a topic"
            )
        producer_id = await ctx.broker.producer_ids.next_id_async()
    except Exception as exc:  # answered in the response; unexpected ones are logged
        code, _ = error_code(exc, "InitProducerId")
        return ctx.response(error_code=code, producer_id=-1, producer_epoch=-1)
    return ctx.response(error_code=0, producer_id=producer_id, producer_epoch=0)
