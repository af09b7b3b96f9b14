"""Confluent's wire format: magic byte 0, a 4-byte big-endian schema id, the payload.

Protobuf payloads carry the message indexes after the id; that part belongs to
the Protobuf format. Errors name what is wrong, for the record-level error a
refused producer reads.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt
import pyarrow as pa

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


def framed_ids(
    column: pa.Array,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each row's schema id (-1 where not framed: null, short, other magic byte) and where
    its payload starts and ends in the column's data buffer."""
    n = len(column)
    offsets = np.frombuffer(column.buffers()[1], np.int32, n + 1, column.offset * 4)
    data_buffer = column.buffers()[2]
    data = (
        np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    )
    starts, ends = offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)
    framed = (ends - starts) >= HEADER_SIZE
    if column.null_count:
        framed &= column.is_valid().to_numpy(zero_copy_only=False)
    ids = np.full(n, -1, np.int64)
    at = starts[framed]
    if len(at):
        magic_ok = data[at] == MAGIC
        b = [data[at + k].astype(np.int64) for k in range(1, 5)]
        found = (b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]
        ids[np.flatnonzero(framed)[magic_ok]] = found[magic_ok]
    return ids, starts + HEADER_SIZE, ends
