"""What a Kafka request handler is given: its connection's session and the request."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema

from lakelog.security.acl import ANONYMOUS
from lakelog.security.quota import QuotaKind
from server.kafka.build import build

if TYPE_CHECKING:
    from server.broker import Broker
    from server.kafka.cluster import KafkaCluster
    from server.kafka.sasl import SaslCredentials, SaslExchange
    from server.kafka.wire import RequestHeader
    from server.security.state import BrokerSecurity


@dataclass
class Session:
    """One client connection: which broker and listener it reached, from where, and as whom.

    On a SASL listener (``sasl`` set) it starts unauthenticated; on a PLAINTEXT
    one (authentication off) the principal is ``User:ANONYMOUS``.
    """

    broker: Broker
    cluster: KafkaCluster
    listener: str
    client_host: str
    security: BrokerSecurity | None = None
    sasl: SaslCredentials | None = None
    principal: str = ANONYMOUS
    authenticated: bool = False
    #: The mechanism SaslHandshake chose (None before the handshake).
    mechanism: str | None = None
    #: The authentication under way since the handshake: a SCRAM exchange keeps its
    #: nonces and the user between its two SaslAuthenticate steps here.
    exchange: SaslExchange | None = None
    #: SaslHandshake v0 was used: the next frame is a bare SASL token, not a request.
    raw_token_next: bool = False
    #: Why the connection ends once the answers so far are written (None: it goes on).
    closing: str | None = None
    #: Event-loop time before which no further request is read (a quota throttle).
    muted_until: float = 0.0

    def __post_init__(self) -> None:
        if self.sasl is None:
            self.authenticated = True

    def mute(self, throttle_ms: int) -> None:
        """Read no further request of this connection for ``throttle_ms`` (Kafka's mute)."""
        if throttle_ms > 0:
            until = asyncio.get_running_loop().time() + throttle_ms / 1000
            self.muted_until = max(self.muted_until, until)


@dataclass
class RequestContext:
    session: Session
    header: RequestHeader
    #: Set once the request's effect is queued in arrival order (``apis.ORDERED``).
    accepted: asyncio.Event = field(default_factory=asyncio.Event)
    #: The longest quota throttle this request ran into: its answer's throttle_time_ms.
    throttle_ms: int = 0

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def broker(self) -> Broker:
        return self.session.broker

    @property
    def principal(self) -> str:
        return self.session.principal

    def response(self, **values: Any) -> Any:
        """The request's response entity, in its API's and version's layout (``build``)."""
        schema = load_response_schema(self.header.api_key, self.version)
        return build(schema, throttle_time=self.throttle_ms, **values)

    def charge(self, kind: QuotaKind, value: float) -> None:
        """Count ``value`` against the requester's ``kind`` quota (user and client id)."""
        security = self.session.security
        if security is None or not security.quotas.active:
            return
        client_id = (self.header.client_id or "")[:255]
        throttle = security.quotas.record(kind, self.session.principal, client_id, value)
        self.throttle_ms = max(self.throttle_ms, throttle)


#: Answers one API: returns the kio response entity, or None for no response (acks=0).
Handler = Callable[[RequestContext, Any], Awaitable[Any]]
