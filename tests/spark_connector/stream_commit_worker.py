"""A process that commits streaming micro-batches through the connector's stream writer.

``python -m tests.spark_connector.stream_commit_worker ROOT WRITER_ID BATCHES`` runs,
for batch ids 0..BATCHES-1, exactly what Spark does per micro-batch: tasks stage
their rows (``write``), then the driver commits them (``commit(messages,
batchId)``). It always starts again from batch 0, as if Spark had lost its
commit log too, so every batch a killed run committed is repeated. The test
kills it with SIGKILL at random moments.
"""

from __future__ import annotations

import sys

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from spark_connector.schema import spark_schema
from spark_connector.source import LakelogDataSource

RECORDS_PER_BATCH = 25


def batch_rows(batch_id: int) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "key": pa.array([f"b{batch_id}" for _ in range(RECORDS_PER_BATCH)]),
            "value": pa.array([f"{batch_id}-{i}" for i in range(RECORDS_PER_BATCH)]),
        }
    )


def main(root: str, writer_id: str, batches: int) -> None:
    source = LakelogDataSource({"root": root, "topic": "out", "writerId": writer_id})
    for batch_id in range(batches):
        writer = source.streamWriter(spark_schema(False), overwrite=False)
        half = RECORDS_PER_BATCH // 2
        rows = batch_rows(batch_id)
        messages: list[WriterCommitMessage | None] = [
            writer.write(iter([rows.slice(0, half)])),
            writer.write(iter([rows.slice(half)])),
        ]
        writer.commit(messages, batch_id)
        print(batch_id, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
