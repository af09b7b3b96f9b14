"""Kafka's framing: a 4-byte big-endian size, a request header, a body.

Pure: bytes in, typed values out. Request and response layouts are kio's
(generated from Kafka's own message schemas); this module only picks the
header version a request uses and turns a response into its frame.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from lakelog.errors import CorruptRecordError, InvalidRequestError
from server.kafka.apis import API_VERSIONS

#: The size prefix of every frame.
SIZE = struct.Struct(">i")
#: api key, api version, correlation id: the first fields of every request header.
HEADER_PREFIX = struct.Struct(">hhi")

_read_header_v1 = entity_reader(RequestHeaderV1)
_read_header_v2 = entity_reader(RequestHeaderV2)
_write_response_header_v0 = entity_writer(ResponseHeaderV0)
_write_response_header_v1 = entity_writer(ResponseHeaderV1)


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id): readable in any version, even an unknown one."""
    if len(frame) < HEADER_PREFIX.size:
        raise CorruptRecordError(f"a request of {len(frame)} bytes has no request header")
    return HEADER_PREFIX.unpack_from(frame)


def decode_request(frame: bytes) -> tuple[RequestHeader, Any]:
    """Header and kio body entity of a request whose api key and version are supported.

    A frame that does not parse is refused: a client and broker that disagree
    on a layout must not act on a guess. Bytes past the body's end are ignored,
    as Kafka's broker ignores them (librdkafka's Metadata requests carry some).
    """
    api_key, api_version, _ = peek_header(frame)
    schema = load_request_schema(api_key, api_version)
    reader = _read_header_v2 if schema.__flexible__ else _read_header_v1
    try:
        header, used = reader(frame, 0)
        body, _ = entity_reader(schema)(frame, used)
    except Exception as exc:  # kio raises several types for malformed bytes
        raise InvalidRequestError(
            f"could not decode {schema.__name__} v{api_version}: {type(exc).__name__}: {exc}"
        ) from exc
    return RequestHeader(api_key, api_version, header.correlation_id, header.client_id), body


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """The whole response frame (size prefix included).

    ApiVersions answers always use response header v0, whatever the version,
    so that a client can read the answer before it knows what the broker speaks.
    """
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    flexible = body.__flexible__ and api_key != API_VERSIONS
    if flexible:
        _write_response_header_v1(buffer, ResponseHeaderV1(correlation_id=i32(correlation_id)))
    else:
        _write_response_header_v0(buffer, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    entity_writer(type(body))(buffer, body)
    frame = buffer.getbuffer()
    SIZE.pack_into(frame, 0, len(frame) - SIZE.size)
    return bytes(frame)
