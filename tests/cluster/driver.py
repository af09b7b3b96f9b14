"""The workload as a Spark driver of its own, for a master the test process cannot join.

``python -m tests.cluster.driver MASTER RESULTS WORK ROOT [ROOT ...]`` builds
the session the maintenance jobs build (``compaction.spark_session``) against
MASTER, waits until ``--executors`` executors have registered (so the work is
spread over the cluster's workers), runs ``tests.cluster.workload`` on each
root (S3 settings from the AWS variables of this process) and writes the
results, with the application id, as JSON to RESULTS.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pyspark.sql import SparkSession

from compaction.spark_session import spark_session, stop_spark
from lakelog.storage import S3Settings
from tests.cluster.workload import run_workload

APP_NAME = "lakelog-cluster-workload"


def registered_executors(spark: SparkSession) -> int:
    """Executors known to the driver (the driver's own block manager not counted)."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    return int(status.size()) - 1


def wait_for_executors(spark: SparkSession, count: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while (registered := registered_executors(spark)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{registered} of {count} executors registered after {timeout_s} s")
        time.sleep(0.2)
    return registered


def s3_settings_for(url: str) -> S3Settings | None:
    """S3 settings from this process's environment, for an S3 root."""
    return S3Settings() if url.startswith("s3://") else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("master")
    parser.add_argument("results", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("roots", nargs="+")
    parser.add_argument("--executors", type=int, default=2)
    args = parser.parse_args()

    spark = spark_session(args.master, app_name=APP_NAME)
    try:
        executors = wait_for_executors(spark, args.executors, timeout_s=120)
        results = {
            "app_id": spark.sparkContext.applicationId,
            "executors": executors,
            "roots": {
                url: run_workload(spark, url, s3_settings_for(url), args.work / str(n))
                for n, url in enumerate(args.roots)
            },
        }
    finally:
        stop_spark(spark)
    args.results.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
