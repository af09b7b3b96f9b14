"""Kafka's ``listeners`` and ``advertised.listeners``: where to bind, what to tell clients.

Pure. A listener is ``NAME://host:port``, its name its security protocol (Kafka's
default ``listener.security.protocol.map``). Metadata and FindCoordinator answer
the advertised addresses of the client's listener, so a broker behind NAT or in
a container advertises what clients can reach.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakelog.errors import InvalidConfigError

if TYPE_CHECKING:
    from server.settings import BrokerSettings

DEFAULT_PORT = 9092
PLAINTEXT = "PLAINTEXT"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SASL_PLAINTEXT, SASL_SSL)
#: The protocols whose clients authenticate with SASL.
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})
#: Bind addresses meaning "every interface", never an address to give out.
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


@dataclass(frozen=True)
class Listener:
    """One listener; its name is its security protocol."""

    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_listeners(text: str, setting: str = "kafka_listeners") -> list[Listener]:
    """``PLAINTEXT://host:port,SASL_PLAINTEXT://host:port`` → listeners; names are unique."""
    listeners: list[Listener] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port_text = rest.rpartition(":")
        if not sep or not colon or not port_text.isdigit():
            raise InvalidConfigError(f"{setting}: {item!r} is not of the form NAME://host:port")
        name = name.upper()
        if name not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(
                f"{setting}: listener {name!r} is not one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        port = int(port_text)
        if port > 65535:
            raise InvalidConfigError(f"{setting}: port {port} of {item!r} is out of range")
        if any(existing.name == name for existing in listeners):
            raise InvalidConfigError(f"{setting}: listener {name} is given twice")
        listeners.append(Listener(name, host.strip("[]"), port))
    return listeners


def default_protocol(settings: BrokerSettings) -> str:
    """The protocol of a listener given by port only: with authentication, SASL_SSL when
    the broker has a certificate (credentials never cross the network in clear)."""
    if settings.auth_mode == "none":
        return PLAINTEXT
    return SASL_SSL if settings.ssl_certfile and settings.ssl_keyfile else SASL_PLAINTEXT


def advertised(bound: list[Listener], advertised_setting: str | None) -> dict[str, str]:
    """Per listener name, the address clients are told.

    An advertised listener overrides its bound one; a bound listener on a
    wildcard interface advertises the machine's name, as Kafka does.
    """
    given = {
        item.name: item
        for item in parse_listeners(advertised_setting or "", "kafka_advertised_listeners")
    }
    unknown = set(given) - {b.name for b in bound}
    if unknown:
        raise InvalidConfigError(
            f"kafka_advertised_listeners names {sorted(unknown)}, which are not listeners"
        )
    out: dict[str, str] = {}
    for listener in bound:
        chosen = given.get(listener.name, listener)
        if chosen.host in WILDCARD_HOSTS:
            chosen = Listener(chosen.name, socket.getfqdn(), chosen.port)
        out[listener.name] = chosen.address
    return out


def listeners_to_bind(settings: BrokerSettings) -> list[Listener]:
    """The listeners to bind, each with a security protocol that fits ``auth_mode``.

    With authentication on every Kafka client must authenticate; with it off
    there are no credentials to check SASL against.
    """
    if settings.kafka_listeners == "":
        return []
    secured = settings.auth_mode != "none"
    if settings.kafka_listeners is None:
        return [Listener(default_protocol(settings), settings.host, DEFAULT_PORT)]
    listeners = parse_listeners(settings.kafka_listeners)
    for listener in listeners:
        if secured and listener.name == PLAINTEXT:
            raise InvalidConfigError(
                f"kafka_listeners has a PLAINTEXT listener while auth_mode="
                f"{settings.auth_mode}: it would serve Kafka clients without authentication; "
                "use SASL_PLAINTEXT://host:port or SASL_SSL://host:port"
            )
        if not secured and listener.name in SASL_PROTOCOLS:
            raise InvalidConfigError(
                f"kafka_listeners has a {listener.name} listener while "
                "auth_mode=none: there are no credentials to check; set auth_mode (api_key, "
                "jwt or any) or use PLAINTEXT"
            )
        if listener.name == SASL_SSL and not (settings.ssl_certfile and settings.ssl_keyfile):
            raise InvalidConfigError(
                "kafka_listeners has a SASL_SSL listener: it needs ssl_certfile and ssl_keyfile "
                "(the broker's certificate)"
            )
    return listeners
