"""Recognising integers written as text (query strings, headers, CLI flags, option keys).

``str.isdigit()`` is true for characters such as "³" or "²" that ``int()`` rejects, and
``int()`` accepts digits of other scripts that no Kafka client would send.  Every parser
that turns user text into a number asks this module first, so such text gets the caller's
clear "must be a number" error instead of an unhandled ``ValueError``.
"""

from __future__ import annotations


def is_unsigned_int(text: str) -> bool:
    """True when ``text`` is one or more ASCII digits and nothing else."""
    return text.isascii() and text.isdigit()


def is_signed_int(text: str) -> bool:
    """True when ``text`` is ASCII digits with an optional leading minus sign."""
    return is_unsigned_int(text[1:] if text.startswith("-") else text)
