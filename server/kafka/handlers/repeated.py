"""Resources named more than once in one admin request.

Kafka answers every entry of a repeated topic or config resource with
INVALID_REQUEST rather than acting on one of them: which one was meant
cannot be known. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any, TypeVar

from lakelog.errors import InvalidRequestError

K = TypeVar("K", bound=Hashable)


def repeated(keys: Iterable[K]) -> frozenset[K]:
    return frozenset(key for key, count in Counter(keys).items() if count > 1)


def refuse_repeated(what: str) -> InvalidRequestError:
    return InvalidRequestError(f"{what} is named more than once in the request")


def check_configs(entries: Iterable[Any]) -> None:
    """INVALID_REQUEST when one resource's config entries name a config more than once."""
    twice = repeated(e.name for e in entries)
    if twice:
        raise refuse_repeated(f"config {', '.join(sorted(twice))}")
