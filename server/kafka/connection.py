"""One Kafka client connection: read frames, answer them concurrently, reply in order.

Clients pipeline requests and match answers by order. A request that changes
state (``server.kafka.apis.ORDERED``) holds the next frame back until its
effect is queued, so one connection's writes land in the order sent while
reads overlap; answers are written in request order (docs/kafka-protocol.md,
"One connection's requests, in order").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from server.kafka import wire
from server.kafka.context import Session
from server.kafka.dispatch import CloseConnection, Dispatcher
from server.kafka.http_refusal import http_refusal, looks_like_http

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 64
#: How long a refused connection waits for its client to hang up after the refusal.
LINGER_S = 2.0


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    session: Session,
    dispatcher: Dispatcher,
    max_request_bytes: int,
) -> None:
    answers: asyncio.Queue[asyncio.Task[bytes | None] | None] = asyncio.Queue(MAX_IN_FLIGHT)
    replies = asyncio.create_task(_write_answers(answers, writer, session))
    loop = asyncio.get_running_loop()
    first = True
    try:
        while not replies.done():
            muted_s = session.muted_until - loop.time()
            if muted_s > 0:
                await asyncio.sleep(muted_s)  # a quota throttle: Kafka mutes the connection
            try:
                prefix = await reader.readexactly(wire.SIZE.size)
            except (asyncio.IncompleteReadError, ConnectionError):
                break  # the client closed the connection
            if first and looks_like_http(prefix):
                log.info("HTTP request on the Kafka listener from %s", session.client_host)
                writer.write(http_refusal(session.listener, session.broker.settings.url))
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
                break
            first = False
            (size,) = wire.SIZE.unpack(prefix)
            if not wire.HEADER_PREFIX.size <= size <= max_request_bytes:
                log.warning(
                    "closing Kafka connection from %s: request size %d is outside %d..%d",
                    session.client_host,
                    size,
                    wire.HEADER_PREFIX.size,
                    max_request_bytes,
                )
                break
            try:
                frame = await reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                log.warning(
                    "Kafka connection from %s closed inside a %d-byte request",
                    session.client_host,
                    size,
                )
                break
            try:
                accepted, task = dispatcher.start(frame, session)
            except CloseConnection as exc:
                log.warning("closing Kafka connection from %s: %s", session.client_host, exc)
                break
            await answers.put(task)
            await _first(accepted, task)
            if (reason := session.closing) is not None:
                log.info("closing Kafka connection from %s: %s", session.client_host, reason)
                break
    finally:
        await answers.put(None)
        with contextlib.suppress(asyncio.CancelledError):
            await replies
        if session.closing is not None:
            await _linger(reader, writer)
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Let the client read its refusal: half-close, then discard its input until it hangs up.

    Closing a socket that still holds unread input resets the connection, and
    the reset can destroy the answer the client has not read yet (a SASL
    failure's reason), leaving it a bare "disconnected" instead.
    """
    if writer.can_write_eof():
        with contextlib.suppress(OSError):
            writer.write_eof()
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(LINGER_S):
            while await reader.read(1 << 16):
                pass


async def _first(accepted: asyncio.Event, task: asyncio.Task[bytes | None]) -> None:
    """Until the request's effect is queued (or it is answered already)."""
    if accepted.is_set() or task.done():
        return
    waiter = asyncio.create_task(accepted.wait())
    try:
        await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


async def _write_answers(
    answers: asyncio.Queue[asyncio.Task[bytes | None] | None],
    writer: asyncio.StreamWriter,
    session: Session,
) -> None:
    """Write each answer in request order; after a failure, close and drain the rest."""
    broken = False
    while (task := await answers.get()) is not None:
        try:
            answer = await task
        except Exception as exc:
            if isinstance(exc, CloseConnection):
                log.warning("closing Kafka connection from %s: %s", session.client_host, exc)
            else:
                log.exception("Kafka request from %s failed; closing", session.client_host)
            broken = True
            writer.close()
            continue
        if answer is None or broken:
            continue
        if writer.is_closing():
            log.info("Kafka connection from %s closed before its answer", session.client_host)
            broken = True
            continue
        try:
            writer.write(answer)
            await writer.drain()
        except ConnectionError as exc:
            log.info("Kafka client %s went away before its answer: %s", session.client_host, exc)
            broken = True
