"""Bodies of the Kafka REST Proxy compatible APIs (v2 at ``/topics``, v3 at ``/v3``), and the
decoding of produce bodies straight into produce columns.

Field names and nesting follow Confluent's REST Proxy so its clients work
unchanged. Class names carry a ``V2``/``V3`` prefix so they never collide with
the native models in the OpenAPI components. Request bodies refuse unknown
fields (the REST Proxy answers "Unrecognized field" too). The schema fields
name a schema of the broker's Schema Registry for the avro, jsonschema and
protobuf embedded formats (``server.rest_proxy.schemas`` resolves them).

Produce bodies are msgspec structs, decoded and checked in one C pass (base64
included): a v2 body or a v3 stream of a thousand records costs about what the
native produce does. Like the REST Proxy's Jackson they take numbers sent as
strings (``"partition": "1"``) and integral floats. Pure logic, no I/O.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pydantic import BaseModel, Field

from server.codec import IntColumn, decode_data, joined_lines

INT32_MAX = 2**31 - 1
Partition = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
NoHeaders = Annotated[tuple[msgspec.Raw, ...], msgspec.Meta(max_length=0)]
EmbeddedFormat = Literal["base64", "json"]
_UNDECODABLE = (msgspec.DecodeError, RecursionError, UnicodeDecodeError)
_WHERE = re.compile(r"(.*?)(?: - at `\$(.*)`)?", re.DOTALL)
_UNKNOWN = re.compile(r"Object contains unknown field `(.*)`", re.DOTALL)


class V2Failure(Exception):
    """An error answered in the v2 shape with the given HTTP status and v2 code."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def error_docs(model: type[BaseModel], *documented: tuple[int, str]) -> dict[int | str, Any]:
    """A router's ``responses=``: the errors its routes document, each answered as ``model``."""
    return {status: {"model": model, "description": text} for status, text in documented}


def validation_message(errors: Sequence[Any]) -> str:
    """Pydantic's complaints in one line (2,000 characters at most), each naming its field."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ())) or 'body'}: {e.get('msg')}" for e in errors
    )[:2000]


def describe(exc: msgspec.ValidationError) -> str:
    """msgspec's complaint in one line, naming the field at fault (``records.0.partition``)."""
    found = _WHERE.fullmatch(str(exc))
    assert found is not None  # the pattern matches any text
    problem, path = found.groups()
    where = re.sub(r"\[(\d+)\]", r".\1", path or "").lstrip(".")
    unknown = _UNKNOWN.fullmatch(problem)
    if unknown:
        return f"Unrecognized field: {'.'.join(filter(None, [where, unknown.group(1)]))}"[:2000]
    return f"{where or 'body'}: {problem}"[:2000]


def request_body(schema: dict[str, Any], *content_types: str, **extra: str) -> dict[str, Any]:
    """``openapi_extra`` documenting a body the route reads itself (as ``schema``)."""
    content = {kind: {"schema": schema} for kind in content_types}
    return {"requestBody": {"required": True, **extra, "content": content}}


def body_schema(body: Any) -> dict[str, Any]:
    """The JSON schema of a request body type, its ``$defs`` substituted in, for
    ``openapi_extra``."""
    schema = msgspec.json.schema(body)
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(copy.deepcopy(defs[ref.rsplit("/", 1)[-1]]))
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def _binary(items: list[Any]) -> pa.Array | None:
    """Bytes (or text) as sent, or None if some item has no binary form."""
    if items.count(None) == len(items):
        return pa.nulls(len(items), pa.binary())
    try:
        return pa.array(items, pa.binary())
    except (pa.ArrowException, UnicodeError):
        return None


# -- v2 ---------------------------------------------------------------------------

