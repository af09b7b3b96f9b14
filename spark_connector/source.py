"""The ``lakelog`` Python data source: wires options to the readers and writers."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from lakelog.errors import InvalidConfigError
from spark_connector.batch_reader import LakelogBatchReader
from spark_connector.options import (
    include_headers,
    parse_read_options,
    parse_write_options,
)
from spark_connector.schema import ddl
from spark_connector.staging import check_write_schema
from spark_connector.stream_reader import LakelogStreamReader
from spark_connector.writers import LakelogBatchWriter, LakelogStreamWriter

FORMAT = "lakelog"


class LakelogDataSource(DataSource):
    """Topics of a lakelog storage root as a Spark source and sink (Spark's Kafka schema)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _options(self) -> dict[str, str]:
        return {str(k).lower(): str(v) for k, v in self.options.items()}

    def schema(self) -> str:
        return ddl(include_headers(self._options()))

    def reader(self, schema: StructType) -> DataSourceReader:
        return LakelogBatchReader(parse_read_options(self._options(), streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return LakelogStreamReader(parse_read_options(self._options(), streaming=True))

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
