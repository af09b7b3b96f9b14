"""``lakelog broker start``: run one broker with uvicorn.

Registered into the ``lakelog`` command through the ``lakelog.commands``
entry point, so the core package never imports the server.
"""

from __future__ import annotations

import argparse
import logging
import socket
import ssl
import sys
from typing import TYPE_CHECKING

from lakelog.cli.common import ROOT_ENV, ROOT_KINDS, require_root_setting
from lakelog.errors import InvalidConfigError, LakelogError
from server.kafka.listeners import default_protocol, listeners_to_bind

if TYPE_CHECKING:  # the broker itself loads when it starts, not for `lakelog --help`
    import uvicorn

    from server.settings import BrokerSettings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("broker", help="run a broker (HTTP produce/fetch/admin)")
    actions = parser.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    start = actions.add_parser("start", help="start a broker in the foreground")
    add_start_arguments(start)
    start.set_defaults(run=run_start)


def add_start_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="broker config file (.properties or .json; default: none)")
    parser.add_argument(
        "--root",
        help=f"storage root URL: {ROOT_KINDS} (default: ${ROOT_ENV}, else root= in --config; "
        "one of them is required)",
    )
    parser.add_argument("--host", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="HTTP port (default 8082)")
    parser.add_argument("--broker-id", help="broker identity (default: random)")
    parser.add_argument("--advertised-url", help="URL clients should use for this broker")
    parser.add_argument(
        "--kafka-port",
        help="Kafka protocol port on --host (default 9092; 'off': no Kafka listener). "
        "Shorthand for kafka_listeners=PLAINTEXT://<host>:<port> (SASL_PLAINTEXT when "
        "auth_mode is not none, SASL_SSL if the broker also has ssl_certfile)",
    )
    parser.add_argument("--linger-ms", type=int, help="group-commit linger (default 5)")
    parser.add_argument("--log-level", help="debug, info, warning, error (default info)")


def with_kafka_port(settings: BrokerSettings, port: str | None) -> BrokerSettings:
    """``--kafka-port``: a listener on the broker's interface at that port, or 'off'.

    PLAINTEXT, or SASL_SSL / SASL_PLAINTEXT when ``auth_mode`` asks clients to
    authenticate (``server.kafka.listeners.default_protocol``).
    """

    if port is None:
        return settings
    if port.strip().lower() == "off":
        return settings.model_copy(update={"kafka_listeners": ""})
    if not port.isdigit() or int(port) > 65535:
        raise InvalidConfigError(f"--kafka-port must be a port number or 'off', got {port!r}")
    listeners = f"{default_protocol(settings)}://{settings.host}:{port}"
    return settings.model_copy(update={"kafka_listeners": listeners})


def require_free_address(host: str, port: int, what: str, flag: str) -> None:
    """Refuse to start, in one line naming the address and the flag to change, when another
    process listens where the broker would. Binding as the servers do (SO_REUSEADDR), then
    releasing: the servers bind again at once."""
    if port == 0:
        return
    try:
        found = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise InvalidConfigError(f"cannot listen for {what} on {host!r}: {exc}") from None
    for family, kind, proto, _name, address in found[:1]:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                shown = f"[{host}]:{port}" if ":" in host else f"{host or '*'}:{port}"
                raise InvalidConfigError(
                    f"cannot listen for {what} on {shown}: {exc.strerror or exc}; "
                    f"choose another port with {flag}"
                ) from None


def kafka_listeners_text(settings: BrokerSettings) -> str:
    listeners = listeners_to_bind(settings)
    return ", ".join(f"{item.name}://{item.address}" for item in listeners)


def run_start(args: argparse.Namespace) -> int:
    import uvicorn

    from server.app import create_app
    from server.internal_http_logs import log_internal_calls_at_debug
    from server.settings import load_settings

    settings = load_settings(
        args.config,
        root=args.root,
        host=args.host,
        port=args.port,
        broker_id=args.broker_id,
        advertised_url=args.advertised_url,
        linger_ms=args.linger_ms,
        log_level=args.log_level,
    )
    settings = with_kafka_port(settings, args.kafka_port)
    require_root_setting(settings)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    log_internal_calls_at_debug()
    require_free_address(settings.host, settings.port, "HTTP", "--port (port=)")
    for listener in listeners_to_bind(settings):
        require_free_address(
            listener.host,
            listener.port,
            f"Kafka {listener.name}",
            "--kafka-port (kafka_listeners=)",
        )
    print(
        f"lakelog broker {settings.broker_id} serving {settings.root} on {settings.url}"
        + (f", Kafka {kafka}" if (kafka := kafka_listeners_text(settings)) else ""),
        flush=True,
    )
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=10,
        ssl_certfile=settings.ssl_certfile,
        ssl_keyfile=settings.ssl_keyfile,
        ssl_ca_certs=settings.ssl_ca_certs,
        # A CA bundle means mutual TLS: clients must present a certificate it signed.
        ssl_cert_reqs=ssl.CERT_REQUIRED if settings.ssl_ca_certs else ssl.CERT_NONE,
    )
    uvicorn.Server(config).run(sockets=[listening_socket(config)])
    return 0


def listening_socket(config: uvicorn.Config) -> socket.socket:
    """The HTTP socket, bound and listening before the application starts.

    The broker enters the registry during its startup, and clients then
    connect to it at once. A socket that listens from the start queues those
    connections until the broker serves; a refused one would make the client
    mark the broker failed.
    """
    sock = config.bind_socket()
    sock.listen(config.backlog)
    return sock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server", description="Start a broker.")
    add_start_arguments(parser)
    try:
        return run_start(parser.parse_args(argv))
    except LakelogError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
