"""Spark connector: lakelog topics as Spark tables, batch and Structured Streaming, read and write.

A PySpark Python data source registered as format ``lakelog``, with the
options and row schema of Spark's Kafka source and sink; it applies lakelog's
semantics (log start offsets, high watermarks, compacted offset ranges) that a
plain Delta read of a topic's table bypasses. Usage and every option:
``spark_connector/README.md``.

Installed by the ``spark`` extra (``pip install 'lakelog[spark]'``); without
it, importing this package raises ``MissingDependencyError`` naming the extra.
"""

from lakelog.extras import require_extra

# Spark's Python workers import this package too; they need only PySpark (delta-rs,
# the rest of the extra, is for compaction/).
require_extra("spark", "spark_connector/ (the Spark data source)", ("pyspark",))

from spark_connector.native_scan import read_topic, scan_choice  # noqa: E402
from spark_connector.registration import register  # noqa: E402
from spark_connector.source import FORMAT, LakelogDataSource  # noqa: E402
from spark_connector.sql import (  # noqa: E402
    parse_json_value,
    register_topics,
    value_as_string,
    view_name,
)

__all__ = [
    "FORMAT",
    "LakelogDataSource",
    "parse_json_value",
    "read_topic",
    "register",
    "register_topics",
    "scan_choice",
    "value_as_string",
    "view_name",
]
