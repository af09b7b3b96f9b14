"""Broker to broker: take another broker's group commit for a topic this broker leads.

Not a client API: the caller is a broker (``server.commit_leader``), and the
route needs CLUSTER_ACTION on the cluster when authentication is on, as
Kafka's inter-broker requests do. Anything but 200 means nothing of the
group was taken, so the sender may commit it itself.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import Response

from lakelog.errors import UnsupportedContentTypeError
from server.broker import Broker
from server.commit_leader.codec import decode_batches, encode_results
from server.commit_leader.handoff import HANDOFF_MEDIA_TYPE
from server.http import ERROR_RESPONSES, get_broker, media_type, read_body

router = APIRouter(prefix="/internal/v1", tags=["internal"], responses=ERROR_RESPONSES)


@router.post("/topics/{topic}/commits", include_in_schema=False)
async def take_handoff(
    topic: Annotated[str, Path(min_length=1, max_length=249)],
    request: Request,
    broker: Annotated[Broker, Depends(get_broker)],
) -> Response:
    if media_type(request) != HANDOFF_MEDIA_TYPE:
        raise UnsupportedContentTypeError(
            f"a commit handoff is {HANDOFF_MEDIA_TYPE}, not {media_type(request)!r}"
        )
    body = await read_body(request, broker.settings.max_request_bytes)
    results = await broker.take_handoff(topic, decode_batches(body))
    return Response(encode_results(results), media_type=HANDOFF_MEDIA_TYPE)
