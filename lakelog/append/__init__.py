"""The append pipeline: stage and commit prepared produce requests to one topic.

``pipeline`` holds the steps (``Appender``) and the one interface up to what
runs the core (``AppendListener``); ``staging`` the rows and segments of a
group commit between stage and commit; ``result`` where the records landed.
"""

from lakelog.append.pipeline import Appender, AppendListener
from lakelog.append.result import AppendResult, PartitionBatch
from lakelog.append.staging import StagedAppend

__all__ = [
    "AppendListener",
    "AppendResult",
    "Appender",
    "PartitionBatch",
    "StagedAppend",
]
