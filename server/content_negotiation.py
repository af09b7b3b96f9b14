"""HTTP ``Accept`` matching (RFC 9110 section 12.5.1), pure.

A request without ``Accept`` takes anything; otherwise one of its media
ranges (``type/subtype``, ``type/*`` or ``*/*``) must cover an offered type
with a quality above 0 (``q=0`` means "not this one").
"""

from __future__ import annotations

from collections.abc import Iterable


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0  # a malformed weight accepts nothing rather than everything
    return 1.0


def _covers(media_range: str, offered: str) -> bool:
    if media_range in ("*/*", offered):
        return True
    kind, _, subtype = media_range.partition("/")
    return subtype == "*" and offered.partition("/")[0] == kind


def acceptable(accept: str | None, offered: Iterable[str]) -> bool:
    """Whether a response of one of the ``offered`` types satisfies the ``Accept`` header."""
    if accept is None or not accept.strip():
        return True
    types = [t.lower() for t in offered]
    for item in accept.split(","):
        media_range, *params = item.split(";")
        media_range = media_range.strip().lower()
        if not media_range or _quality(params) <= 0:
            continue
        if any(_covers(media_range, t) for t in types):
            return True
    return False
