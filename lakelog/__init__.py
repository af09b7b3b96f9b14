"""lakelog: Kafka's log model kept as Delta Lake tables on object storage.

Start with ``lakelog.connect(root_url)``, which returns the ``Catalog`` of a
storage root; ``catalog.topic(name)`` gives a topic's ``TopicLog`` to append
to and read from.
"""

from lakelog.errors import LakelogError
from lakelog.extras import missing_core_module

try:
    from lakelog.catalog import Catalog, TopicDescription, connect
    from lakelog.commit_stats import CommitStats
    from lakelog.partition_state import PartitionState
    from lakelog.records import ConsumerRecord, Record
    from lakelog.topic_config import TopicConfig
    from lakelog.topic_log import AppendResult, FetchResult, TopicLog
except ModuleNotFoundError as exc:  # e.g. a Spark worker running a Python without lakelog
    error = missing_core_module(exc)
    if error is None:
        raise
    raise error from exc

__version__ = "0.1.0"

__all__ = [
    "AppendResult",
    "Catalog",
    "CommitStats",
    "ConsumerRecord",
    "FetchResult",
    "LakelogError",
    "PartitionState",
    "Record",
    "TopicConfig",
    "TopicDescription",
    "TopicLog",
    "__version__",
    "connect",
]
