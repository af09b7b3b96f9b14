"""A bare Kafka protocol socket for tests that send what no client library would."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32


class RawConnection:
    def __init__(self, address: str, timeout_s: float = 30) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self, api_key: int, version: int, body: bytes, flexible: bool | None = None) -> bytes:
        """A request frame: size, header (v1 or v2 as the version needs), then ``body``."""
        self.correlation += 1
        if flexible is None:
            flexible = bool(load_request_schema(api_key, version).__flexible__)
        header = io.BytesIO()
        key, ver, correlation = i16(api_key), i16(version), i32(self.correlation)
        if flexible:
            entity_writer(HeaderV2)(
                header,
                HeaderV2(
                    request_api_key=key,
                    request_api_version=ver,
                    correlation_id=correlation,
                    client_id="raw-test",
                ),
            )
        else:
            entity_writer(HeaderV1)(
                header,
                HeaderV1(
                    request_api_key=key,
                    request_api_version=ver,
                    correlation_id=correlation,
                    client_id="raw-test",
                ),
            )
        payload = header.getvalue() + body
        return struct.pack(">i", len(payload)) + payload

    def request(self, api_key: int, version: int, entity: Any) -> Any:
        """Send a kio request entity; the decoded response entity."""
        body = io.BytesIO()
        entity_writer(type(entity))(body, entity)
        self.send_bytes(self.frame(api_key, version, body.getvalue()))
        return self.read_response(api_key, version)

    def read_frame(self) -> bytes | None:
        """The next response frame, or None if the broker closed the connection."""
        prefix = self._read_exactly(4)
        if prefix is None:
            return None
        (size,) = struct.unpack(">i", prefix)
        return self._read_exactly(size)

    def read_response(self, api_key: int, version: int) -> Any:
        frame = self.read_frame()
        if frame is None:
            raise ConnectionError("the broker closed the connection")
        schema = load_response_schema(api_key, version)
        # Response header: correlation id, then tagged fields when flexible (not ApiVersions).
        offset = 4 + (1 if schema.__flexible__ and api_key != 18 else 0)
        entity, _ = entity_reader(schema)(frame, offset)
        return entity

    def closed_by_broker(self) -> bool:
        """True once the broker has closed its side (reads return EOF)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def _read_exactly(self, n: int) -> bytes | None:
        chunks = []
        while n:
            try:
                chunk = self.sock.recv(n)
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)
