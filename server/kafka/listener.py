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
import ssl

from lakelog.errors import InvalidConfigError
from server.broker import Broker
from server.kafka.cluster import KafkaCluster
from server.kafka.connection import serve_connection
from server.kafka.context import Session
from server.kafka.dispatch import Dispatcher
from server.kafka.handlers import HANDLERS
from server.kafka.listeners import (
    SASL_PROTOCOLS,
    SASL_SSL,
    Listener,
    advertised,
    listeners_to_bind,
)
from server.kafka.sasl import SaslCredentials
from server.security.state import BrokerSecurity

log = logging.getLogger(__name__)

#: How long a stopping broker lets its Kafka connections finish their answers.
STOP_GRACE_S = 5.0
#: Connections the kernel queues per listener before the broker accepts them (asyncio's).
LISTEN_BACKLOG = 100


def listen_now(server: asyncio.Server) -> None:
    """Make a server created with ``start_serving=False`` listen: connections then queue
    until it serves, instead of being refused."""
    for bound in server.sockets:
        # A duplicate of the descriptor: listening is a state of the socket, not of the
        # descriptor, and closing the duplicate leaves the server's own open.
        with socket.fromfd(bound.fileno(), bound.family, bound.type) as same:
            same.listen(LISTEN_BACKLOG)


class KafkaListeners:
    def __init__(self, broker: Broker, security: BrokerSecurity | None = None) -> None:
        self.broker = broker
        self.security = security
        self.listeners = listeners_to_bind(broker.settings)
        self.credentials = (
            SaslCredentials(
                security.mode, security.api_keys, security.verifier, security.scram_credential
            )
            if security is not None and security.enabled
            else None
        )
        sasl_listener = any(item.name in SASL_PROTOCOLS for item in self.listeners)
        if sasl_listener and (self.credentials is None or not self.credentials.mechanisms()):
            raise InvalidConfigError(
                "a SASL Kafka listener needs api_keys_file (PLAIN) or a JWT key (OAUTHBEARER)"
            )
        self.cluster = KafkaCluster(broker)
        self.dispatcher = Dispatcher(HANDLERS)
        self._servers: list[asyncio.Server] = []
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    async def bind(self) -> dict[str, str]:
        """Bind every listener, listening but not serving yet; the advertised address of each.

        The broker registers (with these addresses) before it serves: a client that
        connects in between waits in the listen queue until ``start``.
        """
        bound: list[Listener] = []
        for listener in self.listeners:
            server = await asyncio.start_server(
                functools.partial(self._accept, listener=listener.name),
                host=listener.host or None,
                port=listener.port,
                start_serving=False,
                reuse_address=True,
                backlog=LISTEN_BACKLOG,
                ssl=self._tls() if listener.name == SASL_SSL else None,
            )
            listen_now(server)
            port = server.sockets[0].getsockname()[1]
            bound.append(Listener(listener.name, listener.host, port))
            self._servers.append(server)
        self.bound = bound
        addresses = advertised(bound, self.broker.settings.kafka_advertised_listeners)
        self.broker.registry.kafka_addresses = addresses
        return addresses

    def _tls(self) -> ssl.SSLContext:
        """The broker's HTTPS certificate; clients authenticate with SASL, not certificates."""
        settings = self.broker.settings
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(str(settings.ssl_certfile), str(settings.ssl_keyfile))
        except (OSError, ssl.SSLError) as exc:
            raise InvalidConfigError(
                f"SASL_SSL listener: cannot load ssl_certfile/ssl_keyfile: {exc}"
            ) from None
        return context

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
        sasl = self.credentials if listener in SASL_PROTOCOLS else None
        session = Session(self.broker, self.cluster, listener, host, self.security, sasl)
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
