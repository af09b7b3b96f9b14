"""Making format ``lakelog`` available in a SparkSession."""

from __future__ import annotations

from pyspark.sql import SparkSession

from spark_connector.source import LakelogDataSource
from spark_connector.worker_python import use_driver_python_for_workers

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession) -> None:
    """Make ``format("lakelog")`` available in this session; calling it again is harmless.

    Also enables Python data source filter pushdown (off by default in
    Spark 4), which the reader needs to prune by partition, offset and
    timestamp; Spark refuses to plan a reader that supports pushdown while
    it is off. In local mode with no ``PYSPARK_PYTHON`` set, the session's
    Python workers are made to run this interpreter (see ``worker_python``),
    so a session from ``SparkSession.builder.getOrCreate()`` in a venv that is
    not activated still finds lakelog in its workers.
    """
    use_driver_python_for_workers(spark)
    spark.dataSource.register(LakelogDataSource)
    if spark.conf.get(PUSHDOWN_CONF, "false") != "true":
        spark.conf.set(PUSHDOWN_CONF, "true")
