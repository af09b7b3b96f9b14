"""The common shapes of REST Proxy produce bodies, decoded straight into produce columns.

A v2 body of a thousand records or a v3 stream of a thousand objects cost
several times the native produce when each record went through
``json.loads``, a pydantic model, a codec call and a ``Decoded`` object. The
decoders here are typed, strict msgspec decoders that parse and check a whole
body in one C pass (base64 included) and hand back columns for
``ProduceBatch.from_columns``.

Like the native fast path (``server.codec.decode_produce_json``) they never
decide a refusal: anything unusual (an unknown or schema-registry field, a
type msgspec does not take exactly as the models do, bad base64, headers, a
v3 ``JSON`` key or value, ...) returns None, and the validating path then
answers with its documented error. So a body either takes this path and is
stored byte for byte as the validating path would store it, or takes that
path (``tests/server/test_rest_proxy_fast_path.py`` checks both on random
bodies). Pure logic, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from server.codec import IntColumn, decode_data, joined_lines

INT32_MAX = 2**31 - 1
Partition = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
NoHeaders = Annotated[tuple[msgspec.Raw, ...], msgspec.Meta(max_length=0)]


# -- v2 ---------------------------------------------------------------------------


def _v2_body(data: type, with_partition: bool) -> msgspec.json.Decoder[Any]:
    """A decoder of one v2 body shape: topic or partition route, binary or json data."""
    fields: list[tuple[str, Any, Any]] = [("key", data | None, None), ("value", data | None, None)]
    if with_partition:
        fields.append(("partition", Partition | None, None))
    record = msgspec.defstruct("V2Record", fields, forbid_unknown_fields=True, gc=False)
    body = msgspec.defstruct(
        "V2Body",
        [
            ("records", Annotated[list[record], msgspec.Meta(min_length=1)]),  # type: ignore[valid-type]
            # Null is what the models accept; a schema given falls back and is refused there.
            ("key_schema", None, None),
            ("key_schema_id", None, None),
            ("value_schema", None, None),
            ("value_schema_id", None, None),
        ],
        forbid_unknown_fields=True,
        gc=False,
    )
    return msgspec.json.Decoder(body)


#: (embedded format, records name their partition) -> decoder. ``json`` data is any JSON
#: value, serialised below exactly as the validating path does.
_V2_DECODERS = {
    (fmt, with_partition): _v2_body(bytes if fmt == "base64" else Any, with_partition)
    for fmt in ("base64", "json")
    for with_partition in (True, False)
}


@dataclass(frozen=True)
class V2Columns:
    """A v2 body's records as produce columns; ``partitions`` None when no record names one."""

    keys: pa.Array
    values: pa.Array
    partitions: npt.NDArray[np.int64] | None
    named: npt.NDArray[np.bool_] | None  # which records named a partition

    def __len__(self) -> int:
        return len(self.values)


def decode_v2(raw: bytes, fmt: Literal["base64", "json"], with_partition: bool) -> V2Columns | None:
    """A v2 produce body as columns, or None: let the validating path decide.

    For the ``json`` embedded format a key or value that JSON cannot represent
    (NaN, Infinity) raises the same ``InvalidRecordError`` as the validating
    path, for the same first record (keys are checked before values there).
    """
    try:
        body = _V2_DECODERS[(fmt, with_partition)].decode(raw)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None
    records = body.records
    if fmt == "base64":
        keys = _binary([r.key for r in records])
        values = _binary([r.value for r in records])
    else:
        keys = _binary(
            [decode_data(r.key, "json", f"records[{i}].key") for i, r in enumerate(records)]
        )
        values = _binary(
            [decode_data(r.value, "json", f"records[{i}].value") for i, r in enumerate(records)]
        )
    if keys is None or values is None:
        return None
    if not with_partition:
        return V2Columns(keys, values, None, None)
    given = [r.partition for r in records]
    if given.count(None) == len(given):
        return V2Columns(keys, values, None, None)
    named = np.array([p is not None for p in given])
    partitions = np.array([-1 if p is None else p for p in given], np.int64)
    return V2Columns(keys, values, partitions, named)


def _binary(items: list[Any]) -> pa.Array | None:
    """Bytes as sent, or None if some item has no binary form (the models decide then)."""
    if items.count(None) == len(items):
        return pa.nulls(len(items), pa.binary())
    try:
        return pa.array(items, pa.binary())
    except (pa.ArrowException, UnicodeError):
        return None


