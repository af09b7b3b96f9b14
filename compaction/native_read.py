"""Reading segments with Spark's own Parquet reader, where Spark can open the root itself.

Spark's Parquet scan of the file list the Delta snapshot gives reads the rows
in the JVM, column-pruned, with no row crossing into Python. Whether Spark can
open a root is ``spark_connector.native_scan.not_native``; otherwise the jobs
read through lakelog's storage layer in Python tasks (``segment_tasks``).

Inputs are checked on the driver first (``check_footers``), so a bad segment is
refused with the same ``CORRUPT_MESSAGE`` as on the Python path; a Spark job
that fails anyway (a file changed after the check) is diagnosed the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from compaction.segment_tasks import SegmentRef, out_of_range, segment_errors
from lakelog.errors import CorruptRecordError, LakelogError
from lakelog.storage import Storage, join
from lakelog.storage.fsspec_backend import S3Storage
from spark_connector.native_scan import not_native, s3a_options, segment_files

T = TypeVar("T")

#: Footers read at once on the driver (each read is one small request).
FOOTER_THREADS = 8


class ReadPath(Enum):
    """How a job reads segment rows."""

    SPARK_PARQUET = "spark parquet"
    STORAGE_LAYER = "storage layer"


def read_path_for(spark: SparkSession, storage: Storage) -> ReadPath:
    """Spark's reader wherever Spark can open the root, else lakelog's storage layer."""
    if not_native(spark, storage.url) is None:
        return ReadPath.SPARK_PARQUET
    return ReadPath.STORAGE_LAYER


def read_segment_files(
    spark: SparkSession,
    storage: Storage,
    table_path: str,
    refs: Sequence[SegmentRef],
    typed: Sequence[pa.Field] = (),
) -> DataFrame:
    """Every row of the given segments, with ``partition`` from the Delta partition path,
    and the table's ``typed`` columns.

    An S3 root is read with the endpoint and credentials lakelog opened it with.
    """
    options: dict[str, str] = {}
    if isinstance(storage, S3Storage):
        s = storage.settings
        options = s3a_options(
            s.endpoint_url, s.access_key_id, s.secret_access_key, s.region, s.session_token
        )
    return segment_files(spark, storage, table_path, [ref.path for ref in refs], options, typed)


def footer_offsets(storage: Storage, table_path: str, ref: SegmentRef) -> tuple[int, int] | None:
    """The offsets a segment's footer says it holds (``None`` if it keeps no statistics).

    A segment that is missing or not Parquet is ``CORRUPT_MESSAGE`` naming it;
    a storage failure is ``KAFKA_STORAGE_ERROR``, retriable.
    """
    full = join(table_path, ref.path)
    with (
        segment_errors(ref, lambda: storage.exists(full)),
        storage.arrow_filesystem().open_input_file(storage.arrow_path(full)) as source,
    ):
        footer = pq.read_metadata(source)
    if footer.num_rows == 0:
        return (ref.base_offset, ref.base_offset)
    names = footer.schema.names
    if "offset" not in names:
        raise CorruptRecordError(
            f"segment {ref.path} of partition {ref.partition} is unreadable: "
            "it has no offset column"
        )
    column = names.index("offset")
    low: int | None = None
    high: int | None = None
    for i in range(footer.num_row_groups):
        stats = footer.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max or stats.null_count:
            return None
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    return None if low is None or high is None else (int(low), int(high))


def check_footers(
    storage: Storage, table_path: str, refs: Sequence[SegmentRef]
) -> list[SegmentRef]:
    """Check every input's footer on the driver; returns those whose offsets it cannot vouch for.

    lakelog's writers keep offset statistics in every row group, so footers
    answer without reading a row; segments without them go to ``check_offset_ranges``.
    """
    with ThreadPoolExecutor(FOOTER_THREADS) as pool:
        found = list(pool.map(lambda ref: footer_offsets(storage, table_path, ref), refs))
    unchecked = []
    for ref, offsets in zip(refs, found, strict=True):
        if offsets is None:
            unchecked.append(ref)
        elif (error := out_of_range(ref, *offsets)) is not None:
            raise error
    return unchecked


def check_offset_ranges(rows: DataFrame, refs: Sequence[SegmentRef]) -> None:
    """Check the offsets of segments without footer statistics with a Spark scan of ``offset``."""
    by_name = {ref.path.rsplit("/", 1)[-1]: ref for ref in refs}  # segment names are unique
    file_name = F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1)
    seen = (
        rows.select("offset", file_name.alias("file"))
        .groupBy("file")
        .agg(F.min("offset").alias("low"), F.max("offset").alias("high"))
        .collect()
    )
    for row in seen:
        ref = by_name.get(row["file"])
        if ref is not None and (error := out_of_range(ref, row["low"], row["high"])) is not None:
            raise error


def checked_segment_files(
    spark: SparkSession,
    storage: Storage,
    table_path: str,
    refs: Sequence[SegmentRef],
    typed: Sequence[pa.Field] = (),
) -> DataFrame:
    """``read_segment_files`` of segments first checked as ``check_footers`` says."""
    unchecked = check_footers(storage, table_path, refs)
    if unchecked:
        check_offset_ranges(read_segment_files(spark, storage, table_path, unchecked), unchecked)
    return read_segment_files(spark, storage, table_path, refs, typed)


def native_action(
    action: Callable[[], T], storage: Storage, table_path: str, refs: Sequence[SegmentRef]
) -> T:
    """Run a Spark action over natively read segments; a bad segment is named as lakelog does."""
    try:
        return action()
    except LakelogError:
        raise
    except Exception:
        check_footers(storage, table_path, refs)
        raise
