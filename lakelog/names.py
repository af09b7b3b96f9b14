"""Kafka's rules for resource names (topics, consumer groups).

One rule set for both, because both names become storage path segments: the
rules are what keeps a name from ever escaping the storage root.
"""

from __future__ import annotations

import re

from lakelog.errors import LakelogError

#: Kafka's limit for topic names, also applied to group ids here.
MAX_NAME_LENGTH = 249
#: Used with ``fullmatch``: ``^...$`` with ``match`` would let "topic\n" through.
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def check_name(value: object, what: str, error: type[LakelogError]) -> str:
    """``value`` if it is a legal name; else ``error`` saying which rule it breaks."""
    if not isinstance(value, str) or not value:
        raise error(f"{what} must be a non-empty string")
    if value in (".", ".."):
        raise error(f"{what} cannot be {value!r}")
    if len(value) > MAX_NAME_LENGTH:
        raise error(f"{what} is {len(value)} characters long; the limit is {MAX_NAME_LENGTH}")
    if not _LEGAL.fullmatch(value):
        raise error(
            f"{what} {value!r} is illegal: only ASCII letters, digits, '.', '_' and '-' are allowed"
        )
    return value
