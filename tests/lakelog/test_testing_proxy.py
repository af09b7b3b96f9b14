"""The fault proxy's choice of the request whose answer it drops (no traffic needed)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from lakelog.testing.proxy import TcpProxy, _Connection

PUT = rb"PUT /b/t/_delta_log/\d{20}\.json "


@pytest.fixture
def connection() -> Iterator[_Connection]:
    client, upstream = socket.socketpair()
    try:
        yield _Connection(client, upstream)
    finally:
        client.close()
        upstream.close()


def _line(version: int) -> bytes:
    return b"PUT /b/t/_delta_log/%020d.json HTTP/1.1\r\nHost: s3\r\n\r\n" % version


def test_a_line_split_between_reads_arms_the_drop(connection: _Connection) -> None:
    proxy = TcpProxy("127.0.0.1", 1)
    proxy.drop_response_to(PUT)
    line = _line(7)
    proxy._arm(connection, line[:20])
    assert connection.dropping is None
    proxy._arm(connection, line[20:])
    assert connection.dropping is not None and b"%020d" % 7 in connection.dropping


def test_an_earlier_requests_line_does_not_arm_the_next_request(
    connection: _Connection,
) -> None:
    proxy = TcpProxy("127.0.0.1", 1)
    proxy._arm(connection, _line(1))  # sent before the drop was asked for
    proxy.drop_response_to(PUT)
    proxy._arm(connection, b"GET /b/t/_delta_log/ HTTP/1.1\r\n\r\n")
    assert connection.dropping is None
    proxy._arm(connection, _line(2))
    assert connection.dropping is not None and b"%020d" % 2 in connection.dropping
