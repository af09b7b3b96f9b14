"""Making format ``lakelog`` available in a SparkSession."""

from __future__ import annotations

from pyspark.sql import SparkSession

from spark_connector.source import FORMAT, LakelogDataSource
from spark_connector.worker_python import use_driver_python_for_workers

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession) -> None:
    """Make ``format("lakelog")`` available in this session; calling it again is harmless.

    The data source is registered once per session: Spark logs a warning each
    time a registration replaces one (``DataSourceManager: The data source
    lakelog replaced a previously registered data source``), so a session that
    already has format ``lakelog`` keeps it. Also enables Python data source
    filter pushdown (off by default in Spark 4): Spark refuses to plan a reader
    that supports pushdown while it is off. Local Python workers are made to
    run this interpreter (``worker_python``).
    """
    use_driver_python_for_workers(spark)
    if not has_format(spark):
        spark.dataSource.register(LakelogDataSource)
    if spark.conf.get(PUSHDOWN_CONF, "false") != "true":
        spark.conf.set(PUSHDOWN_CONF, "true")


def has_format(spark: SparkSession) -> bool:
    """Whether this session's data source registry already holds format ``lakelog``.

    Asked of the session's JVM (each session has its own registry); a session
    without a JVM gateway (Spark Connect) cannot be asked, and registers each time.
    """
    session = getattr(spark, "_jsparkSession", None)
    if not isinstance(spark, SparkSession) or session is None:
        return False
    return bool(session.sessionState().dataSourceManager().dataSourceExists(FORMAT))
