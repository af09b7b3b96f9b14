"""A broker address nobody answers at: every tool fails at once, saying what it tried and why.

Kafka users habitually type ``localhost:9092``. Nothing answers there, and a
request's retries (a minute, right for a broker that restarts) must not apply
before any broker was ever reached: the tool tries for the connect timeout (a
few seconds unless raised) and then names each URL with its cause. Addresses
here are a refused loopback port, a listener whose accept queue is full (the
connection attempt times out), and a name in the reserved ``.invalid`` domain.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakelog.cli import build_parser
from lakelog.cli.cluster import client_settings, open_connection
from lakelog.errors import InvalidConfigError
from lakelog.testing.brokers import free_port
from tests.cli.tool import lakelog

pytestmark = pytest.mark.integration  # each test runs the lakelog CLI as a process

#: One command per tool that talks to brokers.
TOOLS = [
    ["topics", "--list"],
    ["get-offsets"],
    ["consumer-groups", "--list"],
    ["acls", "--list"],
    ["client-quotas", "--describe"],
    ["console-producer", "--topic", "t"],
    ["console-consumer", "--topic", "t"],
]


@pytest.mark.parametrize("command", TOOLS, ids=lambda c: c[0])
def test_every_tool_fails_fast_naming_the_url_and_cause(command: list[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = lakelog(
        *command, "--bootstrap-server", url, "--connect-timeout-ms", "200", stdin="x\n", check=False
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # one line: no traceback, no retry chatter
    assert lines[0].startswith("Error: [NETWORK_EXCEPTION] no broker reachable within 0.2 s: ")
    assert f"{url} (connection refused" in lines[0]
    assert "--bootstrap-server" in lines[0] and "--connect-timeout-ms" in lines[0]


def test_default_timeout_and_every_url_with_its_cause() -> None:
    """Kafka's habitual address, twice over: the message names both URLs and both causes."""
    refused = f"127.0.0.1:{free_port()}"
    servers = f"{refused},no-such-broker.invalid:9092"
    done = lakelog("topics", "--bootstrap-server", servers, "--list", check=False)
    assert done.returncode == 1
    message = done.stderr.strip()
    assert "Traceback" not in message
    assert "no broker reachable within 5 s" in message  # the default connect timeout
    assert f"http://{refused} (connection refused, " in message
    assert "http://no-such-broker.invalid:9092 (name not resolved" in message


@pytest.fixture
def unanswered_listener() -> Iterator[str]:
    """A loopback port whose accept queue is full, so new connection attempts time out."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    waiting = []
    for _ in range(3):
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(server.getsockname())
        waiting.append(client)
    host, port = server.getsockname()
    yield f"{host}:{port}"
    for client in waiting:
        client.close()
    server.close()


def test_connection_timeout_is_named_and_configurable(
    unanswered_listener: str, tmp_path: Path
) -> None:
    config = tmp_path / "client.properties"
    config.write_text("socket.connection.setup.timeout.ms=400\n")
    done = lakelog(
        "consumer-groups",
        "--list",
        "--bootstrap-server",
        unanswered_listener,
        "--command-config",
        str(config),
        check=False,
    )
    assert done.returncode == 1
    assert "no broker reachable within 0.4 s" in done.stderr
    assert f"http://{unanswered_listener} (connection timed out" in done.stderr


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_options_reach_the_client_settings(tmp_path: Path) -> None:
    plain = client_settings(parse("topics", "--list"))
    assert (plain.connect_timeout_ms, plain.request_timeout_ms) == (5_000, 30_000)
    assert plain.default_api_timeout_ms == 60_000

    config = tmp_path / "client.properties"
    config.write_text(
        "socket.connection.setup.timeout.ms=12000\nrequest.timeout.ms=45000\n"
        "default.api.timeout.ms=90000\nclient.id=ops\n"
    )
    from_file = client_settings(parse("topics", "--list", "--command-config", str(config)))
    assert from_file.connect_timeout_ms == 12_000
    assert from_file.request_timeout_ms == 45_000
    assert from_file.default_api_timeout_ms == 90_000
    settings = client_settings(
        parse("topics", "--list", "--command-config", str(config), "--connect-timeout-ms", "7")
    )
    assert settings.connect_timeout_ms == 7  # the flag beats the file
    connection = open_connection(settings)
    try:
        assert connection.connect_timeout_s == 0.007
        assert connection.request_timeout_s == 45.0
    finally:
        connection.close()

    for bad in ("0", "-1", "soon"):
        config.write_text(f"socket.connection.setup.timeout.ms={bad}\n")
        with pytest.raises(InvalidConfigError, match=r"socket\.connection\.setup\.timeout\.ms"):
            client_settings(parse("topics", "--list", "--command-config", str(config)))
    config.write_text("connect.timeout=1\n")
    with pytest.raises(InvalidConfigError, match=r"unsupported property 'connect\.timeout'"):
        client_settings(parse("topics", "--list", "--command-config", str(config)))
