"""One produce batch: the rows of a produce request, whatever wire format they came in.

Every front end decodes its format into a ``ProduceBatch``; ``from_columns`` is
the only place that builds produce Arrow tables, and a batch's rules against its
topic are checked here and nowhere else, so all front ends accept and refuse the
same records. Pure logic, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.column_buffers import binary_lengths, int64_range
from lakelog.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
)
from lakelog.records import PRODUCE_SCHEMA, Record

if TYPE_CHECKING:
    from lakelog.topic_config import TopicConfig

MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z

#: Per-row idempotence columns: set by ``prepare`` from a checked producer id and
#: sequence, never taken from a wire body.
PRODUCER_COLUMNS = ("producer_id", "sequence")

#: A column handed to ``from_columns``: Arrow (used as is when its type is right),
#: a Python sequence, or ``None`` for all nulls.
Column: TypeAlias = "pa.Array | pa.ChunkedArray | Sequence[Any] | None"

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


@dataclass(frozen=True)
class ProduceBatch:
    """Produce rows in exactly ``PRODUCE_SCHEMA``; build one with a ``from_*`` constructor.
    Immutable: ``with_*``/``take`` return new batches sharing its Arrow buffers."""

    table: pa.Table

    def __post_init__(self) -> None:
        if not self.table.schema.equals(PRODUCE_SCHEMA):
            raise TypeError("a ProduceBatch holds PRODUCE_SCHEMA rows; use a from_* constructor")

    # -- constructors -------------------------------------------------------------

    @classmethod
    def from_columns(
        cls,
        *,
        num_rows: int | None = None,
        partition: Column = None,
        timestamp: Column = None,
        key: Column = None,
        value: Column = None,
        headers: Column = None,
        producer_id: Column = None,
        sequence: Column = None,
    ) -> ProduceBatch:
        """The one builder of produce tables. Arrow columns of the schema's type are taken
        without a copy (the broker's fast JSON decoder relies on it); other Arrow types are
        cast, Python sequences converted (``timestamp`` in ms since the epoch, ``headers``
        as lists of ``{"key", "value"}``), and ``None`` is a column of nulls. Columns are
        trusted as well-formed Arrow; data from outside the process goes through
        ``from_arrow``, which checks it in full first."""
        given: Mapping[str, Column] = {
            "partition": partition,
            "timestamp": timestamp,
            "key": key,
            "value": value,
            "headers": headers,
            "producer_id": producer_id,
            "sequence": sequence,
        }
        lengths = {len(c) for c in given.values() if c is not None}
        if num_rows is not None:
            lengths.add(num_rows)
        if len(lengths) > 1:
            raise ValueError(f"produce columns of different lengths: {sorted(lengths)}")
        n = lengths.pop() if lengths else 0
        try:
            arrays = [_arrow(given[f.name], f.type, n) for f in PRODUCE_SCHEMA]
        except _ARROW_ERRORS as exc:
            raise InvalidRecordError(f"records do not match the record schema: {exc}") from exc
        if any(isinstance(a, pa.ChunkedArray) for a in arrays):
            arrays = [pa.chunked_array([a]) if isinstance(a, pa.Array) else a for a in arrays]
        return cls(pa.Table.from_arrays(arrays, schema=PRODUCE_SCHEMA))

    @classmethod
    def from_records(cls, records: Sequence[Record]) -> ProduceBatch:
        """``Record`` objects (the library's and the Python client's producer input)."""
        return cls.from_columns(
            num_rows=len(records),
            partition=[r.partition for r in records],
            timestamp=[r.timestamp_ms for r in records],
            key=[r.key for r in records],
            value=[r.value for r in records],
            headers=[[{"key": k, "value": v} for k, v in r.headers] for r in records],
        )

    @classmethod
    def from_arrow(cls, table: pa.Table) -> ProduceBatch:
        """A table from outside (an Arrow IPC body, a caller's table, Spark's staged rows):
        any subset of the produce columns, in types that cast to them."""
        unknown = set(table.column_names) - set(PRODUCE_SCHEMA.names)
        if unknown:
            raise InvalidRecordError(f"unknown record columns: {', '.join(sorted(unknown))}")
        try:
            # Arrow from outside may be malformed: check it in full here (~40 us per
            # 10,000 rows), since nothing below would.
            table.validate(full=True)
        except _ARROW_ERRORS as exc:
            raise InvalidRecordError(f"records do not match the record schema: {exc}") from exc
        if table.schema.equals(PRODUCE_SCHEMA):
            return cls(table)  # built for this schema: nothing to cast
        names = set(table.column_names)
        columns = {f.name: table.column(f.name) for f in PRODUCE_SCHEMA if f.name in names}
        return cls.from_columns(num_rows=table.num_rows, **columns)

    @classmethod
    def of(cls, records: ProduceInput) -> ProduceBatch:
        """Whatever an append was given, as a batch."""
        if isinstance(records, ProduceBatch):
            return records
        if isinstance(records, pa.Table):
            return cls.from_arrow(records)
        return cls.from_records(records)

    # -- derived batches ----------------------------------------------------------

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)

    def __len__(self) -> int:
        return self.num_rows

    def column(self, name: str) -> pa.ChunkedArray:
        return self.table.column(name)

    def with_column(self, name: str, column: pa.Array | pa.ChunkedArray) -> ProduceBatch:
        """This batch with one column replaced by one of the same type and length."""
        index = PRODUCE_SCHEMA.get_field_index(name)
        if column.type != PRODUCE_SCHEMA.field(name).type or len(column) != self.num_rows:
            raise ValueError(f"column {name!r} must be {len(self)} values of its schema type")
        return ProduceBatch(self.table.set_column(index, PRODUCE_SCHEMA.field(name), column))

    def with_partition(self, partition: int) -> ProduceBatch:
        """Every row sent to ``partition`` (a request that names one partition for all)."""
        return self.with_column(
            "partition", pa.array(np.full(self.num_rows, partition, np.int32), pa.int32())
        )

    def take(self, rows: Iterable[int]) -> ProduceBatch:
        """The given rows only, in the given order."""
        return ProduceBatch(self.table.take(pa.array(list(rows), pa.int64())))

    def record_sizes(self) -> npt.NDArray[np.int64]:
        return record_sizes(self.table)

    # -- the rules of a topic -----------------------------------------------------

    def check(self, topic: str, num_partitions: int, config: TopicConfig) -> None:
        """Raise the error naming the first record the topic refuses; nothing is written.

        Run after partitions are assigned: a ``null`` partition is not checked.
        """
        partitions = self.column("partition")
        chosen = (partitions.drop_null() if partitions.null_count else partitions).to_numpy()
        if len(chosen):
            lo, hi = int(chosen.min()), int(chosen.max())
            if lo < 0 or hi >= num_partitions:
                bad = lo if lo < 0 else hi
                index = _first_index(partitions, bad)
                raise UnknownTopicOrPartitionError(
                    f"record {index}: partition {bad} does not exist in topic {topic!r} "
                    f"(it has {num_partitions} partitions)",
                    record_index=index,
                )
        sizes = self.record_sizes()
        limit = config.max_message_bytes
        if len(sizes) and int(sizes.max()) > limit:
            index = int(sizes.argmax())
            raise MessageTooLargeError(
                f"record {index} is {int(sizes[index])} bytes, more than "
                f"max.message.bytes={limit} of topic {topic!r}",
                record_index=index,
            )
        keys = self.column("key")
        if config.compacted and keys.null_count:
            index = int(pc.index(pc.is_null(keys), True).as_py())
            raise InvalidRecordError(
                f"record {index}: topic {topic!r} is compacted "
                f"(cleanup.policy={config.get('cleanup.policy')}) "
                "and cannot accept a record without a key",
                record_index=index,
            )
        self._check_timestamps()
        self._check_headers()

    def _check_timestamps(self) -> None:
        ts = self.column("timestamp")
        given = int64_range(ts)
        if given is None:
            return
        earliest, latest = given
        if earliest < 0:
            index = _first_index(ts.cast(pa.int64()), earliest)
            raise InvalidTimestampError(
                f"record {index}: timestamp {earliest} is negative", record_index=index
            )
        if latest > MAX_TIMESTAMP_MS:
            index = _first_index(ts.cast(pa.int64()), latest)
            raise InvalidTimestampError(
                f"record {index}: timestamp {latest} is after 9999-12-31, "
                "the largest Delta timestamp",
                record_index=index,
            )

    def _check_headers(self) -> None:
        """Every header has a name (the stored column cannot hold a header without one)."""
        headers = self.column("headers")
        if not _has_headers(headers):
            return
        flat = pc.list_flatten(headers)
        missing = pc.is_null(pc.struct_field(flat, "key"))
        if pc.any(missing).as_py():
            where = int(pc.index(missing, True).as_py())
            index = int(pc.list_parent_indices(headers)[where].as_py())
            raise InvalidRecordError(f"record {index}: a header has no key", record_index=index)


#: What ``TopicLog.prepare``/``append`` take: a batch, or what ``ProduceBatch.of`` makes one of.
ProduceInput: TypeAlias = "ProduceBatch | Sequence[Record] | pa.Table"


def _arrow(column: Column, type_: pa.DataType, n: int) -> pa.Array | pa.ChunkedArray:
    if column is None:
        return pa.nulls(n, type_)
    if isinstance(column, pa.Array | pa.ChunkedArray):
        return column if column.type == type_ else column.cast(type_)
    if pa.types.is_timestamp(type_):
        return pa.array(column, pa.int64()).cast(type_)
    return pa.array(column, type_)


def _has_headers(headers: pa.ChunkedArray) -> bool:
    return headers.null_count < len(headers) and any(_list_values(c) for c in headers.chunks)


def record_sizes(table: pa.Table) -> npt.NDArray[np.int64]:
    """Per record: key + value + header bytes (what max.message.bytes limits)."""
    sizes = binary_lengths(table.column("key")) + binary_lengths(table.column("value"))
    headers = table.column("headers")
    if _has_headers(headers):
        flat = pc.list_flatten(headers)
        header_bytes = pc.add(
            pc.fill_null(pc.binary_length(pc.struct_field(flat, "key")), 0),
            pc.fill_null(pc.binary_length(pc.struct_field(flat, "value")), 0),
        ).to_numpy()
        parents = pc.list_parent_indices(headers).to_numpy()
        sizes = sizes + np.bincount(parents, weights=header_bytes, minlength=table.num_rows).astype(
            np.int64
        )
    return sizes


def _list_values(chunk: pa.ListArray) -> int:
    """How many elements the lists of ``chunk`` hold in all (nulls and empty lists: none)."""
    ends = np.frombuffer(
        chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1, offset=chunk.offset * 4
    )
    return int(ends[-1] - ends[0])


def _first_index(column: pa.ChunkedArray, value: int) -> int:
    """Where the offending value first occurs, so the error names the record at fault."""
    return int(pc.index(column, pa.scalar(value, column.type)).as_py())
