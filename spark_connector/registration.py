"""Making format ``lakelog`` available in a SparkSession."""

from __future__ import annotations

from pyspark.sql import SparkSession

from spark_connector.source import LakelogDataSource
from spark_connector.worker_python import use_driver_python_for_workers

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession) -> None:
    """Make ``format("lakelog")`` available in this session; calling it again is harmless.

    Also enables Python data source filter pushdown (off by default in Spark
    4): Spark refuses to plan a reader that supports pushdown while it is off.
    Local Python workers are made to run this interpreter (``worker_python``).
    """
    use_driver_python_for_workers(spark)
    spark.dataSource.register(LakelogDataSource)
    if spark.conf.get(PUSHDOWN_CONF, "false") != "true":
        spark.conf.set(PUSHDOWN_CONF, "true")
