"""What a Kafka request handler is given: its connection's session and the request."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from server.broker import Broker
    from server.kafka.cluster import KafkaCluster
    from server.kafka.wire import RequestHeader


@dataclass
class Session:
    """One client connection: which broker and listener it reached, and from where."""

    broker: Broker
    cluster: KafkaCluster
    listener: str
    client_host: str


@dataclass
class RequestContext:
    session: Session
    header: RequestHeader
    #: Set once the request's effect is queued in arrival order (Produce sets it when
    #: every partition is submitted; other APIs are accepted as they start).
    accepted: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def broker(self) -> Broker:
        return self.session.broker


class Handler(Protocol):
    """Answers one API: returns the kio response entity, or None for no response (acks=0)."""

    async def __call__(self, ctx: RequestContext, body: Any, /) -> Any: ...
