"""Confluent's wire format: magic byte 0, a 4-byte big-endian schema id, the payload.

Protobuf payloads carry the message indexes after the id; that part belongs to
the Protobuf format. Errors name what is wrong, for the record-level error a
refused producer reads.
"""

from __future__ import annotations

import struct

MAGIC = 0
HEADER_SIZE = 5
_HEADER = struct.Struct(">bI")


def frame(schema_id: int, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, schema_id) + payload


def unframe(data: bytes | memoryview) -> tuple[int, memoryview]:
    """The schema id and the payload, or ``ValueError`` saying why the framing is wrong."""
    view = memoryview(data)
    if len(view) == 0:
        raise ValueError("empty: a schema'd record starts with magic byte 0 and a schema id")
    if view[0] != MAGIC:
        raise ValueError(f"unknown magic byte {view[0]}: a schema'd record starts with 0")
    if len(view) < HEADER_SIZE:
        raise ValueError(
            f"{len(view)} bytes: too short for the magic byte and the 4-byte schema id"
        )
    _, schema_id = _HEADER.unpack_from(view)
    return schema_id, view[HEADER_SIZE:]