_DATA = (
    "base64 (binary), any JSON value (json), or JSON data written with the request's "
    "schema (avro: Avro's JSON encoding; jsonschema; protobuf); null = no key / a tombstone"
)
_V2_SCHEMA = "avro, jsonschema and protobuf only: an inline schema, registered under "
_V2_SCHEMA_ID = "avro, jsonschema and protobuf only: the id of a registered schema (not with "
_V2_SCHEMA_FIELDS = {
    "key_schema": _V2_SCHEMA + "<topic>-key if new",
    "key_schema_id": _V2_SCHEMA_ID + "key_schema)",
    "value_schema": _V2_SCHEMA + "<topic>-value if new",
    "value_schema_id": _V2_SCHEMA_ID + "value_schema)",
}


def _v2_body(data: Any, with_partition: bool) -> Any:
    """The body of ``POST /topics/{topic}`` (records may name a partition) or of
    ``POST /topics/{topic}/partitions/{partition}``, with ``data`` as its keys' and values' type.
    """
    value: Any = Annotated[data if data is Any else data | None, msgspec.Meta(description=_DATA)]
    fields: list[tuple[str, Any, Any]] = [("key", value, None), ("value", value, None)]
    name = "V2PartitionProduceRequest"
    if with_partition:
        chosen = msgspec.Meta(description="Chosen from the key (or sticky) when absent")
        fields.append(("partition", Annotated[Partition | None, chosen], None))
        name = "V2TopicProduceRequest"
    record = msgspec.defstruct(
        name.replace("ProduceRequest", "Record"), fields, forbid_unknown_fields=True, gc=False
    )
    return msgspec.defstruct(
        name,
        [
            ("records", Annotated[list[record], msgspec.Meta(min_length=1)]),  # type: ignore[valid-type]
            *(
                (name, Annotated[kind | None, msgspec.Meta(description=text)], None)
                for (name, text), kind in zip(
                    _V2_SCHEMA_FIELDS.items(), (str, int, str, int), strict=True
                )
            ),
        ],
        forbid_unknown_fields=True,
        gc=False,
    )


#: records name their partition -> the body with any JSON value as data (its schema is the
#: documented one), and (embedded format) -> its decoder, which decodes base64 data itself.
V2_BODIES = {with_partition: _v2_body(Any, with_partition) for with_partition in (True, False)}
_V2_DECODERS = {
    (fmt, with_partition): msgspec.json.Decoder(
        _v2_body(bytes, with_partition) if fmt == "base64" else V2_BODIES[with_partition],
        strict=False,
    )
    for fmt in ("base64", "json")
    for with_partition in (True, False)
}
KEY_SCHEMA_REFUSED = 42201
VALUE_SCHEMA_REFUSED = 42202


@dataclass(frozen=True)
class V2Columns:
    """A v2 body's records as produce columns; ``partitions`` None when no record names one."""

    keys: pa.Array
    values: pa.Array
    partitions: npt.NDArray[np.int64] | None
    named: npt.NDArray[np.bool_] | None  # which records named a partition

    def __len__(self) -> int:
        return len(self.values)


def parse_v2(raw: bytes, fmt: EmbeddedFormat, with_partition: bool) -> tuple[Any, bool]:
    """A v2 produce body, and whether its data are already bytes (base64 decoded by the
    decoder); refused as malformed JSON (400/400) or of the wrong shape (422/422)."""
    try:
        body = _V2_DECODERS[(fmt, with_partition)].decode(raw)
        return body, fmt == "base64"
    except _UNDECODABLE:
        # Python's parser takes what msgspec's does not (NaN, 1e400, a lone surrogate), which
        # the data checks then refuse; and data read as JSON values get decode_data's messages.
        try:
            document = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise V2Failure(400, 400, f"Malformed JSON: {exc}") from None
        try:
            body = msgspec.convert(document, V2_BODIES[with_partition], strict=False)
        except msgspec.ValidationError as exc:
            raise V2Failure(422, 422, describe(exc)) from None
        return body, False


