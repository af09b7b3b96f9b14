"""The sessions lakelog starts reach their Python workers over Unix domain sockets."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

from compaction.spark_session import UNIX_SOCKETS_TO_PYTHON_WORKERS


def test_python_workers_are_reached_over_unix_domain_sockets(spark: SparkSession) -> None:
    """PySpark's daemon listens on a Unix socket when this variable says ``true`` (any
    case); a worker forked from it inherits the variable, so the worker reports it."""

    def report(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import os

        for _ in batches:
            told = os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "unset").lower()
            yield pa.record_batch([pa.array([told])], names=["unix_sockets"])

    assert spark.conf.get(UNIX_SOCKETS_TO_PYTHON_WORKERS) == "true"
    rows = spark.range(1, numPartitions=1).mapInArrow(report, "unix_sockets string").collect()
    assert [r.unix_sockets for r in rows] == ["true"]
