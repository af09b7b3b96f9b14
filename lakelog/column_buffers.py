"""Arrow columns read straight off their buffers with numpy, without compute kernels.

Each Arrow compute kernel gives up the GIL while it runs and then waits to
get it back; on a busy broker (an event loop and segment writers wanting the
GIL) that wait cost far more than the arithmetic of the small columns a
produce request or a segment has. These readers only look at the validity,
offsets and values buffers, holding the GIL throughout.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa


def binary_lengths(column: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """Byte length of every binary value (0 for null), from the offsets buffers."""
    pieces = [np.zeros(0, np.int64)]
    for chunk in column.chunks:
        n, start = len(chunk), chunk.offset
        if chunk.null_count == n:
            pieces.append(np.zeros(n, np.int64))
            continue
        validity, offsets = chunk.buffers()[:2]
        ends = np.frombuffer(offsets, dtype=np.int32, count=n + 1, offset=start * 4)
        lengths = np.diff(ends).astype(np.int64)
        if chunk.null_count:
            lengths[validity_bits(validity, start, n) == 0] = 0
        pieces.append(lengths)
    return np.concatenate(pieces)


def int64_values(column: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """The values of a 64-bit integer or timestamp column that has no null."""
    if column.null_count:
        raise ValueError("int64_values reads columns without nulls")
    pieces = [_values(chunk) for chunk in column.chunks]
    if len(pieces) == 1:
        return pieces[0]
    return np.concatenate(pieces) if pieces else np.zeros(0, np.int64)


def int64_range(column: pa.ChunkedArray) -> tuple[int, int] | None:
    """The lowest and highest value of a 64-bit integer or timestamp column (a timestamp's
    in its unit), nulls skipped; None when every value is null."""
    pieces = []
    for chunk in column.chunks:
        n = len(chunk)
        if chunk.null_count == n:
            continue
        values = _values(chunk)
        if chunk.null_count:
            values = values[validity_bits(chunk.buffers()[0], chunk.offset, n) == 1]
        pieces.append(values)
    if not pieces:
        return None
    every = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    return int(every.min()), int(every.max())


def _values(chunk: pa.Array) -> npt.NDArray[np.int64]:
    """A chunk's values buffer as int64, nulls included as whatever bytes they hold."""
    values = chunk.buffers()[1]
    return np.frombuffer(values, dtype=np.int64, count=len(chunk), offset=chunk.offset * 8)


def validity_bits(validity: pa.Buffer, start: int, n: int) -> npt.NDArray[np.uint8]:
    """1 for each valid row of a chunk (Arrow's little-endian validity bitmap), 0 for a null."""
    bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
    return bits[start : start + n]
