"""The SparkSession the maintenance jobs run on.

Local mode by default (``local[2]``), any master via ``--master`` or
spark-submit. Python workers must run the interpreter lakelog is installed in,
so ``PYSPARK_PYTHON`` defaults to this one.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def spark_session(master: str | None = None, app_name: str = "lakelog") -> SparkSession:
    """Get or create the session; an existing one (spark-submit, notebooks) is reused."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit the gateway is already up and knows its master: keep it.
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(master or os.environ.get("LAKELOG_SPARK_MASTER", "local[2]"))
    return (
        builder.config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("LAKELOG_SHUFFLE_PARTITIONS", "8"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("LAKELOG_SPARK_DRIVER_MEMORY", "2g"))
        .getOrCreate()
    )
