"""SaslHandshake and SaslAuthenticate: a Kafka client proves its principal on a SASL listener.

Kafka's order: (ApiVersions,) SaslHandshake naming a mechanism, then one
SaslAuthenticate carrying the mechanism's bytes (PLAIN and OAUTHBEARER need
one round). A handshake v0 client sends those bytes as a bare frame instead
(``server.kafka.authentication.raw_token``). A failed step is answered with
its error code and message, logged without the credential, counted in
``lakelog_authentication_failures``, and ends the connection, as Kafka's
broker does. Re-authentication is not
offered (session lifetime 0): a second handshake is ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from lakelog.errors import IllegalSaslStateError, LakelogError
from server.kafka import wire
from server.kafka.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from server.kafka.authentication import authenticated, refused
from server.kafka.build import build
from server.kafka.context import RequestContext


async def sasl_handshake(ctx: RequestContext, body: Any) -> Any:
    session = ctx.session
    schema = wire.response_schema(SASL_HANDSHAKE, ctx.version)
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
        session.sasl.check_mechanism(body.mechanism)
    except LakelogError as exc:
        refused(session, exc, count=session.sasl is not None and not session.authenticated)
        return build(schema, error_code=exc.code, mechanisms=offered)
    session.mechanism = body.mechanism
    session.raw_token_next = ctx.version == 0
    return build(schema, error_code=0, mechanisms=offered)


async def sasl_authenticate(ctx: RequestContext, body: Any) -> Any:
    session = ctx.session
    schema = wire.response_schema(SASL_AUTHENTICATE, ctx.version)
    try:
        if session.sasl is None or session.authenticated or session.mechanism is None:
            raise IllegalSaslStateError(
                "SaslAuthenticate is answered once per connection, after a SaslHandshake on a "
                "SASL listener"
            )
        principal = session.sasl.authenticate(session.mechanism, bytes(body.auth_bytes))
    except LakelogError as exc:
        refused(session, exc, count=not isinstance(exc, IllegalSaslStateError))
        return build(
            schema,
            error_code=exc.code,
            error_message=exc.message,
            auth_bytes=b"",
            session_lifetime=0,
        )
    authenticated(session, principal)
    return build(schema, error_code=0, error_message=None, auth_bytes=b"", session_lifetime=0)
