"""Kafka error codes for exceptions raised while answering one partition, topic or group."""

from __future__ import annotations

import logging

from lakelog.errors import LakelogError

log = logging.getLogger(__name__)

UNKNOWN_SERVER_ERROR = -1


def error_code(exc: BaseException, what: str) -> tuple[int, str]:
    """(code, message) for an answer; an unexpected exception is logged with its trace."""
    if isinstance(exc, LakelogError):
        return exc.code, exc.message
    log.error("Kafka request failed on %s", what, exc_info=exc)
    return UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"
