"""Batch and streaming writers: ``df.write.format("lakelog")``, ``df.writeStream.format(...)``.

Batch: tasks stage their rows (``staging.py``); the driver's ``commit``
appends them with one atomic append per topic and deletes the staging files.

Streaming: exactly once per micro-batch. ``commit(messages, batchId)`` appends
with the Delta app transaction ``(f"spark-query.{query id}", batchId)`` in the
same commit as the records, so a micro-batch Spark re-runs after a crash is a
no-op for every topic it had already reached. The query id must be stable
across restarts and new for a new query: the ``writerId`` option if given (the
caller then owns that promise), else the id Spark keeps in
``<checkpointLocation>/metadata`` (``StreamingQuery.id``), so deleting the
checkpoint makes a new query, as Delta's exactly-once sink behaves. A
streaming write with neither is refused at start.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from lakelog.catalog import Catalog
from lakelog.storage import join, open_storage
from lakelog.topic_log import AppendResult
from spark_connector.options import WriteOptions, option_error
from spark_connector.reading import storage_for
from spark_connector.staging import (
    STAGING_DIR,
    StagedFiles,
    append_staged,
    new_staging_path,
    read_staged,
    stage_batches,
)

log = logging.getLogger(__name__)

APP_ID_PREFIX = "spark-query."


def _paths(messages: Sequence[WriterCommitMessage | None]) -> list[str]:
    return [p for m in messages if isinstance(m, StagedFiles) for p in m.paths]


def commit_paths(
    opts: WriteOptions, paths: list[str], app_transaction: tuple[str, int] | None = None
) -> dict[str, AppendResult]:
    """Driver side of every write: append the staged files' rows."""
    if not paths:
        return {}
    storage = opts.storage.open()
    catalog = Catalog(storage)
    try:
        rows = read_staged(storage, paths)
        return append_staged(catalog, rows, opts.topic, app_transaction)
    finally:
        catalog.close()


def delete_paths(opts: WriteOptions, paths: list[str]) -> None:
    storage = storage_for(opts.storage)
    for path in paths:
        storage.delete(path)


class _Stager:
    """The tasks' half of both writers: stage the rows under this write's id."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedFiles:
        path = new_staging_path(self.write_id)
        count = stage_batches(storage_for(self.opts.storage), path, iterator, self.opts.topic)
        return StagedFiles([path] if count else [], count)


class LakelogBatchWriter(_Stager, DataSourceArrowWriter):
    """Created on the driver; pickled to the tasks and back to the driver for commit/abort."""

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        try:
            commit_paths(self.opts, _paths(messages))
        finally:
            self._clean()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._clean()

    def _clean(self) -> None:
        storage_for(self.opts.storage).delete_tree(join(STAGING_DIR, self.write_id))


def query_id_from_checkpoint(opts: WriteOptions) -> str:
    """The query id Spark keeps in ``<checkpointLocation>/metadata``."""
    location = opts.checkpoint_location
    assert location is not None
    try:
        storage = open_storage(location.rstrip("/"), opts.storage.s3_settings())
        metadata = json.loads(storage.read_bytes("metadata"))
        query_id = metadata["id"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise option_error(
            "checkpointLocation",
            f"cannot read the query id from {location}/metadata ({exc}); set option "
            "'writerId' to a stable id for this query instead",
        ) from exc
    return str(query_id)


def query_app_id(opts: WriteOptions) -> str:
    """The Delta app id that makes this query's micro-batches exactly-once (see module doc)."""
    if opts.writer_id is not None:
        return APP_ID_PREFIX + opts.writer_id
    if opts.checkpoint_location is not None:
        return APP_ID_PREFIX + query_id_from_checkpoint(opts)
    raise option_error(
        "checkpointLocation",
        "a streaming write to lakelog needs a stable query identity for exactly-once "
        "delivery: set .option('checkpointLocation', ...) on writeStream, or option 'writerId'",
    )


class LakelogStreamWriter(_Stager, DataSourceStreamArrowWriter):
    """One per micro-batch commit on the driver; the tasks' copy only stages rows."""

    def __init__(self, opts: WriteOptions) -> None:
        if opts.writer_id is None and opts.checkpoint_location is None:
            query_app_id(opts)  # raises the error that says what to set
        super().__init__(opts)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        paths = _paths(messages)
        try:
            results = commit_paths(self.opts, paths, (query_app_id(self.opts), batchId))
            if any(r.duplicate for r in results.values()):
                log.warning("micro-batch %d was already committed; not written again", batchId)
        finally:
            delete_paths(self.opts, paths)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        delete_paths(self.opts, _paths(messages))