def decode_v2(raw: bytes, fmt: EmbeddedFormat, with_partition: bool) -> V2Columns:
    """A v2 produce body as columns, or its first refusal in this order: malformed JSON
    (400/400), a body of the wrong shape (422/422), a schema given (42201, 42202: schemas are
    for the schema'd formats), a key or value not in the embedded format
    (``InvalidRecordError``: 42203; every key is checked before the values)."""
    body, typed = parse_v2(raw, fmt, with_partition)
    for part, code in (("key", KEY_SCHEMA_REFUSED), ("value", VALUE_SCHEMA_REFUSED)):
        if (
            getattr(body, f"{part}_schema") is not None
            or getattr(body, f"{part}_schema_id") is not None
        ):
            raise V2Failure(
                422,
                code,
                f"{part}_schema/{part}_schema_id are for the avro, jsonschema and protobuf "
                f"embedded formats; send {part}s with one of those, or leave them out",
            )
    records = body.records
    columns = []
    for field in ("key", "value"):
        data = [getattr(r, field) for r in records]
        if not typed:
            data = [decode_data(d, fmt, f"records[{i}].{field}") for i, d in enumerate(data)]
        columns.append(data)
    return v2_columns(columns[0], columns[1], records, with_partition)


def v2_columns(
    keys: list[bytes | None], values: list[bytes | None], records: Any, with_partition: bool
) -> V2Columns:
    """The records' keys and values (as written) and the partitions they name, as columns."""
    key_column, value_column = _binary(keys), _binary(values)
    assert key_column is not None and value_column is not None  # bytes have a binary form
    given = [r.partition for r in records] if with_partition else []
    if given.count(None) == len(given):
        return V2Columns(key_column, value_column, None, None)
    named = np.array([p is not None for p in given])
    partitions = np.array([-1 if p is None else p for p in given], np.int64)
    return V2Columns(key_column, value_column, partitions, named)


def v2_offsets_json(
    partitions: IntColumn,
    offsets: IntColumn,
    key_schema_id: int | None = None,
    value_schema_id: int | None = None,
) -> bytes:
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
    ids = (json.dumps(key_schema_id), json.dumps(value_schema_id))
    start = '{{"key_schema_id":{},"value_schema_id":{},"offsets":['.format(*ids).encode()
    return b"".join([start, entries[: entries.size - 1], b"]}"])


class V2Error(BaseModel):
    error_code: int = Field(description="HTTP status * 100 + a sub-code, e.g. 40401")
    message: str


class V2PartitionOffset(BaseModel):
    partition: int | None
    offset: int | None
    error_code: int | None = Field(description="null on success; 1 non-retriable, 2 retriable")
    error: str | None


class V2ProduceResponse(BaseModel):
    key_schema_id: int | None = None
    value_schema_id: int | None = None
    offsets: list[V2PartitionOffset]


class V2BrokerList(BaseModel):
    brokers: list[int] = Field(description="Kafka ids of the live brokers")


class V2Replica(BaseModel):
    broker: int
    leader: bool
    in_sync: bool


class V2Partition(BaseModel):
    partition: int
    leader: int
    replicas: list[V2Replica]


class V2Topic(BaseModel):
    name: str
    configs: dict[str, str] = Field(description="Every effective topic config, as strings")
    partitions: list[V2Partition]


class V2PartitionOffsets(BaseModel):
    beginning_offset: int = Field(description="The log start offset")
    end_offset: int = Field(description="The high watermark (offset of the next record)")


# -- v3 ---------------------------------------------------------------------------

_V3Type = Annotated[
    str | None,
    msgspec.Meta(
        description="BINARY (base64, the default), JSON or STRING; or AVRO, JSONSCHEMA or "
        "PROTOBUF, written with a schema of the Schema Registry"
    ),
]
_V3Subject = Annotated[
    str | None,
    msgspec.Meta(description="The schema's subject; else the subject_name_strategy's"),
]
_V3Strategy = Annotated[
    str | None,
    msgspec.Meta(
        description="TOPIC_NAME (<topic>-key or <topic>-value, the default), RECORD_NAME "
        "(the schema's record name) or TOPIC_RECORD_NAME (<topic>-<record name>)"
    ),
]
_V3SchemaId = Annotated[
    int | None,
    msgspec.Meta(description="A registered schema's id (not with schema_version or schema)"),
]
_V3SchemaVersion = Annotated[
    int | None,
    msgspec.Meta(
        description="A version of the subject; with no schema_id, schema_version or schema, "
        "the subject's latest version"
    ),
]
_V3Schema = Annotated[
    str | None,
    msgspec.Meta(description="An inline schema of type's format, registered under the subject"),
]


