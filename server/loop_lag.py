"""How late the broker's event loop runs what is due: a wait every request on it shares.

One event loop serves every HTTP and Kafka request of a broker, so a long decode on
it, or the loop waiting for the GIL from a committing thread, delays them all, and
neither shows in a request's own profile. The lag of a callback due every
``interval_s`` is the loop's share of every request's latency, for operators
(``lakelog_event_loop_lag_seconds``) and the benchmarks.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

#: Often enough to see a stall of a few ms, rarely enough to cost nothing (100 callbacks/s).
DEFAULT_INTERVAL_S = 0.01


class Observer(Protocol):
    def observe(self, amount: float) -> None: ...


def next_due(due: float, now: float, interval_s: float) -> float:
    """The next due time after a tick due at ``due`` ran at ``now``: a stall longer than
    the interval is one lag, so the ticks it swallowed are skipped, not run back to back."""
    following = due + interval_s
    return following if following > now else now + interval_s


class LoopLagMonitor:
    """Observes, every ``interval_s``, how late the running loop ran a callback due then."""

    def __init__(self, lag: Observer, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self._lag = lag
        self._interval_s = interval_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        """Begin on the running loop (call from a coroutine or callback on it)."""
        self._loop = asyncio.get_running_loop()
        self._due = self._loop.time() + self._interval_s
        self._handle = self._loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        self._lag.observe(max(now - self._due, 0.0))
        self._due = next_due(self._due, now, self._interval_s)
        self._handle = self._loop.call_at(self._due, self._tick)
