"""SaslHandshake and SaslAuthenticate: a Kafka client proves its principal on a SASL listener.

The exchange is docs/kafka-protocol.md's; a handshake v0 client's bytes come as
a bare frame (``raw_token``). A failed step is answered, logged without the
credential, counted, and ends the connection once written, as in Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

from lakelog.errors import IllegalSaslStateError, LakelogError
from server.kafka import wire
from server.kafka.context import RequestContext, Session

log = logging.getLogger("lakelog.security")


async def sasl_handshake(ctx: RequestContext, body: Any) -> Any:
    session = ctx.session
    offered = session.sasl.mechanisms() if session.sasl is not None else []
    try:
        if session.sasl is None:
            raise IllegalSaslStateError(
                f"listener {session.listener} does not use SASL; connect to a SASL_PLAINTEXT "
                "listener to authenticate"
            )
        if session.authenticated or session.mechanism is not None:
            raise IllegalSaslStateError(
                "SaslHandshake after the connection's handshake; re-authentication is not supported"
            )
        exchange = session.sasl.start(body.mechanism)
    except LakelogError as exc:
        refused(session, exc, count=session.sasl is not None and not session.authenticated)
        return ctx.response(error_code=exc.code, mechanisms=offered)
    session.mechanism = body.mechanism
    session.exchange = exchange
    session.raw_token_next = ctx.version == 0
    return ctx.response(error_code=0, mechanisms=offered)


async def sasl_authenticate(ctx: RequestContext, body: Any) -> Any:
    session = ctx.session
    try:
        if session.exchange is None or session.authenticated:
            raise IllegalSaslStateError(
                "SaslAuthenticate is answered after a SaslHandshake on a SASL listener, until "
                "the connection has authenticated"
            )
        challenge, principal = session.exchange.step(bytes(body.auth_bytes))
    except LakelogError as exc:
        refused(session, exc, count=not isinstance(exc, IllegalSaslStateError))
        return ctx.response(
            error_code=exc.code, error_message=exc.message, auth_bytes=b"", session_lifetime=0
        )
    if principal is not None:
        authenticated(session, principal)
    return ctx.response(error_code=0, error_message=None, auth_bytes=challenge, session_lifetime=0)


def raw_token(session: Session, token: bytes) -> bytes | None:
    """A handshake v0 client's bare token: the challenge as a bare frame (empty once
    authenticated), or None (the connection ends). A SCRAM client's next token is bare too."""
    assert session.exchange is not None
    try:
        challenge, principal = session.exchange.step(token)
    except LakelogError as exc:
        session.raw_token_next = False
        refused(session, exc, count=True)
        return None
    session.raw_token_next = principal is None
    if principal is not None:
        authenticated(session, principal)
    return wire.SIZE.pack(len(challenge)) + challenge


def refused(session: Session, exc: LakelogError, *, count: bool) -> None:
    """Log a failed SASL step (never its bytes) and end the connection after the answer."""
    if count and session.security is not None:
        session.security.metrics.authentication_failures.inc()
    log.warning(
        "Kafka SASL authentication failed on listener %s from %s (mechanism %s): %s",
        session.listener,
        session.client_host,
        session.mechanism or "-",
        exc.message,
    )
    session.closing = session.closing or f"SASL authentication failed: {exc.message}"


def authenticated(session: Session, principal: str) -> None:
    session.principal = principal
    session.authenticated = True
    log.info(
        "Kafka client %s authenticated as %s (%s) on listener %s",
        session.client_host,
        principal,
        session.mechanism,
        session.listener,
    )
