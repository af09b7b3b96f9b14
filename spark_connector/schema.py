"""The row schema of a topic read through the connector: exactly Spark's Kafka source.

As there, a record without headers has ``headers = null``, and ``timestampType``
is Kafka's id (0 = CreateTime, 1 = LogAppendTime).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type
from pyspark.sql.types import StructType

BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key:string,value:binary>>"
#: A segment file's columns as Spark's Parquet reader reads them, ``partition`` from the path.
SEGMENT_DDL = (
    "offset long, timestamp timestamp, timestamp_type int, key binary, value binary, "
    f"{HEADERS_DDL}, producer_id long, sequence int, partition int"
)

SPARK_HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
SPARK_HEADERS_TYPE = pa.list_(pa.field("element", SPARK_HEADER_TYPE))

#: What Spark expects a read task to return (as ``to_arrow_schema`` derives it, UTC).
BASE_ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
)
HEADERS_ARROW_SCHEMA = BASE_ARROW_SCHEMA.append(pa.field("headers", SPARK_HEADERS_TYPE))


def ddl(include_headers: bool, typed: Sequence[pa.Field] = ()) -> str:
    base = f"{BASE_DDL}, {HEADERS_DDL}" if include_headers else BASE_DDL
    return base + typed_ddl(typed)


def typed_ddl(typed: Sequence[pa.Field]) -> str:
    """``, name type`` per typed column (``lakelog.typed_columns``), in Spark's DDL."""
    return "".join(f", `{f.name}` {from_arrow_type(f.type).simpleString()}" for f in typed)


def spark_schema(include_headers: bool, typed: Sequence[pa.Field] = ()) -> StructType:
    """The output schema as a Spark ``StructType`` (derived from the Arrow one, no JVM needed)."""
    return from_arrow_schema(arrow_schema(include_headers, typed))


def arrow_schema(include_headers: bool, typed: Sequence[pa.Field] = ()) -> pa.Schema:
    """The fixed output columns, then the read's typed columns (every field nullable)."""
    base = HEADERS_ARROW_SCHEMA if include_headers else BASE_ARROW_SCHEMA
    return pa.schema([*base, *typed]) if typed else base


def spark_headers(headers: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Stored headers in Spark's type, with empty lists as null (Spark's Kafka source does so)."""
    headers = _array(headers).cast(SPARK_HEADERS_TYPE)
    empty = pc.fill_null(pc.equal(pc.list_value_length(headers), 0), True)
    if not pc.any(empty).as_py():
        return headers
    assert isinstance(headers, pa.ListArray)
    return pa.ListArray.from_arrays(
        headers.offsets, headers.values, type=SPARK_HEADERS_TYPE, mask=empty
    )


def to_output(
    rows: pa.RecordBatch | pa.Table,
    topic: str,
    partition: int,
    include_headers: bool,
    typed: Sequence[pa.Field] = (),
) -> pa.RecordBatch:
    """Segment rows of one partition as one record batch in the output schema.

    Pass record batches (a row group each) rather than multi-chunk tables: a
    batch's columns are used as they are, while a table's are concatenated.
    """
    n = rows.num_rows
    columns: list[pa.Array] = [
        _array(rows.column("key")),
        _array(rows.column("value")),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        _array(rows.column("offset")),
        _array(rows.column("timestamp")).cast(pa.timestamp("us", tz="UTC")),
        _array(rows.column("timestamp_type")),
    ]
    if include_headers:
        columns.append(spark_headers(rows.column("headers")))
    columns += [_array(rows.column(f.name)) for f in typed]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers, typed))


def _array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.Array):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()
