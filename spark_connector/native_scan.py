"""Batch reads on Spark's own Parquet scan: ``read_topic(spark, "orders", root=...)``.

The ``lakelog`` Python data source moves every row from a Python worker into
the JVM; for a batch read that is pure cost, since segments are plain Parquet
files Spark reads itself. Planning is the data source's (same options, errors
and offsets); what is read, and when it falls back: spark_connector/README.md.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lakelog.storage import Storage, join
from spark_connector.batch_reader import batch_ranges
from spark_connector.file_plan import TopicFiles, plan_files
from spark_connector.options import ReadOptions, parse_read_options
from spark_connector.registration import register
from spark_connector.schema import SEGMENT_DDL, spark_schema, typed_ddl
from spark_connector.source import FORMAT
from spark_connector.topics import open_topics

log = logging.getLogger(__name__)

#: Options that decide the Python data source's input partitions; Spark's file
#: scan splits by bytes instead, so a read that gives them keeps the Python path.
PYTHON_ONLY_OPTIONS = ("maxRecordsPerPartition", "minPartitions")

#: Root URL scheme -> the Hadoop filesystem scheme Spark would open it with.
_HADOOP_SCHEMES = {"": "file", "file": "file", "hdfs": "hdfs", "s3": "s3a", "s3a": "s3a"}

#: Hadoop's own filesystem classes, used when the session's conf names none.
_FILESYSTEMS = {
    "file": "org.apache.hadoop.fs.LocalFileSystem",
    "hdfs": "org.apache.hadoop.hdfs.DistributedFileSystem",
    "s3a": "org.apache.hadoop.fs.s3a.S3AFileSystem",
}


@dataclass(frozen=True)
class ScanChoice:
    """Which path a batch read takes, and why."""

    native: bool
    reason: str


def hadoop_scheme(url: str) -> str | None:
    """The Hadoop filesystem scheme that reads a root URL, or None if only lakelog can."""
    return _HADOOP_SCHEMES.get(urlparse(url).scheme.lower())


def _hadoop_has(spark: SparkSession, scheme: str) -> bool | None:
    """Whether the session's Hadoop has a filesystem for ``scheme``; None without a JVM."""
    jvm = getattr(spark, "_jvm", None)
    jsc = getattr(spark, "_jsc", None)
    if jvm is None or jsc is None:
        return None
    configured = jsc.hadoopConfiguration().get(f"fs.{scheme}.impl")
    return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(configured or _FILESYSTEMS[scheme]))


def not_native(spark: SparkSession, url: str) -> str | None:
    """Why Spark cannot read the root at ``url`` with its own filesystems; None if it can.

    The one rule of the native scan and the maintenance jobs: the session's
    Hadoop must load a filesystem class for the scheme (``fs.<scheme>.impl``,
    else Hadoop's own); ``s3://`` is read as ``s3a://`` if hadoop-aws is there.
    """
    scheme = hadoop_scheme(url)
    if scheme is None:
        return f"root {url!r} is readable only through lakelog's storage layer"
    has = _hadoop_has(spark, scheme)
    if has is None:
        return "the session has no JVM gateway (Spark Connect)"
    if not has:
        return (
            f"Spark's Hadoop has no filesystem for {scheme}:// (for S3, hadoop-aws is not on "
            "the classpath); lakelog's storage layer reads the root instead"
        )
    return None


def scan_choice(spark: SparkSession, opts: ReadOptions, options: Mapping[str, str]) -> ScanChoice:
    """Native when Spark can read the root itself and no option needs the Python source."""
    lowered = {k.lower() for k in options}
    for name in PYTHON_ONLY_OPTIONS:
        if name.lower() in lowered:
            return ScanChoice(
                False,
                f"option '{name}' shapes the input partitions the Python data source plans",
            )
    why_not = not_native(spark, opts.storage.url)
    if why_not is not None:
        return ScanChoice(False, why_not)
    scheme = hadoop_scheme(opts.storage.url)
    return ScanChoice(True, f"Spark's Parquet scan of the snapshot's files ({scheme}://)")


def spark_uri(storage: Storage, path: str) -> str:
    """The URI under which Spark's Hadoop layer opens ``path`` of ``storage``."""
    uri = storage.delta_uri(path)
    scheme = hadoop_scheme(storage.url)
    if scheme == "file":
        return "file://" + uri
    if scheme == "s3a":
        return "s3a://" + uri.split("://", 1)[1]
    return uri


