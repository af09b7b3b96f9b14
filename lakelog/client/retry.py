"""When to try again: exponential backoff with jitter, and a retry loop bounded by a deadline.

As in Kafka, the jitter keeps clients that failed together from returning in
lockstep and knocking a recovering broker over again. Only the producer runs
its own loop, as it also keeps sequence numbers and a delivery deadline.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from lakelog.errors import LakelogError

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """``initial_ms * 2**(attempt-1)`` capped at ``max_ms``, spread by +-``jitter``."""

    initial_ms: int = 100
    max_ms: int = 1_000
    jitter: float = 0.2

    def delay_s(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1 = the first retry)."""
        cap = float(max(self.max_ms, self.initial_ms))
        base = min(float(self.initial_ms) * 2.0 ** max(attempt - 1, 0), cap)
        spread = 1.0 + random.uniform(-self.jitter, self.jitter)
        return max(base * spread, 0.0) / 1000.0


@dataclass(frozen=True)
class Retrying:
    """One client's retry policy: ``call_with_retries`` with its backoff and API timeout."""

    backoff: Backoff
    timeout_ms: int

    def __call__(self, call: Callable[[], T]) -> T:
        return call_with_retries(call, backoff=self.backoff, timeout_ms=self.timeout_ms)


def call_with_retries(
    call: Callable[[], T],
    *,
    backoff: Backoff,
    timeout_ms: int,
) -> T:
    """Run ``call`` until it succeeds, fails non-retriably, or time runs out; the last
    error is raised unchanged, so callers see the broker's own error class."""
    deadline = time.monotonic() + timeout_ms / 1000
    attempt = 0
    while True:
        try:
            return call()
        except LakelogError as exc:
            attempt += 1
            remaining = deadline - time.monotonic()
            if not exc.retriable or remaining <= 0:
                raise
            time.sleep(min(backoff.delay_s(attempt), remaining))


__all__ = ["Backoff", "Retrying", "call_with_retries"]