def v2_offsets_json(partitions: IntColumn, offsets: IntColumn) -> bytes:
    """The v2 produce answer when every record was written, as ``V2ProduceResponse`` renders.

    Rendering a pydantic model per record cost more than the commit; the
    entries are plain integers, so the text is written directly, field for
    field and byte for byte what the model's rendering gives.
    """
    entries = joined_lines(
        lambda p: f'{{"partition":{p},"offset":',
        partitions,
        offsets,
        ',"error_code":null,"error":null},',
    )
    start = b'{"key_schema_id":null,"value_schema_id":null,"offsets":['
    return b"".join([start, entries[: entries.size - 1], b"]}"])


# -- v3 ---------------------------------------------------------------------------

#: v3 data types the fast path takes, with the msgspec type of their ``data``. A missing
#: ``type`` means BINARY. JSON data and headers are left to the validating path.
_V3_TYPES: dict[str, type] = {"BINARY": bytes, "STRING": str}


def _v3_data(kind: str) -> type:
    tag: Any = Literal["BINARY"] | None if kind == "BINARY" else Literal["STRING"]
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [
        ("type", tag) if kind == "STRING" else ("type", tag, None),
        ("data", _V3_TYPES[kind] | None, None),
    ]
    fields.sort(key=len)  # required fields first
    return msgspec.defstruct(f"V3{kind.title()}Data", fields, forbid_unknown_fields=True, gc=False)


def _v3_stream(key_kind: str, value_kind: str) -> msgspec.json.Decoder[Any]:
    record = msgspec.defstruct(
        "V3Record",
        [
            ("partition_id", Partition | None, None),
            ("headers", NoHeaders, ()),
            ("key", _v3_data(key_kind) | None, None),
            ("value", _v3_data(value_kind) | None, None),
            ("timestamp", str | None, None),
        ],
        forbid_unknown_fields=True,
        gc=False,
    )
    return msgspec.json.Decoder(record)


_V3_DECODERS = {(k, v): _v3_stream(k, v) for k in _V3_TYPES for v in _V3_TYPES}
#: the data types of the last stream decoded: a producer's next one almost always has them too
_v3_guess: list[tuple[str, str]] = [("BINARY", "BINARY")]


@dataclass(frozen=True)
class V3Columns:
    """A v3 stream's records as produce columns, and what each report says of key and value."""

    partitions: list[int | None]
    timestamps: list[str | None]
    keys: pa.Array
    values: pa.Array
    key_kind: str
    value_kind: str
    #: records whose request had a key / value object (the others get none in their report)
    has_key: list[bool]
    has_value: list[bool]

    def __len__(self) -> int:
        return len(self.values)


def decode_v3_stream(raw: bytes) -> V3Columns | None:
    """A ``.../records`` body (one record, or several as concatenated JSON objects) as
    columns, or None.

    ``decode_lines`` reads a stream of JSON values separated by optional JSON
    whitespace, the same values ``split_concatenated`` finds; an empty body has
    none and is left to the validating path (which answers 422).
    """
    undecodable = (msgspec.DecodeError, RecursionError, UnicodeDecodeError)
    guess = _v3_guess[0]
    try:
        records = _V3_DECODERS[guess].decode_lines(raw)
        kinds = guess
    except undecodable:
        for kinds in _V3_DECODERS:
            if kinds == guess:
                continue
            try:
                records = _V3_DECODERS[kinds].decode_lines(raw)
            except undecodable:
                continue
            _v3_guess[0] = kinds
            break
        else:
            return None
    if not records:
        return None
    has_key, keys = _present_data([r.key for r in records])
    has_value, values = _present_data([r.value for r in records])
    if keys is None or values is None:
        return None
    return V3Columns(
        partitions=[r.partition_id for r in records],
        timestamps=[r.timestamp for r in records],
        keys=keys,
        values=values,
        key_kind=kinds[0],
        value_kind=kinds[1],
        has_key=has_key,
        has_value=has_value,
    )


def _present_data(parts: list[Any]) -> tuple[list[bool], pa.Array | None]:
    """Which records have the key (or value) object, and its data as a column (None: the
    models decide). Every record has one in the usual stream: one pass, no test per record."""
    if None not in parts:
        return [True] * len(parts), _binary([part.data for part in parts])
    present = [part is not None for part in parts]
    return present, _binary([part.data if part is not None else None for part in parts])