def s3a_options(
    endpoint: str | None,
    access_key_id: str | None,
    secret_access_key: str | None,
    region: str | None,
    session_token: str | None = None,
) -> dict[str, str]:
    """S3 settings as per-read Hadoop settings (Spark passes ``fs.*`` read options to Hadoop)."""
    given = {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.access.key": access_key_id,
        "fs.s3a.secret.key": secret_access_key,
        "fs.s3a.endpoint.region": region,
        "fs.s3a.session.token": session_token,
    }
    out = {k: v for k, v in given.items() if v}
    if endpoint:
        out["fs.s3a.path.style.access"] = "true"
    if session_token:
        out["fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        )
    return out


def segment_files(
    spark: SparkSession,
    storage: Storage,
    table_path: str,
    paths: Iterable[str],
    options: Mapping[str, str],
    typed: Sequence[pa.Field] = (),
) -> DataFrame:
    """Segment files of one table on Spark's Parquet reader, ``partition`` from their paths;
    ``typed`` columns and fields a file lacks read as null."""
    return (
        spark.read.schema(SEGMENT_DDL + typed_ddl(typed))
        .options(**options)
        .option("basePath", spark_uri(storage, table_path))
        .parquet(*[spark_uri(storage, join(table_path, p)) for p in paths])
    )


def _row_filter(files: TopicFiles) -> Column | None:
    """Rows of the listed files inside each partition's ``[start, end)``; None if all are."""
    if files.exact:
        return None
    conditions: list[Column] = []
    whole = [p.partition for p in files.partitions if p.exact]
    if whole:
        conditions.append(F.col("partition").isin(whole))
    for p in files.partitions:
        if not p.exact:
            conditions.append(
                (F.col("partition") == p.partition)
                & (F.col("offset") >= p.start)
                & (F.col("offset") < p.end)
            )
    return functools.reduce(lambda a, b: a | b, conditions)


def _topic_frame(
    spark: SparkSession,
    opts: ReadOptions,
    storage: Storage,
    files: TopicFiles,
    typed: Sequence[pa.Field] = (),
) -> DataFrame:
    spec = opts.storage
    options = (
        s3a_options(spec.endpoint, spec.access_key_id, spec.secret_access_key, spec.region)
        if spec.is_s3
        else {}
    )
    if not opts.fail_on_data_loss:
        options["ignoreMissingFiles"] = "true"
    paths = [path for p in files.partitions for path in p.paths]
    stored = segment_files(spark, storage, files.table_path, paths, options, typed)
    keep = _row_filter(files)
    if keep is not None:
        stored = stored.where(keep)
    columns = [
        F.col("key"),
        F.col("value"),
        # Nullable, as in the data source's schema: a bare literal is a non-null
        # column; nullif (a topic name is never empty) folds back to the literal.
        F.nullif(F.lit(files.topic), F.lit("")).alias("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp"),
        F.col("timestamp_type").alias("timestampType"),
    ]
    if opts.include_headers:
        # Spark's Kafka source gives null, not an empty array, for a record without headers.
        columns.append(F.when(F.size("headers") > 0, F.col("headers")).alias("headers"))
    columns += [F.col(f"`{f.name}`") for f in typed]
    return stored.select(*columns)


def native_frame(spark: SparkSession, opts: ReadOptions) -> DataFrame:
    """The read as Spark's Parquet scan of the files it needs (planned now, on the driver)."""
    with open_topics(opts.storage) as source:
        topics = source.topics(opts.subscription)
        snapshots = source.snapshots(opts.subscription, topics)
        ranges = batch_ranges(opts, source, snapshots)
        typed = source.typed_fields(topics)
        frames = [
            _topic_frame(spark, opts, source.catalog.storage, files, typed)
            for files in plan_files(snapshots, ranges)
            if files.partitions
        ]
    if not frames:
        return spark.createDataFrame([], spark_schema(opts.include_headers, typed))
    return functools.reduce(DataFrame.union, frames)


def read_topic(
    spark: SparkSession,
    topic: str | None = None,
    *,
    root: str | None = None,
    options: Mapping[str, str] | None = None,
    **more: str,
) -> DataFrame:
    """``spark.read.format("lakelog")``'s read (``topic`` is ``subscribe``), natively if it can."""
    given: dict[str, str] = {str(k): str(v) for k, v in (options or {}).items()}
    given.update({str(k): str(v) for k, v in more.items()})
    if topic is not None:
        given["subscribe"] = topic
    if root is not None:
        given["root"] = root
    opts = parse_read_options(given, streaming=False)
    choice = scan_choice(spark, opts, given)
    if choice.native:
        return native_frame(spark, opts)
    log.info(
        "lakelog batch read of %s through the Python data source: %s",
        opts.storage.url,
        choice.reason,
    )
    register(spark)
    return spark.read.format(FORMAT).options(**given).load()
