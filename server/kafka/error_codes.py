"""Kafka error codes for exceptions raised while answering one partition, topic or group.

Each entry of a request is answered on its own, so one failing does not fail
the others; a name given twice in one admin request is refused on every entry.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator
from typing import Any, TypeVar

from lakelog.errors import InvalidRequestError, LakelogError

log = logging.getLogger(__name__)

UNKNOWN_SERVER_ERROR = -1
K = TypeVar("K", bound=Hashable)


def error_code(exc: BaseException, what: str) -> tuple[int, str]:
    """(code, message) for an answer; an unexpected exception is logged with its trace."""
    if isinstance(exc, LakelogError):
        return exc.code, exc.message
    log.error("Kafka request failed on %s", what, exc_info=exc)
    return UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def answered(answer: dict[str, Any], what: str) -> Iterator[None]:
    """An exception raised inside becomes ``answer``'s error code and message
    (``build`` drops a message the answer's layout lacks)."""
    try:
        yield
    except Exception as exc:  # unexpected ones are logged by ``error_code``
        answer["error_code"], answer["error_message"] = error_code(exc, what)


def by_topic(
    answers: Iterable[tuple[str, dict[str, Any]]], name: str, partitions: str
) -> list[dict[str, Any]]:
    """Partition answers grouped under their topics, in request order (``{name: topic,
    partitions: [...]}``: the field names differ between APIs)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for topic, answer in answers:
        grouped.setdefault(topic, []).append(answer)
    return [{name: topic, partitions: parts} for topic, parts in grouped.items()]


def repeated(keys: Iterable[K]) -> frozenset[K]:
    return frozenset(key for key, count in Counter(keys).items() if count > 1)


def refuse_repeated(what: str) -> InvalidRequestError:
    return InvalidRequestError(f"{what} is named more than once in the request")


def check_configs(entries: Iterable[Any]) -> None:
    """INVALID_REQUEST when one resource's config entries name a config more than once."""
    twice = repeated(e.name for e in entries)
    if twice:
        raise refuse_repeated(f"config {', '.join(sorted(twice))}")
