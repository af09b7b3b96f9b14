"""Broker to broker: take another broker's group commit for a topic this broker leads.

Not a client API: the caller is a broker (``server.commit_leader``, which
describes the two-step answer), and the route needs CLUSTER_ACTION on the
cluster when authentication is on, as Kafka's inter-broker requests do.
Anything but 200 means nothing of the group was taken.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import Response, StreamingResponse

from lakelog.append.result import AppendResult
from lakelog.errors import LakelogError, UnsupportedContentTypeError
from server.broker import Broker
from server.commit_leader.codec import decode_batches, encode_results
from server.commit_leader.handoff import FROM_BROKER_HEADER, HANDOFF_MEDIA_TYPE
from server.http import ERROR_RESPONSES, get_broker, media_type, read_body

log = logging.getLogger(__name__)

router = APIRouter(prefix="/internal/v1", tags=["internal"], responses=ERROR_RESPONSES)

Taken = AppendResult | LakelogError | asyncio.Future[AppendResult]


async def outcomes(taken: list[Taken]) -> list[AppendResult | LakelogError]:
    """Each request's outcome, once every queued one is committed (or failed)."""
    results: list[AppendResult | LakelogError] = []
    for item in taken:
        if isinstance(item, asyncio.Future):
            try:
                results.append(await item)
            except LakelogError as exc:
                results.append(exc)
        else:
            results.append(item)
    return results


def _log_unanswered(sender: str, topic: str, future: asyncio.Future[AppendResult]) -> None:
    """The sender went away: it reports its requests as of unknown outcome; say what it was."""
    if future.cancelled():
        return
    exc = future.exception()
    log.warning(
        "broker %s went away before the outcome of its handoff to topic %s: %s",
        sender,
        topic,
        "committed" if exc is None else f"failed: {exc}",
    )


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
    taken = await broker.take_handoff(topic, decode_batches(body))
    sender = request.headers.get(FROM_BROKER_HEADER, "unknown")

    async def answer() -> AsyncIterator[bytes]:
        try:
            yield encode_results(await outcomes(taken))
        except asyncio.CancelledError:
            for item in taken:
                if isinstance(item, asyncio.Future):
                    item.add_done_callback(lambda f: _log_unanswered(sender, topic, f))
            raise

    return StreamingResponse(answer(), media_type=HANDOFF_MEDIA_TYPE)
