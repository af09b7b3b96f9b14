"""Kafka's zigzag varints for whole columns at once, as Arrow binary arrays.

A zigzag varint folds the sign into the lowest bit, then writes 7 bits per
byte, the high bit set while more follow. One by one they would cost Python
objects per record (docs/architecture.md, "Kafka protocol codecs"), so each
column is encoded with a few numpy operations per 7-bit group. The bytes go
into Arrow binary views, which keep up to 12 bytes inline: two 64-bit words per
row, consecutive fields sharing a view while they fit. Cast to ``binary``,
``binary_join_element_wise`` interleaves them with the keys and values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

#: Bytes an Arrow binary view holds inline, in place of a pointer.
INLINE_BYTES = 12

_U64 = np.uint64
_TO_BINARY = pc.CastOptions(pa.binary())
#: By varint size, the high bits of its first 8 bytes (set on every byte but the last).
_MORE_LOW = np.array(
    [sum(0x80 << (8 * k) for k in range(min(size - 1, 8))) for size in range(11)], _U64
)
#: By varint size, the high bits of its 9th and 10th bytes.
_MORE_HIGH = np.array([0x80 if size == 10 else 0 for size in range(11)], _U64)


class Varints:
    """One column of signed integers as varints: their zigzag values and their sizes."""

    __slots__ = ("sizes", "widest", "zigzag")

    def __init__(self, values: npt.NDArray[np.int64]) -> None:
        self.zigzag = ((values << 1) ^ (values >> 63)).view(_U64)
        self.sizes = np.ones(len(values), np.int64)
        largest = int(self.zigzag.max()) if len(values) else 0
        for shift in range(7, 64, 7):
            if largest < 1 << shift:
                break
            self.sizes += self.zigzag >= _U64(1 << shift)
        self.widest = int(self.sizes.max()) if len(values) else 1

    def bytes_as_words(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        """Each varint little-endian in two words: its bytes 1-8, then its bytes 9-10."""
        z = self.zigzag
        if self.widest == 1:
            return z.copy(), np.zeros(len(z), _U64)
        low = z & _U64(0x7F)
        for group in range(1, min(self.widest, 8)):
            # Bits 7g..7g+6 move to byte g: up by g bits.
            low |= (z & _U64(0x7F << (7 * group))) << _U64(group)
        low |= _MORE_LOW[self.sizes]
        high = np.zeros(len(z), _U64)
        if self.widest > 8:
            high = ((z >> _U64(56)) & _U64(0x7F)) | ((z >> _U64(63)) << _U64(8))
            high |= _MORE_HIGH[self.sizes]
        return low, high


def binary_columns(fields: Sequence[Varints]) -> list[pa.Array]:
    """Per row, the fields' varints one after another, as ``binary`` arrays to concatenate.

    Consecutive fields share an array while their widest varints fit in one
    view together; a 10-byte field shares with at most a 2-byte one.
    """
    columns: list[pa.Array] = []
    group: list[Varints] = []
    for field in fields:
        if group and sum(f.widest for f in group) + field.widest > INLINE_BYTES:
            columns.append(_views(group))
            group = []
        group.append(field)
    columns.append(_views(group))
    return columns


def _views(fields: Sequence[Varints]) -> pa.Array:
    """The fields' varints concatenated per row (12 bytes at most), as inline binary views."""
    low, high = fields[0].bytes_as_words()
    bits = (fields[0].sizes * 8).view(_U64)
    for field in fields[1:]:
        field_low, field_high = field.bytes_as_words()
        # A 128-bit shift by ``bits`` (8 to 88) of (field_high, field_low) into (high, low);
        # numpy shifts by 64 or more give 0, and a negative amount wraps to a huge one.
        low |= field_low << bits
        high |= (field_low >> (_U64(64) - bits)) | (field_low << (bits - _U64(64)))
        high |= field_high << bits
        bits += (field.sizes * 8).view(_U64)
    views = np.empty((len(low), 2), _U64)
    views[:, 0] = (bits >> _U64(3)) | (low << _U64(32))
    views[:, 1] = (low >> _U64(32)) | (high << _U64(32))
    array = pa.Array.from_buffers(pa.binary_view(), len(low), [None, pa.py_buffer(views)])
    return pc.call_function("cast", [array], _TO_BINARY)
