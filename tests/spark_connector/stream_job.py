"""A Structured Streaming query in a process of its own: JSON files in, a lakelog topic out.

``python -m tests.spark_connector.stream_job ROOT INPUT_DIR CHECKPOINT [options]``
starts a local-mode SparkSession (``compaction.spark_session``), reads the JSON
files of INPUT_DIR one file per micro-batch (Spark's file source, replayable from
its checkpoint) and writes every row to topic ``out`` through the lakelog sink,
checkpointing in CHECKPOINT. It runs until it is killed, or with
``--available-now`` until the input present at its start is written.

``--hold-after-commit BATCH MARKER``: the sink commits micro-batch BATCH as
always, then writes MARKER and blocks before returning to Spark, so the test
can kill the query at the worst moment for exactly-once delivery: the batch is
in the topic but not yet in Spark's commit log, and a restart runs it again.
The hold wraps the real sink and changes nothing it does.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

import spark_connector
from compaction.spark_session import spark_session
from spark_connector.options import parse_write_options
from spark_connector.source import LakelogDataSource
from spark_connector.staging import check_write_schema
from spark_connector.writers import LakelogStreamWriter

INPUT_SCHEMA = "key string, value string"
TOPIC = "out"
HOLDING_FORMAT = "lakelog_holding"


class HoldingStreamWriter(LakelogStreamWriter):
    """The lakelog stream writer, blocking after its commit of one chosen micro-batch."""

    def __init__(self, source_options: dict[str, str], hold_batch: int, marker: str) -> None:
        opts = parse_write_options(source_options)
        super().__init__(opts)
        self.hold_batch = hold_batch
        self.marker = marker

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        super().commit(messages, batchId)
        if batchId == self.hold_batch:
            Path(self.marker).write_text(str(batchId))
            while True:  # the test SIGKILLs the query while it waits here
                time.sleep(60)


class HoldingDataSource(LakelogDataSource):
    """``lakelog`` with ``holdAfterBatch`` and ``holdMarker`` options for its stream writer."""

    @classmethod
    def name(cls) -> str:
        return HOLDING_FORMAT

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = self._options()
        check_write_schema(schema, options.get("topic"))
        return HoldingStreamWriter(options, int(options["holdafterbatch"]), options["holdmarker"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("input_dir")
    parser.add_argument("checkpoint")
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--hold-after-commit", nargs=2, metavar=("BATCH", "MARKER"))
    args = parser.parse_args()

    spark = spark_session("local[2]", app_name="lakelog-stream-job")
    spark_connector.register(spark)
    spark.dataSource.register(HoldingDataSource)
    rows = (
        spark.readStream.schema(INPUT_SCHEMA)
        .option("maxFilesPerTrigger", 1)  # one input file per micro-batch
        .json(args.input_dir)
    )
    writer = (
        rows.writeStream.format("lakelog")
        .option("root", args.root)
        .option("topic", TOPIC)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.hold_after_commit:
        batch, marker = args.hold_after_commit
        writer = (
            writer.format(HOLDING_FORMAT)
            .option("holdAfterBatch", batch)
            .option("holdMarker", marker)
        )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    query.awaitTermination()
    exception = query.exception()
    if exception is not None:
        raise SystemExit(f"the query failed: {exception}")
    spark.stop()


if __name__ == "__main__":
    main()
