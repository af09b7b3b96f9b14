"""Which live broker coordinates a group: highest rendezvous hash wins.

Rendezvous hashing moves only the groups of a broker that appears or
disappears, and every broker computes the same answer from the same registry
without talking to the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from lakelog.errors import CoordinatorNotAvailableError


def rendezvous_score(group_id: str, broker_id: str) -> bytes:
    """``sha256(group_id + "/" + broker_id)``, compared as bytes (big-endian)."""
    return hashlib.sha256(f"{group_id}/{broker_id}".encode()).digest()


def choose_coordinator(group_id: str, broker_ids: Iterable[str]) -> str:
    candidates = list(broker_ids)
    if not candidates:
        raise CoordinatorNotAvailableError(
            f"no live broker can coordinate group {group_id!r}", group_id=group_id
        )
    return max(candidates, key=lambda b: rendezvous_score(group_id, b))
