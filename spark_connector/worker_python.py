"""The interpreter Spark's Python workers run: the driver's own in local mode, unless chosen.

PySpark starts its workers (data source planning and tasks, UDFs,
``mapInArrow``) with ``PYSPARK_PYTHON``, else ``python3`` from ``PATH``: with a
virtualenv's Python run without activating the venv, that is some other
interpreter without lakelog, and every query fails in its workers. On a
cluster the user chooses (``spark.pyspark.python``, see infra/spark-submit).
"""

from __future__ import annotations

import os
import sys

from pyspark.sql.session import SparkSession


def use_driver_python_for_workers(spark: object) -> None:
    """Make a local-mode session start its Python workers with this interpreter.

    Does nothing when ``PYSPARK_PYTHON`` is set (spark-submit sets it from
    ``spark.pyspark.python``), on a cluster master, or for Spark Connect.
    PySpark reads the interpreter each time it wraps a Python function, so
    this applies to everything set up after it.
    """
    if os.environ.get("PYSPARK_PYTHON") or not isinstance(spark, SparkSession):
        return
    context = spark.sparkContext
    if (context.master or "").startswith("local"):
        context.pythonExec = sys.executable
