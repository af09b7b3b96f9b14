"""The broker's Kafka listeners: one asyncio TCP server per configured listener.

Runs in the broker's event loop beside the HTTP app and shares its
``Broker`` (append pipeline, group-commit batcher, recent-batch cache,
long-poll wake-ups, group coordinator).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket

from lakelog.errors import InvalidConfigError
from server.broker import Broker
from server.kafka.cluster import KafkaCluster
from server.kafka.connection import serve_connection
from server.kafka.context import Session
from server.kafka.dispatch import Dispatcher
from server.kafka.handlers import HANDLERS
from server.kafka.listeners import Listener, advertised, configured_listeners
from server.settings import BrokerSettings

log = logging.getLogger(__name__)

#: How long a stopping broker lets its Kafka connections finish their answers.
STOP_GRACE_S = 5.0


def listeners_to_bind(settings: BrokerSettings) -> list[Listener]:
    """The configured listeners, unless they would bypass the broker's authentication.

    The Kafka listener has no SASL yet: with ``auth_mode`` other than none
    it would let anyone in without credentials. Then an unset
    ``kafka_listeners`` means no Kafka listener (a warning says so) and an
    explicit one is a configuration error, so a secured broker never serves
    its data unauthenticated.
    """
    if settings.kafka_listeners == "":
        return []
    if settings.auth_mode != "none":
        if settings.kafka_listeners is None:
            log.warning(
                "Kafka listener off: auth_mode=%s, and the Kafka listener does not "
                "authenticate clients yet",
                settings.auth_mode,
            )
            return []
        raise InvalidConfigError(
            f"kafka_listeners is set while auth_mode={settings.auth_mode}: the Kafka "
            "listener does not authenticate clients yet; set kafka_listeners empty"
        )
    return configured_listeners(settings.kafka_listeners, settings.host)


class KafkaListeners:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.listeners = listeners_to_bind(broker.settings)
        self.cluster = KafkaCluster(broker)
        self.dispatcher = Dispatcher(HANDLERS)
        self._servers: list[asyncio.Server] = []
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    async def bind(self) -> dict[str, str]:
        """Bind every listener (without serving yet); the advertised address of each."""
        bound: list[Listener] = []
        for listener in self.listeners:
            server = await asyncio.start_server(
                functools.partial(self._accept, listener=listener.name),
                host=listener.host or None,
                port=listener.port,
                start_serving=False,
                reuse_address=True,
            )
            port = server.sockets[0].getsockname()[1]
            bound.append(Listener(listener.name, listener.host, port))
            self._servers.append(server)
        self.bound = bound
        addresses = advertised(bound, self.broker.settings.kafka_advertised_listeners)
        self.broker.registry.kafka_addresses = addresses
        return addresses

    async def start(self) -> None:
        for server in self._servers:
            await server.start_serving()
        for listener in self.bound:
            log.info(
                "Kafka listener %s on %s:%d", listener.name, listener.host or "*", listener.port
            )

    async def stop(self) -> None:
        """Stop accepting, end every connection, and let answers in progress finish.

        Closing a connection's socket ends its read loop the way a client hanging
        up does; one still busy after ``STOP_GRACE_S`` is cancelled.
        """
        for server in self._servers:
            server.close()
        for writer in self._connections.values():
            writer.close()
        if self._connections:
            _, late = await asyncio.wait(list(self._connections), timeout=STOP_GRACE_S)
            if late:
                log.info(
                    "%d Kafka connections still answering after %.0f s; ending them",
                    len(late),
                    STOP_GRACE_S,
                )
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()

    async def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener: str
    ) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if peer else "unknown"
        session = Session(self.broker, self.cluster, listener, host)
        task = asyncio.current_task()
        if task is not None:
            self._connections[task] = writer
        try:
            await serve_connection(
                reader,
                writer,
                session,
                self.dispatcher,
                self.broker.settings.kafka_max_request_bytes,
            )
        except asyncio.CancelledError:
            # Only ``stop`` cancels a connection, once the broker is shutting down;
            # asyncio's stream callback would report the cancellation as an error.
            log.debug("Kafka connection from %s ended by the broker's shutdown", host)
        finally:
            if task is not None:
                self._connections.pop(task, None)
