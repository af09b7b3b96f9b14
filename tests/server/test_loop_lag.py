"""The event loop's lag: what a stall on the loop does to the callback due meanwhile.

A stall is seen once, as long as it lasted (not as many small lags of the
ticks it swallowed), on the default loop and on uvloop, which the broker runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from server.loop_lag import LoopLagMonitor, next_due

STALL_S = 0.08
INTERVAL_S = 0.005


class Recorder:
    def __init__(self) -> None:
        self.lags: list[float] = []

    def observe(self, amount: float) -> None:
        self.lags.append(amount)


def test_next_due_keeps_the_beat_and_skips_what_a_stall_swallowed() -> None:
    assert next_due(10.0, 10.002, 0.01) == pytest.approx(10.01)
    assert next_due(10.0, 10.5, 0.01) == pytest.approx(10.51)


def test_a_non_positive_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        LoopLagMonitor(Recorder(), 0)


async def stalled_once(recorder: Recorder) -> None:
    monitor = LoopLagMonitor(recorder, INTERVAL_S)
    monitor.start()
    await asyncio.sleep(0.05)
    time.sleep(STALL_S)  # work that holds the loop
    await asyncio.sleep(0.05)
    monitor.stop()
    ticks = len(recorder.lags)
    await asyncio.sleep(0.03)
    assert len(recorder.lags) == ticks, "ticks went on after stop()"


RUNNERS: dict[str, Callable[[Coroutine[Any, Any, None]], None]] = {
    "asyncio": asyncio.run,
    "uvloop": uvloop.run,
}


@pytest.mark.parametrize("loop", list(RUNNERS))
def test_a_stall_is_one_lag_as_long_as_the_stall(loop: str) -> None:
    recorder = Recorder()
    RUNNERS[loop](stalled_once(recorder))
    long = [lag for lag in recorder.lags if lag >= STALL_S / 2]
    # One tick for the stall. Ticks run back to back would give about eight this long; a
    # busy machine may add one more stall of its own.
    assert 1 <= len(long) <= 2, recorder.lags
    assert min(recorder.lags) >= 0.0
    # Ticks went on before and after the stall.
    assert len(recorder.lags) >= 4, recorder.lags
