"""Kafka error codes for exceptions raised while answering one partition, topic or group."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from lakelog.errors import LakelogError

log = logging.getLogger(__name__)

UNKNOWN_SERVER_ERROR = -1


def error_code(exc: BaseException, what: str) -> tuple[int, str]:
    """(code, message) for an answer; an unexpected exception is logged with its trace."""
    if isinstance(exc, LakelogError):
        return exc.code, exc.message
    log.error("Kafka request failed on %s", what, exc_info=exc)
    return UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def answered(answer: dict[str, Any], what: str) -> Iterator[None]:
    """An exception raised inside becomes ``answer``'s error code and message.

    Each partition, topic or group of a request is answered on its own, so one
    failing does not fail the others (``build`` drops a message its layout lacks).
    """
    try:
        yield
    except Exception as exc:  # unexpected ones are logged by ``error_code``
        answer["error_code"], answer["error_message"] = error_code(exc, what)
