"""From one request frame to its response frame: version checks, decoding, the handler.

A frame lakelog cannot answer in the client's layout ends the connection, as
Kafka's broker does; only ApiVersions is answered in any version (v0 layout,
UNSUPPORTED_VERSION) so that a client can learn what to speak.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from lakelog.errors import LakelogError
from lakelog.security.quota import QuotaKind
from server.kafka import wire
from server.kafka.apis import API_VERSIONS, BEFORE_AUTHENTICATION, ORDERED, SUPPORTED, api_keys
from server.kafka.build import build
from server.kafka.context import Handler, RequestContext, Session
from server.kafka.handlers.sasl import raw_token

log = logging.getLogger(__name__)


class CloseConnection(Exception):
    """The request cannot be answered in its layout; the connection ends (logged once)."""


class Dispatcher:
    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        """``handlers``: by API name (``ApiRange.name``), one for every supported API."""
        missing = {api.name for api in SUPPORTED.values()} - set(handlers)
        if missing:
            raise ValueError(f"no handler for APIs {sorted(missing)}")
        self.handlers = {key: handlers[api.name] for key, api in SUPPORTED.items()}

    def start(
        self, frame: bytes, session: Session
    ) -> tuple[asyncio.Event, asyncio.Task[bytes | None]]:
        """Start answering ``frame``; the event is set once its effect is queued in order."""
        if session.raw_token_next:
            return _at_once(raw_token(session, frame))
        api_key, api_version, correlation_id = wire.peek_header(frame)
        api = SUPPORTED.get(api_key)
        if api is None:
            raise CloseConnection(f"unknown API key {api_key} (version {api_version})")
        if not session.authenticated and api_key not in BEFORE_AUTHENTICATION:
            if session.security is not None:
                session.security.metrics.authentication_failures.inc()
            raise CloseConnection(
                f"{api.name} before SASL authentication on listener {session.listener}: "
                "until SaslAuthenticate succeeds only ApiVersions, SaslHandshake and "
                "SaslAuthenticate are answered (ILLEGAL_SASL_STATE)"
            )
        if not api.supports(api_version):
            if api_key == API_VERSIONS:
                body = build(
                    load_response_schema(API_VERSIONS, 0),
                    error_code=ErrorCode.unsupported_version,
                    api_keys=api_keys(),
                )
                return _at_once(wire.encode_response(API_VERSIONS, 0, correlation_id, body))
            raise CloseConnection(
                f"{api.name} v{api_version} is not supported "
                f"(v{api.min_version}-v{api.max_version})"
            )
        try:
            header, body = wire.decode_request(frame)
        except LakelogError as exc:
            raise CloseConnection(exc.message) from exc
        ctx = RequestContext(session, header)
        if api_key not in ORDERED:
            ctx.accepted.set()
        task = asyncio.create_task(self._answer(ctx, body))
        return ctx.accepted, task

    async def _answer(self, ctx: RequestContext, body: Any) -> bytes | None:
        header = ctx.header
        if ctx.session.authenticated and header.api_key not in BEFORE_AUTHENTICATION:
            ctx.charge(QuotaKind.REQUEST, 1)
        try:
            response = await self.handlers[header.api_key](ctx, body)
        except LakelogError as exc:
            raise CloseConnection(
                f"{SUPPORTED[header.api_key].name} v{header.api_version}: {exc}"
            ) from exc
        finally:
            ctx.accepted.set()
        # A throttled acks=0 Produce has no answer to carry the throttle; its connection
        # is muted all the same.
        ctx.session.mute(ctx.throttle_ms)
        if response is None:
            return None
        return wire.encode_response(
            header.api_key, header.api_version, header.correlation_id, response
        )


def _at_once(answer: bytes | None) -> tuple[asyncio.Event, asyncio.Task[bytes | None]]:
    """A request answered without a handler: nothing to hold the next frame back for."""
    done = asyncio.Event()
    done.set()
    return done, asyncio.ensure_future(_ready(answer))


async def _ready(answer: bytes | None) -> bytes | None:
    return answer