class V3ProduceData(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A key or value: ``type`` says how ``data`` is written. With no ``type`` and no schema
    field it is BINARY; with a schema field and no ``type``, the schema's type."""

    type: _V3Type = None
    data: Any = None
    subject: _V3Subject = None
    subject_name_strategy: _V3Strategy = None
    schema_id: _V3SchemaId = None
    schema_version: _V3SchemaVersion = None
    schema_: _V3Schema = msgspec.field(default=None, name="schema")


class V3ProduceHeader(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    name: str
    value: Annotated[str | None, msgspec.Meta(description="base64")] = None


class V3ProduceRecord(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One record of ``POST .../records`` (send several as concatenated JSON objects)."""

    partition_id: Partition | None = None
    headers: list[V3ProduceHeader] = []
    key: V3ProduceData | None = None
    value: V3ProduceData | None = None
    timestamp: Annotated[
        str | None, msgspec.Meta(description="RFC 3339; the broker's clock when absent")
    ] = None


class V3BatchEntry(V3ProduceRecord, kw_only=True):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=80)]


class V3Error(BaseModel):
    error_code: int = Field(description="Usually the HTTP status, e.g. 404")
    message: str | None


class V3ProduceResponseData(BaseModel):
    type: str
    size: int
    subject: str | None = Field(None, description="Schema'd types: the schema's subject")
    schema_id: int | None = Field(None, description="Schema'd types: the schema's id")
    schema_version: int | None = Field(
        None, description="Schema'd types: the schema's version in the subject"
    )


class V3ProduceResponse(BaseModel):
    """A delivery report; ``error_code`` 200 means the record is durable."""

    error_code: int
    message: str | None = None
    cluster_id: str | None = None
    topic_name: str | None = None
    partition_id: int | None = None
    offset: int | None = None
    timestamp: str | None = None
    key: V3ProduceResponseData | None = None
    value: V3ProduceResponseData | None = None


class V3BatchSuccess(BaseModel):
    id: str
    cluster_id: str
    topic_name: str
    partition_id: int
    offset: int
    timestamp: str | None = None
    key: V3ProduceResponseData | None = None
    value: V3ProduceResponseData | None = None


class V3BatchFailure(BaseModel):
    id: str
    error_code: int
    message: str | None = None


class V3BatchResponse(BaseModel):
    successes: list[V3BatchSuccess]
    failures: list[V3BatchFailure]


# -- v3 streams of the common shapes ---------------------------------------------
#
# The usual stream (BINARY or STRING data, no headers, no schema field) is decoded whole; any
# other record by record in ``v3_records``, so that each record gets its own report.

#: v3 data types of the usual stream, with the msgspec type of their ``data``. A missing
#: ``type`` means BINARY.
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
    columns, or None when it is not of the usual shapes.

    ``decode_lines`` reads a stream of JSON values separated by optional JSON
    whitespace, the same values ``split_concatenated`` finds; an empty body has
    none (``v3_records`` refuses it with 422).
    """
    guess = _v3_guess[0]
    for kinds in [guess, *(k for k in _V3_DECODERS if k != guess)]:
        try:
            records = _V3_DECODERS[kinds].decode_lines(raw)
        except _UNDECODABLE:
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
    record-by-record path decides). Every record has one in the usual stream: one pass."""
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
    """``v3_report_json`` of reports that differ only in partition and offset, cut from
    msgspec's own rendering of the first report so both renderings agree byte for byte."""
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
