"""The interpreter Spark's Python workers run: the driver's own in local mode, unless chosen.

PySpark runs Python code outside the driver in worker processes: the
planning of a Python data source, its read and write tasks, UDFs and
``mapInArrow`` functions. It starts them with ``PYSPARK_PYTHON`` (which
spark-submit sets from ``spark.pyspark.python``), or with ``python3`` from
``PATH`` when that is unset. Running a virtualenv's Python without activating
the venv, ``python3`` is then some other interpreter, without lakelog or
pyarrow, and every query over a topic fails in its workers.

In local mode the workers run on this machine, so the interpreter running the
driver is the right one and is used when nothing was chosen. On a cluster the
driver's interpreter path means nothing on the executors: the user chooses
(``PYSPARK_PYTHON`` / ``spark.pyspark.python``, see infra/spark-submit), and a
worker that cannot import lakelog says so (``lakelog.extras``).
"""

from __future__ import annotations

import os
import sys

from pyspark.sql.session import SparkSession

#: The variable PySpark reads for its workers' interpreter (spark-submit sets
#: it from ``spark.pyspark.python``).
WORKER_PYTHON_VARIABLE = "PYSPARK_PYTHON"


def worker_python_chosen() -> bool:
    """True when the user (or spark-submit) named the workers' interpreter."""
    return bool(os.environ.get(WORKER_PYTHON_VARIABLE))


def use_driver_python_for_workers(spark: object) -> None:
    """Make a local-mode session start its Python workers with this interpreter.

    Does nothing when ``PYSPARK_PYTHON`` is set, on a cluster master, or for a
    Spark Connect session (whose workers run on the server). PySpark reads
    the interpreter from the context each time it wraps a Python function,
    so this applies to every data source, UDF and ``mapInArrow`` set up after
    it.
    """
    if worker_python_chosen() or not isinstance(spark, SparkSession):
        return
    context = spark.sparkContext
    if (context.master or "").startswith("local"):
        context.pythonExec = sys.executable
