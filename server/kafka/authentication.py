"""A connection's SASL outcome: who it is, or why it ends (shared by the SASL handlers).

Failures are logged without the credential, counted in
``lakelog_authentication_failures`` and end the connection once the answer
is written, as Kafka's broker does.
"""

from __future__ import annotations

import logging

from lakelog.errors import LakelogError
from server.kafka import wire
from server.kafka.context import Session

log = logging.getLogger("lakelog.security")


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
    session.close_after_answers(f"SASL authentication failed: {exc.message}")


def raw_token(session: Session, token: bytes) -> bytes | None:
    """A handshake v0 client's bare token: the empty challenge frame, or None (connection ends)."""
    session.raw_token_next = False
    assert session.sasl is not None and session.mechanism is not None
    try:
        principal = session.sasl.authenticate(session.mechanism, token)
    except LakelogError as exc:
        refused(session, exc, count=True)
        return None
    authenticated(session, principal)
    return wire.SIZE.pack(0)


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
