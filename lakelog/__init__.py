"""lakelog: Kafka's log model kept as Delta Lake tables on object storage.

Start with ``lakelog.connect(root_url)``, which returns the ``Catalog`` of a
storage root; ``catalog.topic(name)`` gives a topic's ``TopicLog`` to append
to and read from.

The names below are imported when first used, so a command that needs none of
them (``lakelog --version``) does not pay for pyarrow and the Delta layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.errors import LakelogError
from lakelog.extras import require_core
from lakelog.lazy import lazy_names

require_core()  # e.g. a Spark worker running a Python without lakelog: say so at once

if TYPE_CHECKING:
    from lakelog.catalog import Catalog, TopicDescription, connect
    from lakelog.commit_stats import CommitStats
    from lakelog.partition_state import PartitionState
    from lakelog.records import ConsumerRecord, Record
    from lakelog.topic_config import TopicConfig
    from lakelog.topic_log import AppendResult, FetchResult, TopicLog

__version__ = "0.1.0"

#: Each public name's module.
_MODULES = {
    "AppendResult": "lakelog.topic_log",
    "Catalog": "lakelog.catalog",
    "CommitStats": "lakelog.commit_stats",
    "ConsumerRecord": "lakelog.records",
    "FetchResult": "lakelog.topic_log",
    "PartitionState": "lakelog.partition_state",
    "Record": "lakelog.records",
    "TopicConfig": "lakelog.topic_config",
    "TopicDescription": "lakelog.catalog",
    "TopicLog": "lakelog.topic_log",
    "connect": "lakelog.catalog",
}


__getattr__ = lazy_names(__name__, _MODULES)

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
