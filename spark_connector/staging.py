"""Writing: what a DataFrame may hold, staging rows in tasks, appending them on the driver.

Columns follow Spark's Kafka sink: ``value`` (required), ``key``, ``headers``,
``partition`` (null or absent: chosen as a Kafka producer would) and
``topic`` (the ``topic`` option overrides it); other columns are ignored, so
a DataFrame read from a topic can be written to another one as is.

Tasks cannot assign offsets (only a commit can), so each stages its rows as
one Parquet file under ``<root>/_staging/<write-id>/``; the driver's commit
appends them per topic through the log protocol (dense offsets, safe beside
running brokers), then deletes them.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from lakelog.catalog import Catalog
from lakelog.errors import InvalidConfigError, InvalidRecordError, LakelogError
from lakelog.produce import PreparedBatch
from lakelog.storage import Storage, join
from lakelog.topic_log import AppendResult
from spark_connector.schema import SPARK_HEADERS_TYPE

STAGING_DIR = "_staging"

#: What a task stages: the produce columns plus the row's topic (null = the ``topic`` option).
STAGED_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", SPARK_HEADERS_TYPE),
    ]
)
INTEGER_TYPES = (ByteType, ShortType, IntegerType, LongType)


@dataclass
class StagedFiles(WriterCommitMessage):
    """A task's commit message: the files it staged (root-relative) and how many rows."""

    paths: list[str]
    records: int


# -- schema (driver, before any task runs) ---------------------------------


def _is_headers(t: DataType) -> bool:
    if not isinstance(t, ArrayType) or not isinstance(t.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in t.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], BinaryType | StringType)
    )


def check_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Refuse a DataFrame the sink cannot write, naming the column and what it must be."""
    columns = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in columns:
        raise InvalidConfigError(
            "the DataFrame needs a 'value' column (string or binary) to write to a topic; "
            f"its columns are: {', '.join(f.name for f in schema.fields)}"
        )
    expectations: dict[str, tuple[Callable[[DataType], bool], str]] = {
        "value": (lambda t: isinstance(t, StringType | BinaryType), "string or binary"),
        "key": (lambda t: isinstance(t, StringType | BinaryType), "string or binary"),
        "topic": (lambda t: isinstance(t, StringType), "string"),
        "partition": (lambda t: isinstance(t, INTEGER_TYPES), "an integer type"),
        "headers": (_is_headers, "array<struct<key:string,value:binary>>"),
    }
    for name, (ok, wanted) in expectations.items():
        dtype = columns.get(name)
        if dtype is not None and not ok(dtype):
            raise InvalidConfigError(
                f"column '{name}' must be {wanted}, but it is {dtype.simpleString()}"
            )
    if topic_option is None and "topic" not in columns:
        raise InvalidConfigError(
            "option 'topic': no topic to write to: set the 'topic' option or add a 'topic' column"
        )


# -- tasks -------------------------------------------------------------------


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    for i, field in enumerate(batch.schema):
        if field.name.lower() == name:
            return batch.column(i)
    return None


def to_staged(batch: pa.RecordBatch, topic_option: str | None) -> pa.RecordBatch:
    """One batch of the DataFrame as staged rows (column types already checked on the driver)."""
    n = batch.num_rows

    def binary(name: str) -> pa.Array:
        column = _column(batch, name)
        return pa.nulls(n, pa.binary()) if column is None else column.cast(pa.binary())

    topic = _column(batch, "topic")
    if topic_option is not None or topic is None:
        topic = pa.nulls(n, pa.string())
    else:
        topic = topic.cast(pa.string())
        if topic.null_count:
            raise InvalidRecordError(
                "column 'topic' is null in some rows and no 'topic' option is set"
            )
    partition = _column(batch, "partition")
    try:
        partition = pa.nulls(n, pa.int32()) if partition is None else partition.cast(pa.int32())
    except pa.ArrowInvalid as exc:
        raise InvalidRecordError(f"column 'partition' has a value out of range: {exc}") from exc
    headers = _column(batch, "headers")
    headers = (
        pa.nulls(n, SPARK_HEADERS_TYPE) if headers is None else headers.cast(SPARK_HEADERS_TYPE)
    )
    return pa.RecordBatch.from_arrays(
        [topic, partition, binary("key"), binary("value"), headers], schema=STAGED_SCHEMA
    )


def stage_batches(
    storage: Storage, path: str, batches: Iterable[pa.RecordBatch], topic_option: str | None
) -> int:
    """Write the batches' rows as one Parquet file at ``path``; no file (0) if there are none."""
    rows = (to_staged(b, topic_option) for b in batches if b.num_rows)
    first = next(rows, None)
    if first is None:
        return 0
    count = 0

    def write(sink: BinaryIO) -> None:
        nonlocal count
        with pq.ParquetWriter(sink, STAGED_SCHEMA, compression="snappy") as out:
            for batch in itertools.chain([first], rows):
                out.write_batch(batch)
                count += batch.num_rows

    storage.write_new(path, write)
    return count


def new_staging_path(write_id: str) -> str:
    return join(STAGING_DIR, write_id, f"{uuid.uuid4().hex}.parquet")


# -- driver ------------------------------------------------------------------


def read_staged(storage: Storage, paths: Iterable[str]) -> pa.Table:
    fs = storage.arrow_filesystem()
    tables = [pq.read_table(storage.arrow_path(p), filesystem=fs) for p in paths]
    if not tables:
        return STAGED_SCHEMA.empty_table()
    return pa.concat_tables(tables)


def by_topic(rows: pa.Table, topic_option: str | None) -> dict[str, pa.Table]:
    """Rows per target topic, each in the order they were staged."""
    payload = rows.drop_columns(["topic"])
    if topic_option is not None:
        return {topic_option: payload} if rows.num_rows else {}
    topics = rows.column("topic")
    names = [t for t in pc.unique(topics).to_pylist() if t is not None]
    if len(names) == 1:
        return {names[0]: payload}
    return {name: payload.filter(pc.equal(topics, name)) for name in names}


def append_staged(
    catalog: Catalog,
    rows: pa.Table,
    topic_option: str | None,
    app_transaction: tuple[str, int] | None = None,
) -> dict[str, AppendResult]:
    """Append staged rows, one commit per topic; all topics are validated before any commit.

    With ``app_transaction`` = (app id, version) each topic's commit happens at
    most once: a repeat returns ``duplicate=True`` and writes nothing.
    """
    prepared: list[tuple[str, PreparedBatch]] = []
    for topic, table in by_topic(rows, topic_option).items():
        topic_log = catalog.topic(topic)
        prepared.append((topic, topic_log.prepare(table)))
    results: dict[str, AppendResult] = {}
    for topic, batch in prepared:
        (result,) = catalog.topic(topic).append_prepared([batch], app_transaction=app_transaction)
        if isinstance(result, LakelogError):
            raise result
        results[topic] = result
    return results
