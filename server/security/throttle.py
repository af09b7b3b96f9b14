"""Byte quotas of produce and fetch, and the delayed answer that enforces them (Kafka's throttling).

Handlers that know their byte count call ``record_quota(request, kind, bytes)``
and put the returned ``throttle_time_ms`` into their response body (the
native produce and fetch answers do). ``ThrottleMiddleware`` then holds the
response start for the longest throttle the request collected and reports it
in the ``X-Lakelog-Throttle-Time-Ms`` header. For produce routes that do not
record themselves (the REST Proxy ones), the middleware counts the request
body bytes it passed on and records them when the answer starts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Request
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lakelog.security.quota import QuotaKind
from server.security.enforce import (
    CLIENT_ID_HEADER,
    IDENTITY_KEY,
    RULE_KEY,
    THROTTLE_KEY,
    client_id_of,
    note_throttle,
    security_of,
)
from server.security.route_acls import RouteRule
from server.security.state import BrokerSecurity

THROTTLE_HEADER = "X-Lakelog-Throttle-Time-Ms"
RECORDED_KEY = "lakelog_quota_recorded"


def hold_until(previous_until: float | None, now: float, throttle_ms: int) -> float:
    """When a throttled answer may go: after the client's previous held answer, plus its own
    throttle (seconds on the event loop's clock). Pure, so the queueing is testable."""
    start = now if previous_until is None else max(now, previous_until)
    return start + throttle_ms / 1000


def record_quota(request: Request, kind: QuotaKind, value: float) -> int:
    """Count ``value`` bytes of ``kind`` for the caller; the throttle time (ms) to report."""
    security = security_of(request)
    if security is None or not security.quotas.active:
        return 0
    identity = getattr(request.state, IDENTITY_KEY, None)
    if identity is None:
        return 0  # the route is open: nobody to charge
    setattr(request.state, RECORDED_KEY, True)
    throttle = security.quotas.record(kind, identity.principal, client_id_of(request), value)
    note_throttle(request, throttle)
    throttle_ms: int = getattr(request.state, THROTTLE_KEY, 0)
    return throttle_ms


class ThrottleMiddleware:
    """Delays the start of a throttled answer and adds the throttle-time header."""

    def __init__(self, app: ASGIApp, security: BrokerSecurity) -> None:
        self.app = app
        self.security = security
        self.max_delay_ms = security.quotas.window.span_ms
        #: (principal, client id) -> event-loop time until which its answers are held.
        self._held_until: dict[tuple[str, str], float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.security.quotas.active:
            await self.app(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
            return message

        async def throttled_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state: dict[str, Any] = scope.get("state") or {}
                client_id = Headers(scope=scope).get(CLIENT_ID_HEADER, "")[:255]
                self._record_produce_fallback(state, client_id, received)
                throttle_ms = int(state.get(THROTTLE_KEY, 0))
                if throttle_ms > 0:
                    MutableHeaders(scope=message)[THROTTLE_HEADER] = str(throttle_ms)
                    identity = state.get(IDENTITY_KEY)
                    owner = identity.principal if identity is not None else ""
                    await self._hold((owner, client_id), throttle_ms)
            await send(message)

        await self.app(scope, counting_receive, throttled_send)

    async def _hold(self, key: tuple[str, str], throttle_ms: int) -> None:
        """Delay one answer; a client's throttled answers are held one after another.

        Kafka mutes a throttled client's connection, so its requests are served
        one at a time. HTTP clients send several requests at once: holding each
        answer only for its own throttle would delay them side by side and let
        the client through at several times its quota. Each answer waits at most
        one full window beyond the previous one, well inside client timeouts.
        """
        now = asyncio.get_running_loop().time()
        until = hold_until(self._held_until.get(key), now, min(throttle_ms, self.max_delay_ms))
        self._held_until[key] = until
        for stale in [k for k, t in self._held_until.items() if t < now]:
            del self._held_until[stale]
        await asyncio.sleep(until - now)

    def _record_produce_fallback(
        self, state: dict[str, Any], client_id: str, received: int
    ) -> None:
        rule: RouteRule | None = state.get(RULE_KEY)
        identity = state.get(IDENTITY_KEY)
        if rule is None or rule.quota is not QuotaKind.PRODUCE or identity is None:
            return
        if state.get(RECORDED_KEY):
            return
        throttle = self.security.quotas.record(
            QuotaKind.PRODUCE, identity.principal, client_id, received
        )
        state[THROTTLE_KEY] = max(int(state.get(THROTTLE_KEY, 0)), throttle)
