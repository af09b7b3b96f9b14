"""The append pipeline: stage and commit prepared produce requests to one topic."""

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
