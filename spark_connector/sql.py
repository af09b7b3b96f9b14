"""SQL helpers: register the data source, expose topics as temp views, decode values.

``register_topics(spark, root)`` creates one temporary view per topic, so
``SELECT key, count(*) FROM orders GROUP BY key`` works. Listing a root's
topics leaves out internal ones (``__consumer_offsets``, and any other name
Kafka reserves with a ``__`` prefix), as Kafka's tools do with
``--exclude-internal``: their records are lakelog's own bookkeeping, not data.
``include_internal=True`` lists them too; a topic named in ``topics`` is
always registered. View names are topic
names made into SQL identifiers: characters other than ASCII letters, digits
and ``_`` become ``_`` (``orders.v2-eu`` -> ``orders_v2_eu``), a leading digit
gets a ``t_`` prefix, and an optional ``prefix`` goes in front. Spark resolves
view names case-insensitively, so two topics that would share a view are
refused with an error naming both.

With ``mode="upsert"`` a view is the topic's latest-per-key table instead (as a
compacted topic reads once cleaned): one row per key and partition, the record
with the highest offset, and no row for a key whose latest record is a tombstone
(null value) or for keyless records. It is a query over the same files, typed
where the topic is, so it is as current as the append view.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StructType

from lakelog.catalog import Catalog
from lakelog.errors import InvalidConfigError
from lakelog.topic_config import INTERNAL_TOPICS
from spark_connector.native_scan import native_frame, scan_choice
from spark_connector.options import parse_read_options, parse_storage
from spark_connector.registration import register
from spark_connector.source import FORMAT


def view_name(topic: str, prefix: str = "") -> str:
    """The temp view name of a topic (see the module docstring)."""
    name = prefix + re.sub(r"[^A-Za-z0-9_]", "_", topic)
    if name[:1].isdigit():
        name = "t_" + name
    return name


#: Kafka reserves topic names starting with this for its own internal topics.
INTERNAL_PREFIX = "__"


def is_internal(topic: str) -> bool:
    """Whether ``topic`` is internal: lakelog's own, or named with Kafka's reserved prefix."""
    return topic in INTERNAL_TOPICS or topic.startswith(INTERNAL_PREFIX)


def view_names(topics: Sequence[str], prefix: str = "") -> dict[str, str]:
    """topic -> view name for every topic; names that would collide are an error."""
    views: dict[str, str] = {}
    taken: dict[str, str] = {}
    for topic in topics:
        name = view_name(topic, prefix)
        other = taken.get(name.lower())
        if other is not None:
            raise InvalidConfigError(
                f"topics {other!r} and {topic!r} would both be the view {name!r}; "
                "register them separately with different prefixes"
            )
        taken[name.lower()] = topic
        views[topic] = name
    return views


def register_topics(
    spark: SparkSession,
    root: str,
    topics: Sequence[str] | None = None,
    *,
    prefix: str = "",
    include_headers: bool = False,
    options: Mapping[str, str] | None = None,
    snapshot: bool = False,
    mode: str = "append",
    include_internal: bool = False,
) -> dict[str, str]:
    """Create a temp view per topic (all topics of ``root`` by default); returns topic -> view.

    All topics means all but the internal ones unless ``include_internal``
    (see the module docstring); ``topics`` given are registered as named.

    ``options`` go to every view's reader. A view is the ``lakelog`` data
    source, planned afresh at every query; with ``snapshot=True``, where Spark
    can read the root itself, it is the topic as of this call on the native
    Parquet scan (Spark cannot re-plan that per query: call again to refresh).
    ``mode="upsert"``: latest per key (see the module docstring).
    """
    if mode not in VIEW_MODES:
        raise InvalidConfigError(
            f"mode {mode!r} is not a view mode; use one of {', '.join(VIEW_MODES)}"
        )
    shape = latest_per_key if mode == "upsert" else _as_is
    extra = {str(k): str(v) for k, v in (options or {}).items()}
    if topics is None:
        spec = parse_storage({**{k.lower(): v for k, v in extra.items()}, "root": root})
        catalog = Catalog(spec.open())
        try:
            listed = catalog.list_topics()
        finally:
            catalog.close()
        topics = [t for t in listed if include_internal or not is_internal(t)]
    views = view_names(topics, prefix)
    registered = False
    for topic, name in views.items():
        given = {**extra, "root": root, "subscribe": topic}
        if include_headers:
            given["includeHeaders"] = "true"
        if snapshot:
            opts = parse_read_options(given, streaming=False)
            if scan_choice(spark, opts, given).native:
                shape(native_frame(spark, opts)).createOrReplaceTempView(name)
                continue
        if not registered:  # only data source views need it: native ones are plain file scans
            register(spark)
            registered = True
        reader = spark.read.format(FORMAT).options(**given)
        # Spark caches the read plan of a Python data source scan that pushes no
        # filter (per relation), which would freeze a view at its first query.
        # This always-true filter is pushed (and consumed exactly) at every query,
        # so every query plans anew and sees the records committed by then.
        shape(reader.load().where(F.col("offset") >= 0)).createOrReplaceTempView(name)
    return views


VIEW_MODES = ("append", "upsert")


def _as_is(frame: DataFrame) -> DataFrame:
    return frame


def latest_per_key(frame: DataFrame) -> DataFrame:
    """Each (partition, key)'s record with the highest offset, unless it is a tombstone.

    By partition as Kafka's compaction cleans, since offsets order records only
    within one; a key the default partitioner placed is in one partition anyway.
    """
    newest = Window.partitionBy("partition", "key").orderBy(F.col("offset").desc())
    return (
        frame.where(F.col("key").isNotNull())
        .withColumn("_rank", F.row_number().over(newest))
        .where((F.col("_rank") == 1) & F.col("value").isNotNull())
        .drop("_rank")
    )


def _col(column: str | Column) -> Column:
    return F.col(column) if isinstance(column, str) else column


def value_as_string(column: str | Column = "value") -> Column:
    """A binary column (``value`` by default) decoded as UTF-8 text."""
    return _col(column).cast("string")


def parse_json_value(
    column: str | Column, schema: StructType | ArrayType | MapType | str
) -> Column:
    """A binary column holding JSON, parsed with ``from_json`` into ``schema``."""
    return F.from_json(_col(column).cast("string"), schema)
