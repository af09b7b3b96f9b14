"""Keys, values and headers between HTTP bodies and bytes; Arrow IPC bodies.

Pure functions. A producer says how its keys and values are written
(``base64`` binary, a ``string`` stored as UTF-8, or ``json`` stored as its
compact text); a consumer says how it wants them back. Errors name the record
and the field at fault.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Literal

import pyarrow as pa
import pyarrow.ipc

from lakelog.errors import InvalidRecordError, InvalidRequestError
from lakelog.records import HEADERS_TYPE, PRODUCE_SCHEMA, SEGMENT_SCHEMA, TIMESTAMP_TYPE

DataFormat = Literal["base64", "string", "json"]
ARROW_STREAM = "application/vnd.apache.arrow.stream"
NDJSON = "application/x-ndjson"


def decode_data(value: Any, fmt: DataFormat, where: str) -> bytes | None:
    """Bytes of one key/value/header as sent; ``None`` stays null."""
    if value is None:
        return None
    if fmt == "json":
        # Fix: the request parser accepts NaN/Infinity, which were stored as is and later
        # served inside a response body that no JSON parser accepts.
        try:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except ValueError:
            raise InvalidRecordError(
                f"{where} holds NaN or Infinity, which JSON cannot represent"
            ) from None
        return text.encode()
    if not isinstance(value, str):
        raise InvalidRecordError(
            f"{where} must be a string in {fmt} format, got {type(value).__name__}"
        )
    if fmt == "string":
        return value.encode()
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRecordError(f"{where} is not valid base64: {value[:40]!r}") from None


def encode_data(data: bytes | None, fmt: DataFormat, where: str) -> Any:
    """One stored key/value as the consumer asked for it."""
    if data is None:
        return None
    if fmt == "base64":
        return base64.b64encode(data).decode("ascii")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequestError(
            f"{where} is not UTF-8; fetch it with the base64 format instead"
        ) from None
    if fmt == "string":
        return text
    try:
        # Fix: json.loads accepts NaN/Infinity, which then made the fetch response invalid JSON.
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        raise InvalidRequestError(
            f"{where} is not JSON; fetch it with the string or base64 format instead"
        ) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: Idempotence comes from the producer_id/sequence parameters, which the log checks and
#: records; per-row columns would store producer ids and sequences that were never checked.
_PRODUCER_COLUMNS = ("producer_id", "sequence")


def parse_arrow_stream(body: bytes) -> pa.Table:
    """A produce body in Arrow IPC stream format, checked against the produce columns."""
    if not body:
        raise InvalidRequestError("empty Arrow IPC body")
    try:
        reader = pyarrow.ipc.open_stream(pa.py_buffer(body))
        table = reader.read_all()
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as exc:
        raise InvalidRequestError(f"malformed Arrow IPC stream: {exc}") from exc
    # Fix: a repeated column name made later lookups raise KeyError (answered 500).
    repeated = sorted({n for n in table.column_names if table.column_names.count(n) > 1})
    if repeated:
        raise InvalidRecordError(f"Arrow columns appear more than once: {repeated}")
    # Fix: producer_id/sequence columns were accepted and stored without any sequence check.
    forged = [n for n in table.column_names if n in _PRODUCER_COLUMNS]
    if forged:
        raise InvalidRecordError(
            f"Arrow columns {forged} are not accepted; an idempotent producer passes "
            "producer_id and sequence as query parameters"
        )
    allowed = set(PRODUCE_SCHEMA.names) - set(_PRODUCER_COLUMNS)
    unknown = [n for n in table.column_names if n not in allowed]
    if unknown:
        raise InvalidRecordError(
            f"unknown Arrow columns {unknown}; allowed: {', '.join(sorted(allowed))}"
        )
    if "value" not in table.column_names:
        raise InvalidRecordError("an Arrow produce body needs a 'value' column")
    if "timestamp" in table.column_names and pa.types.is_integer(
        table.schema.field("timestamp").type
    ):
        table = table.set_column(
            table.schema.get_field_index("timestamp"),
            "timestamp",
            table.column("timestamp").cast(pa.int64()).cast(TIMESTAMP_TYPE),
        )
    return table


FETCH_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        *[f for f in SEGMENT_SCHEMA if f.name not in ("producer_id", "sequence")],
    ]
)


def fetch_table(topic: str, partition: int, rows: pa.Table) -> pa.Table:
    """Fetched rows in the shape bulk consumers get over Arrow IPC."""
    n = rows.num_rows
    columns = [
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        *[rows.column(f.name) for f in FETCH_SCHEMA if f.name not in ("topic", "partition")],
    ]
    return pa.Table.from_arrays(columns, schema=FETCH_SCHEMA)


def arrow_stream_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def headers_array(headers: list[list[dict[str, Any]]]) -> pa.Array:
    return pa.array(headers, HEADERS_TYPE)
