"""Errors raised inside Spark tasks, brought back to the driver as lakelog errors.

A task's lakelog error reaches the driver as a ``PythonException`` (or Py4J
error) whose text holds the worker's traceback; ``spark_action`` re-raises it
as the same class and message, not a page of JVM stack.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from lakelog import errors
from lakelog.errors import LakelogError

T = TypeVar("T")

#: ``lakelog.errors.CorruptRecordError: [CORRUPT_MESSAGE] segment ... is unreadable``
_LAKELOG_ERROR = re.compile(r"lakelog\.errors\.(\w+): \[[A-Z_]+\] ([^\r\n]*)")


def task_error(exc: BaseException) -> LakelogError | None:
    """The lakelog error a failed Spark action was caused by, if its text names one."""
    if isinstance(exc, LakelogError):
        return exc
    matches = _LAKELOG_ERROR.findall(str(exc))
    for name, message in reversed(matches):
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, LakelogError):
            return cls(message.strip())
    return None


def spark_action(action: Callable[[], T]) -> T:
    """Run a Spark action; a lakelog error raised in a task is re-raised as itself."""
    try:
        return action()
    except LakelogError:
        raise
    except Exception as exc:
        translated = task_error(exc)
        if translated is None:
            raise
        raise translated from exc
