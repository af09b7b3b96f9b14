"""How a CLI tool reaches its brokers: which URLs, which timeouts, and failing fast.

A tool first makes sure a broker answers (``Connection.bootstrap``) within the
connect timeout, a few seconds by default, and only then runs its requests
with the clients' usual retries. A wrong address therefore fails at once with
one line naming every URL tried and why, instead of retrying for a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from lakelog.cli.common import (
    BOOTSTRAP_ENV,
    DEFAULT_CONNECT_TIMEOUT_MS,
    bootstrap_urls,
    timeout_options,
)
from lakelog.client.admin import AdminClient
from lakelog.client.connection import Connection
from lakelog.client.errors import NetworkError
from lakelog.errors import InvalidConfigError

C = TypeVar("C")


@dataclass(frozen=True)
class ClientSettings:
    """What the clients of one command are built with."""

    bootstrap: list[str]
    #: what to check when no broker answers: where ``bootstrap`` came from
    advice: str
    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS
    request_timeout_ms: int = 30_000
    default_api_timeout_ms: int = 60_000


def client_settings(args: argparse.Namespace) -> ClientSettings:
    """Settings from ``--bootstrap-server``, ``--connect-timeout-ms``, ``--command-config``."""
    flag = getattr(args, "bootstrap_server", None)
    if flag:
        advice = "Check --bootstrap-server: is a lakelog broker running there?"
    elif os.environ.get(BOOTSTRAP_ENV):
        advice = f"Check ${BOOTSTRAP_ENV}: is a lakelog broker running there?"
    else:
        advice = (
            f"That is the default, as neither --bootstrap-server nor ${BOOTSTRAP_ENV} is set: "
            "start a broker (lakelog broker start --root DIR) or name yours."
        )
    return ClientSettings(bootstrap_urls(flag), advice, **timeout_options(args))


def open_connection(settings: ClientSettings) -> Connection:
    return Connection(
        settings.bootstrap,
        connect_timeout_ms=settings.connect_timeout_ms,
        request_timeout_ms=settings.request_timeout_ms,
    )


@contextlib.contextmanager
def connect(settings: ClientSettings) -> Iterator[Connection]:
    """A connection to a cluster that answered; NETWORK_EXCEPTION saying what to check if none."""
    connection = open_connection(settings)
    try:
        try:
            connection.bootstrap(settings.connect_timeout_ms)
        except NetworkError as exc:
            raise NetworkError(
                f"{exc.message}. {settings.advice} (--connect-timeout-ms waits longer)",
                **exc.details,
            ) from None
        yield connection
    finally:
        connection.close()


def build_client(factory: Callable[[], C], options: str) -> C:
    """Build a client; its refusal of a setting (ValueError) becomes INVALID_CONFIG."""
    try:
        return factory()
    except ValueError as exc:
        raise InvalidConfigError(f"{options}: {exc}") from None


@contextlib.contextmanager
def admin_client(args: argparse.Namespace) -> Iterator[AdminClient]:
    """An admin client over a cluster that answered (see ``connect``)."""
    settings = client_settings(args)
    with connect(settings) as connection:
        yield AdminClient(
            settings.bootstrap,
            request_timeout_ms=settings.request_timeout_ms,
            default_api_timeout_ms=settings.default_api_timeout_ms,
            connection=connection,
        )
