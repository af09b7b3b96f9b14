"""How a CLI tool reaches its brokers: which URLs, which timeouts, and failing fast.

A tool first waits, for the connect timeout only, until a broker answers: the
clients retry network errors for the whole API timeout, right once a cluster
was reached and wrong before, where a wrong address would hang the command for
a minute. So it fails fast, naming every URL tried and why.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
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
from lakelog.client.retry import Backoff
from lakelog.client.structs import TopicPartition
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
    """A connection with the command's timeouts (not yet known to reach anything)."""
    return Connection(
        settings.bootstrap,
        connect_timeout_ms=settings.connect_timeout_ms,
        request_timeout_ms=settings.request_timeout_ms,
    )


def wait_for_cluster(connection: Connection, settings: ClientSettings) -> None:
    """Probe the bootstrap brokers until one answers or the connect timeout has passed:
    each once with the full timeout, later passes with what is left."""
    backoff = Backoff()
    deadline = time.monotonic() + settings.connect_timeout_ms / 1000
    pending = connection.bootstrap_servers
    causes: dict[str, str] = {}
    attempts = dict.fromkeys(pending, 0)
    passes = 0
    while pending:
        remaining = None if passes == 0 else deadline - time.monotonic()
        failures = connection.probe(pending, connect_timeout_s=remaining)
        if not failures:
            return
        for failure in failures:
            causes[failure.url] = failure.cause
            attempts[failure.url] += 1
        pending = [f.url for f in failures if not f.final]
        passes += 1
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if pending:
            time.sleep(min(backoff.delay_s(passes), remaining))
    tried = "; ".join(
        f"{url} ({causes[url]}, {n} attempt{'s' if n > 1 else ''})" for url, n in attempts.items()
    )
    raise NetworkError(
        f"no broker reachable within {settings.connect_timeout_ms / 1000:g} s: {tried}. "
        f"{settings.advice} (--connect-timeout-ms waits longer)",
        brokers=list(attempts),
    )


@contextlib.contextmanager
def connect(settings: ClientSettings) -> Iterator[Connection]:
    """A connection to a cluster that answered; NETWORK_EXCEPTION saying what to check if none."""
    connection = open_connection(settings)
    try:
        wait_for_cluster(connection, settings)
        yield connection
    finally:
        connection.close()


def build_client(factory: Callable[[], C], options: str) -> C:
    """Build a client; its refusal of a setting (ValueError) becomes INVALID_CONFIG."""
    try:
        return factory()
    except ValueError as exc:
        raise InvalidConfigError(f"{options}: {exc}") from None


def partitions(admin: AdminClient, topics: Iterable[str]) -> list[TopicPartition]:
    """Every partition of ``topics``, in order: what a tool reads when it is given topics."""
    return [TopicPartition(t, p) for t in topics for p in sorted(admin.topic_offsets(t))]


@contextlib.contextmanager
def admin_client(args: argparse.Namespace) -> Iterator[AdminClient]:
    """An admin client over a cluster that answered (see ``connect``)."""
    settings = client_settings(args)
    with connect(settings) as connection:
        yield admin_over(settings, connection)


def admin_over(settings: ClientSettings, connection: Connection) -> AdminClient:
    """An admin client with the command's API timeout, sharing its ``connection``."""
    return AdminClient(
        settings.bootstrap,
        default_api_timeout_ms=settings.default_api_timeout_ms,
        connection=connection,
    )
