"""The broker's ``ColumnDecoder``: typed columns of topics whose records are validated.

Only a side (key or value) that validation on produce checks is typed: only then
is every record stored from now on framed with a schema registered under its
subject and known to decode (docs/architecture.md, "Typed columns"). Records are
grouped by schema id with numpy over the column's buffers; each group is
decoded with its schema and built as one Arrow array, then fitted to the type
holding the table's and every group's (``lakelog.typed_columns.merge_types``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakelog.topic_config import TopicConfig
from lakelog.typed_columns import KEY_FIELDS, VALUE_FIELDS, assemble
from server.schema_registry import avro, protobuf
from server.schema_registry.avro_columns import AvroColumns, avro_columns
from server.schema_registry.framing import framed_ids
from server.schema_registry.json_columns import JsonColumns, json_columns
from server.schema_registry.protobuf_columns import ProtobufColumns
from server.schema_registry.types import ParsedSchema, SchemaType

log = logging.getLogger(__name__)

Columns = AvroColumns | JsonColumns | ProtobufColumns

#: The topic configs that turn validation on produce on, per side.
VALIDATION_CONFIGS = {
    "key": "confluent.key.schema.validation",
    "value": "confluent.value.schema.validation",
}
SIDES = (("value", VALUE_FIELDS), ("key", KEY_FIELDS))


def validated(config: TopicConfig, side: str) -> bool:
    return bool(config.get(VALIDATION_CONFIGS[side]))


class RegistryColumns:
    """Typed columns from the registry's schemas; one per broker, shared by its topics.

    A schema id names one schema forever, so its decoding is built once.
    """

    def __init__(self, schema_by_id: Callable[[int], ParsedSchema]) -> None:
        self._schema_by_id = schema_by_id
        self._columns: dict[int, Columns | None] = {}
        self._lock = threading.Lock()

    def __call__(
        self, topic: str, config: TopicConfig, rows: pa.Table, stored: Mapping[str, pa.DataType]
    ) -> dict[str, pa.Array]:
        out: dict[str, pa.Array] = {}
        for side, name in SIDES:
            if not validated(config, side):
                continue
            column = rows.column(side).combine_chunks()
            array = self.typed(column, stored.get(name))
            if array is not None:
                out[name] = array
        return out

    def columns_of(self, schema_id: int) -> Columns | None:
        """The decoding of one schema id; None where it is not typed (a root no struct
        holds, a recursive Protobuf message, an unknown id)."""
        with self._lock:
            if schema_id in self._columns:
                return self._columns[schema_id]
        found: Columns | None = None
        try:
            schema = self._schema_by_id(schema_id)
            if schema.schema_type is SchemaType.AVRO:  # its references' types come first
                *references, own = avro.native(schema).sources
                found = avro_columns(own, references)
            elif schema.schema_type is SchemaType.JSON:  # its references are in its resolver
                found = json_columns(schema)
            elif schema.schema_type is SchemaType.PROTOBUF:  # its imports are in its pool
                found = ProtobufColumns(protobuf.native(schema))
        except Exception:  # an untyped schema leaves its rows' columns null
            log.info("schema %d gives no typed columns", schema_id, exc_info=True)
            found = None
        with self._lock:
            self._columns[schema_id] = found
        return found

    def typed(self, column: pa.BinaryArray, stored: pa.DataType | None) -> pa.Array | None:
        """The typed column of one binary column, or None if no row of it is typed."""
        ids, payloads, ends = framed_ids(column)
        data_buffer = column.buffers()[2]
        if data_buffer is None:
            return None
        data = memoryview(data_buffer)
        pieces: list[tuple[npt.NDArray[np.int64], pa.Array]] = []
        for schema_id in np.unique(ids[ids >= 0]).tolist():
            columns = self.columns_of(int(schema_id))
            if columns is None:
                continue
            rows = np.flatnonzero(ids == schema_id)
            array = columns.typed_column(data, payloads[rows], ends[rows])
            if array is not None:
                pieces.append((rows, array))
        return assemble(len(column), pieces, stored)