class _Size(msgspec.Struct, gc=False):
    type: msgspec.Raw
    size: int


class _Report(msgspec.Struct, omit_defaults=True, gc=False):
    """``V3ProduceResponse`` of a written record, its fields in the model's order."""

    error_code: int
    cluster_id: msgspec.Raw
    topic_name: msgspec.Raw
    partition_id: int
    offset: int
    timestamp: str
    key: _Size | None = None
    value: _Size | None = None


_LINES = msgspec.json.Encoder()


def v3_report_json(
    cluster_id: str,
    topic: str,
    columns: V3Columns,
    partitions: IntColumn,
    offsets: IntColumn,
    timestamps: list[str],
    key_sizes: list[int],
    value_sizes: list[int],
) -> bytes:
    """The delivery reports of a stream whose records were all written, one per line, as
    ``V3ProduceResponse`` renders them (``exclude_none``, compact, ASCII-escaped names).

    The names are rendered once by ``json.dumps`` so their escaping is the
    models' byte for byte. A stream whose reports differ only in partition and
    offset (one timestamp, one key size, one value size: the usual stream) is
    rendered from one head per partition and one shared tail; any other, one
    untracked struct per record encoded by msgspec in one C pass.
    """
    cluster = msgspec.Raw(json.dumps(cluster_id).encode())
    name = msgspec.Raw(json.dumps(topic).encode())
    key_kind = msgspec.Raw(json.dumps(columns.key_kind).encode())
    value_kind = msgspec.Raw(json.dumps(columns.value_kind).encode())
    if _uniform(timestamps, key_sizes, value_sizes, columns.has_key, columns.has_value):
        key = _Size(key_kind, key_sizes[0]) if columns.has_key[0] else None
        value = _Size(value_kind, value_sizes[0]) if columns.has_value[0] else None
        return _uniform_reports(cluster, name, partitions, offsets, timestamps[0], key, value)
    # Sizes repeat (values of one size, keys of one format): one struct per distinct size.
    key_info: dict[int, _Size] = {}
    value_info: dict[int, _Size] = {}
    reports = [
        _Report(
            200,
            cluster,
            name,
            p,
            o,
            t,
            (key_info.get(ks) or key_info.setdefault(ks, _Size(key_kind, ks))) if has_key else None,
            (value_info.get(vs) or value_info.setdefault(vs, _Size(value_kind, vs)))
            if has_value
            else None,
        )
        for p, o, t, ks, vs, has_key, has_value in zip(
            np.asarray(partitions, np.int64).tolist(),
            np.asarray(offsets, np.int64).tolist(),
            timestamps,
            key_sizes,
            value_sizes,
            columns.has_key,
            columns.has_value,
            strict=True,
        )
    ]
    return _LINES.encode_lines(reports)


def _uniform(*columns: list[Any]) -> bool:
    """Whether every column holds one value throughout (and there is a first row)."""
    return all(column and column.count(column[0]) == len(column) for column in columns)


def _uniform_reports(
    cluster: msgspec.Raw,
    name: msgspec.Raw,
    partitions: IntColumn,
    offsets: IntColumn,
    timestamp: str,
    key: _Size | None,
    value: _Size | None,
) -> bytes:
    """``v3_report_json`` of reports that differ only in partition and offset.

    Each line is its partition's head, the offset, and the shared tail, put
    together by ``joined_lines`` instead of
    msgspec encoding a struct per record. The pieces are cut from msgspec's
    own rendering of the first report, so both renderings agree byte for byte.
    """
    first = _LINES.encode(
        _Report(200, cluster, name, _MARK, _MARK + 1, timestamp, key, value)
    ).decode()
    before, rest = first.split(f'"partition_id":{_MARK},"offset":{_MARK + 1}', 1)
    lines = joined_lines(
        lambda p: f'{before}"partition_id":{p},"offset":', partitions, offsets, rest + "\n"
    )
    text: bytes = lines.to_pybytes()
    return text


#: Partition and offset of the report the uniform rendering is cut from. The text cut at
#: is unique: inside a JSON string every quote is escaped, so no name or timestamp can
#: hold the bare ``"partition_id":...,"offset":...`` that only the fields themselves make.
_MARK = 2**62
