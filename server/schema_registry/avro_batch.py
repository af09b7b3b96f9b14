"""Avro payloads decoded a column at a time: one numpy step per field for a whole batch.

fastavro reads one datum per call, so a batch of small records costs a Python
call and a dict per record, twice (validation, then the typed columns): the
reason this decoder exists is measured in docs/architecture.md ("Typed
columns"). Here every payload has a cursor into the batch's data buffer, and
reading a field moves the cursors of all the rows that reach it at once; the
values land in numpy arrays that become the Arrow arrays of ``AvroColumns``'s
raw type, with no Python object per value.

It takes the schemas whose rows all read their fields in one order: records,
primitives, enums, fixed, and unions of null with one other type (the optional
field). Arrays, maps and other unions raise ``Unsupported`` when the decoder is
built, and such schemas keep fastavro. A row whose datum this decoder does not
take (a varint longer than ten bytes, an index out of range, a read past its
payload, bytes left after the datum, a string that is not UTF-8, an ``int``
beyond 32 bits) is *flagged*, never guessed at: callers ask fastavro about
flagged rows, so no payload fastavro refuses is accepted here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakelog.errors import LakelogError

#: Zero bytes after the data buffer: a varint window read past the last payload stays inside.
_PAD = 16
_VARINT_BYTES = 10
_INT32 = (-(2**31), 2**31 - 1)

#: The rows a read is for: their indices, or ``slice(None)`` for every row of the batch.
Rows = npt.NDArray[np.int64] | slice


class Unsupported(LakelogError, ValueError):
    """A schema the column decoder does not take (fastavro decodes it)."""


@dataclass
class _Cursors:
    """Where each row's datum is read up to, where it ends, and whether it is flagged."""

    buf: npt.NDArray[np.uint8]
    pos: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    bad: npt.NDArray[np.bool_]
    limit: int  # the data's length: no read starts beyond it
    #: False: only the flags are wanted (validation), so readers build no arrays.
    build: bool = True
    #: How many bytes >= 0x80 precede each position of ``buf`` (flags only): a string
    #: with none is ASCII, valid UTF-8 without a look at its bytes.
    high: npt.NDArray[np.int64] | None = None

    def flag(self, rows: Rows, where: npt.NDArray[np.bool_]) -> None:
        self.bad[rows] |= where

    def _move(self, rows: Rows, moved: npt.NDArray[np.int64], past: npt.NDArray[np.bool_]) -> None:
        """Set the rows' cursors to ``moved`` (kept inside the data), flagging ``past`` and any
        row read beyond its payload."""
        self.flag(rows, past | (moved > self.end[rows]))
        self.pos[rows] = np.minimum(moved, self.limit)

    def varints(self, rows: Rows) -> npt.NDArray[np.int64]:
        """One zigzag varint (Avro's int and long) of each row: when every one is a single
        byte (small numbers, short lengths) at once, else a byte position at a time until
        every row's has ended."""
        at = self.pos[rows]
        first = self.buf[at]
        if not (first >= 0x80).any():
            small = first.astype(np.int64)
            self._move(rows, at + 1, np.zeros(len(at), bool))
            return (small >> 1) ^ -(small & 1)
        value = np.zeros(len(at), np.uint64)
        length = np.zeros(len(at), np.int64)
        going = np.ones(len(at), bool)
        for k in range(_VARINT_BYTES):
            byte = first if k == 0 else self.buf[at + k]
            value |= ((byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)) * going
            length += going
            going &= byte >= 0x80
            if not going.any():
                break
        decoded = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(
            np.int64
        )
        self._move(rows, at + length, going)
        return decoded

    def fixed(self, rows: Rows, size: int) -> npt.NDArray[np.uint8]:
        """``size`` bytes of each row, as an (n, size) array."""
        at = self.pos[rows]  # a view where rows is a slice: read before moving
        span = np.arange(size, dtype=np.int64)
        found: npt.NDArray[np.uint8] = self.buf[
            np.minimum(at[:, None] + span, self.limit + _PAD - 1)
        ]
        self._move(rows, at + size, np.zeros(len(at), bool))
        return found

    def skip(self, rows: Rows, size: int) -> None:
        at = self.pos[rows]
        self._move(rows, at + size, np.zeros(len(at), bool))

    def skip_sized(self, rows: Rows) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Move past a length-prefixed byte string of each row; where each starts and ends."""
        length = self.varints(rows)
        at = self.pos[rows].copy()
        wrong = (length < 0) | (at + length > self.end[rows])
        length = np.where(wrong, 0, length)
        self._move(rows, at + length, wrong)
        return at, at + length

    def sized(self, rows: Rows) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
        """A length-prefixed byte string of each row: Arrow offsets and the bytes."""
        length = self.varints(rows)
        at = self.pos[rows]
        wrong = (length < 0) | (at + length > self.end[rows])
        length = np.where(wrong, 0, length)
        offsets = np.zeros(len(at) + 1, np.int64)
        np.cumsum(length, out=offsets[1:])
        total = int(offsets[-1])
        if total > 2**31 - 1:
            raise Unsupported("a batch's byte strings exceed 2 GiB")
        taken = np.repeat(at - offsets[:-1], length) + np.arange(total, dtype=np.int64)
        found = self.buf[taken]
        self._move(rows, at + length, wrong)  # last: ``at`` may be a view of the cursors
        return offsets, found


#: Reads one field of every row in ``rows``: an Arrow array of len(rows) (None: flags only).
Reader = Callable[[_Cursors, Rows], pa.Array | None]


def _built(array: pa.Array | None) -> pa.Array:
    assert array is not None, "a reader built no array"
    return array


def _binary(offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8]) -> pa.Array:
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.binary(), len(offsets) - 1, buffers)


def _read_bytes(c: _Cursors, rows: Rows) -> pa.Array | None:
    if not c.build:
        c.skip_sized(rows)
        return None
    return _binary(*c.sized(rows))


def _read_string(c: _Cursors, rows: Rows) -> pa.Array | None:
    if not c.build:
        assert c.high is not None
        starts, ends = c.skip_sized(rows)
        maybe = np.flatnonzero(c.high[ends] != c.high[starts])  # not ASCII: decode those
        invalid = np.zeros(len(starts), bool)
        for i in maybe.tolist():
            try:
                c.buf[starts[i] : ends[i]].tobytes().decode("utf-8")
            except UnicodeDecodeError:
                invalid[i] = True
        c.flag(rows, invalid)
        return None
    raw = _binary(*c.sized(rows))
    try:
        return raw.cast(pa.string())  # checks UTF-8
    except pa.ArrowInvalid:
        invalid = np.zeros(len(raw), bool)
        for i, value in enumerate(raw.to_pylist()):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                invalid[i] = True
        c.flag(rows, invalid)
        cleared = raw.take(pa.array(np.arange(len(raw)), mask=invalid))
        return cleared.cast(pa.string())


def _read_long(c: _Cursors, rows: Rows) -> pa.Array | None:
    value = c.varints(rows)
    return pa.array(value, pa.int64()) if c.build else None


def _read_int(c: _Cursors, rows: Rows) -> pa.Array | None:
    value = c.varints(rows)
    c.flag(rows, (value < _INT32[0]) | (value > _INT32[1]))
    return pa.array(value.astype(np.int32), pa.int32()) if c.build else None


def _read_boolean(c: _Cursors, rows: Rows) -> pa.Array | None:
    if not c.build:
        c.skip(rows, 1)
        return None
    return pa.array(c.fixed(rows, 1)[:, 0] != 0, pa.bool_())


def _read_float(c: _Cursors, rows: Rows) -> pa.Array | None:
    if not c.build:
        c.skip(rows, 4)
        return None
    return pa.array(np.ascontiguousarray(c.fixed(rows, 4)).view("<f4").ravel(), pa.float32())


def _read_double(c: _Cursors, rows: Rows) -> pa.Array | None:
    if not c.build:
        c.skip(rows, 8)
        return None
    return pa.array(np.ascontiguousarray(c.fixed(rows, 8)).view("<f8").ravel(), pa.float64())


def _count(c: _Cursors, rows: Rows) -> int:
    return len(c.pos) if isinstance(rows, slice) else len(rows)


def _read_null(c: _Cursors, rows: Rows) -> pa.Array | None:
    return pa.nulls(_count(c, rows)) if c.build else None


_PRIMITIVES: dict[str, Reader] = {
    "null": _read_null,
    "boolean": _read_boolean,
    "int": _read_int,
    "long": _read_long,
    "float": _read_float,
    "double": _read_double,
    "bytes": _read_bytes,
    "string": _read_string,
}


def _fixed_reader(size: int) -> Reader:
    def read(c: _Cursors, rows: Rows) -> pa.Array | None:
        if not c.build:
            c.skip(rows, size)
            return None
        data = c.fixed(rows, size).ravel()
        return _binary(np.arange(_count(c, rows) + 1, dtype=np.int64) * size, data)

    return read


def _enum_reader(symbols: list[str]) -> Reader:
    names = pa.array(symbols, pa.string())

    def read(c: _Cursors, rows: Rows) -> pa.Array | None:
        index = c.varints(rows)
        wrong = (index < 0) | (index >= len(symbols))
        c.flag(rows, wrong)
        return names.take(pa.array(np.where(wrong, 0, index))) if c.build else None

    return read


def _record_reader(fields: list[tuple[str, Reader]]) -> Reader:
    def read(c: _Cursors, rows: Rows) -> pa.Array | None:
        children = [one(c, rows) for _, one in fields]
        if not c.build:
            return None
        return pa.StructArray.from_arrays(
            [_built(child) for child in children], names=[name for name, _ in fields]
        )

    return read


def _optional_reader(null_at: int, other: Reader) -> Reader:
    """``["null", T]`` (or ``[T, "null"]``): the branch index, then T where it is taken."""
    taken_at = 1 - null_at

    def read(c: _Cursors, rows: Rows) -> pa.Array | None:
        index = c.varints(rows)
        c.flag(rows, (index != null_at) & (index != taken_at))
        taken = index == taken_at
        found = other(c, np.flatnonzero(taken) if isinstance(rows, slice) else rows[taken])
        if found is None:
            return None
        values = found
        if values.null_count == 0 and taken.all():
            return values
        place = np.full(len(index), -1, np.int64)
        place[taken] = np.arange(int(taken.sum()))
        return values.take(pa.array(place, mask=place < 0))

    return read


def full_name(schema: dict[str, Any], namespace: str | None) -> str:
    """A named Avro type's full name: its own if dotted, else in its or the enclosing
    namespace."""
    name = str(schema["name"])
    if "." in name:
        return name
    space = schema.get("namespace", namespace)
    return f"{space}.{name}" if space else name


def _compile(schema: Any, named: dict[str, Reader], namespace: str | None) -> Reader:
    if isinstance(schema, list):
        others = [b for b in schema if b != "null"]
        if len(schema) != 2 or len(others) != 1:
            raise Unsupported("unions other than null and one type")
        return _optional_reader(schema.index("null"), _compile(others[0], named, namespace))
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        found = named.get(schema) or named.get(f"{namespace}.{schema}")
        if found is None:
            raise Unsupported(f"named type {schema!r} not defined before its use")
        return found
    if not isinstance(schema, dict):
        raise Unsupported(f"schema {schema!r}")
    kind = schema.get("type")
    if kind in ("record", "error"):
        full = full_name(schema, namespace)
        space = full.rpartition(".")[0] or None
        fields = [(str(f["name"]), _compile(f["type"], named, space)) for f in schema["fields"]]
        named[full] = reader = _record_reader(fields)
        return reader
    if kind == "enum":
        named[full_name(schema, namespace)] = reader = _enum_reader(list(schema["symbols"]))
        return reader
    if kind == "fixed":
        named[full_name(schema, namespace)] = reader = _fixed_reader(int(schema["size"]))
        return reader
    if isinstance(kind, (str, list, dict)) and kind not in ("array", "map"):
        return _compile(kind, named, namespace)  # {"type": "string", "logicalType": ...}
    raise Unsupported(f"Avro {kind!r}")


@dataclass(frozen=True)
class AvroBatchDecoder:
    """Decodes payloads of one Avro schema into an Arrow array of the schema's raw type."""

    read: Reader

    def decode(
        self, data: memoryview | bytes, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
    ) -> tuple[pa.Array, npt.NDArray[np.bool_]]:
        """The datums at ``data[starts[i]:ends[i]]``, and which rows are flagged.

        A flagged row is null in the array; an unflagged one read exactly its bytes.
        """
        cursors = _cursors(data, starts, ends, build=True)
        array = _built(self.read(cursors, slice(None)))
        bad = cursors.bad | (cursors.pos != cursors.end)
        n = len(bad)
        if not bad.any():
            return array, bad
        if isinstance(array, pa.StructArray):
            children = [array.field(i) for i in range(array.type.num_fields)]
            mask = pa.array(bad | ~array.is_valid().to_numpy(zero_copy_only=False))
            return pa.StructArray.from_arrays(children, fields=list(array.type), mask=mask), bad
        return array.take(pa.array(np.arange(n), mask=bad)), bad

    def flags(
        self, data: memoryview | bytes, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        """``decode``'s flags alone, building no arrays (what validation needs)."""
        cursors = _cursors(data, starts, ends, build=False)
        self.read(cursors, slice(None))
        flagged: npt.NDArray[np.bool_] = cursors.bad | (cursors.pos != cursors.end)
        return flagged


def _cursors(
    data: memoryview | bytes,
    starts: npt.NDArray[np.int64],
    ends: npt.NDArray[np.int64],
    *,
    build: bool,
) -> _Cursors:
    raw = np.frombuffer(data, np.uint8)
    buf = np.zeros(len(raw) + _PAD, np.uint8)
    buf[: len(raw)] = raw
    high = None
    if not build:
        high = np.zeros(len(buf) + 1, np.int64)
        np.cumsum(buf >= 0x80, out=high[1:])
    return _Cursors(
        buf,
        np.asarray(starts, np.int64).copy(),
        np.asarray(ends, np.int64),
        np.zeros(len(starts), bool),
        len(raw),
        build,
        high,
    )


def avro_batch_decoder(*sources: Any) -> AvroBatchDecoder:
    """The column decoder of the last of ``sources`` (Avro schemas' JSON, parsed), the
    others defining the named types it references; ``Unsupported`` if it has none."""
    if not sources:
        raise Unsupported("no schema")
    named: dict[str, Reader] = {}
    for source in sources[:-1]:
        _compile(source, named, None)
    return AvroBatchDecoder(_compile(sources[-1], named, None))
