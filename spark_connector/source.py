"""The ``lakelog`` Python data source: wires options to the readers and writers."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from lakelog.errors import InvalidConfigError
from lakelog.typed_columns import TYPED_COLUMNS, nullable
from spark_connector.batch_reader import LakelogBatchReader
from spark_connector.options import (
    include_headers,
    parse_read_options,
    parse_write_options,
)
from spark_connector.schema import ddl
from spark_connector.staging import check_write_schema
from spark_connector.stream_reader import LakelogStreamReader
from spark_connector.topics import open_topics
from spark_connector.writers import LakelogBatchWriter, LakelogStreamWriter

FORMAT = "lakelog"


def _typed_of(schema: StructType) -> tuple[pa.Field, ...]:
    """The typed columns of the schema Spark settled on (the source's own, or the user's)."""
    names = [f.name for f in schema.fields if f.name in TYPED_COLUMNS]
    if not names:
        return ()
    arrow = to_arrow_schema(StructType([schema[name] for name in names]), timezone="UTC")
    return tuple(pa.field(f.name, nullable(f.type)) for f in arrow)


class LakelogDataSource(DataSource):
    """Topics of a lakelog storage root as a Spark source and sink (Spark's Kafka schema)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _options(self) -> dict[str, str]:
        return {str(k).lower(): str(v) for k, v in self.options.items()}

    def schema(self) -> str:
        return ddl(include_headers(self._options()), self.typed())

    def typed(self) -> tuple[pa.Field, ...]:
        """The typed columns of the subscribed topics (``TopicSource.typed_fields``), as
        their tables' schemas hold them now; none where the options do not name topics
        of a readable root (the reader then reports what is wrong)."""
        try:
            opts = parse_read_options(self._options(), streaming=False)
            with open_topics(opts.storage) as source:
                return source.typed_fields(source.topics(opts.subscription))
        except Exception:  # the read itself raises the error, with its usual message
            return ()

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self._options(), streaming=False)
        return LakelogBatchReader(opts, _typed_of(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_read_options(self._options(), streaming=True)
        return LakelogStreamReader(opts, typed=_typed_of(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise InvalidConfigError(
                "save mode 'overwrite' is not supported: a topic is an append-only log; "
                "use mode('append')"
            )
        opts = parse_write_options(self._options())
        check_write_schema(schema, opts.topic)
        return LakelogBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Complete output mode (overwrite=True) appends the whole result every
        # micro-batch, as Spark's Kafka sink does: a log has nothing to truncate.
        opts = parse_write_options(self._options())
        check_write_schema(schema, opts.topic)
        return LakelogStreamWriter(opts)
