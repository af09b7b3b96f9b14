"""Slow storage: backpressure (429 THROTTLING_QUOTA_EXCEEDED) instead of unbounded memory.

Every chunk between the broker and the object store is delayed by the proxy,
so commits crawl while several producers offer far more than the broker may
buffer (``buffer_memory``). Requests that do not fit wait ``max_block_ms`` and
are refused with the retriable 429; the producers retry them. The broker's
resident memory, sampled throughout with psutil, must stay within a fixed
allowance above its starting point although the data offered is several times
that allowance; once the latency is gone everything retried is committed and
nothing acknowledged is lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import psutil
import pytest

from tests.faults.conftest import ProxiedRoot
from tests.faults.http_load import HttpProducers
from tests.faults.ledger import Ledger, check
from tests.fixtures.brokers import BrokerProcess

pytestmark = [pytest.mark.slow, pytest.mark.s3]

BUFFER_MEMORY = 512 << 10
#: What the broker may grow beyond its buffer: request bodies being parsed by the
#: producer threads, pyarrow pools, the fetch cache of this run. Far less than offered.
RSS_ALLOWANCE = 160 << 20


class RssSampler:
    """Samples a process's resident set size every 50 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.samples: list[int] = [self.process.memory_info().rss]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.samples.append(self.process.memory_info().rss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def test_slow_storage_throttles_instead_of_buffering(
    proxied_root: ProxiedRoot,
    start_broker: Callable[..., BrokerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, proxy = proxied_root.root, proxied_root.proxy
    # Few malloc arenas, as for a production broker: otherwise glibc's per-thread
    # arenas (one per worker thread) show as growth that is fragmentation, not buffering.
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    broker = start_broker(
        root,
        linger_ms=5,
        buffer_memory=BUFFER_MEMORY,
        partition_buffer_bytes=BUFFER_MEMORY // 2,
        batch_bytes=BUFFER_MEMORY // 2,
        max_block_ms=100,
        fetch_cache_bytes=0,
        **proxied_root.broker_settings,
    )
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        http.post("/v1/topics", json={"name": "slow", "partitions": 2}).raise_for_status()
    ledger = Ledger()
    load = HttpProducers(
        broker.url, "slow", ledger, threads=6, requests=20, records=40, record_bytes=8_000
    )
    sampler = RssSampler(broker.process.pid)
    # Slow, not down: the fault lasts the whole load, and every request of it (retried
    # after each 429) must be acknowledged while it lasts.
    slowed = ledger.mark()
    proxy.latency_s = 0.03
    try:
        load.run()
    finally:
        proxy.latency_s = 0.0
        sampler.stop()
    baseline, peak = sampler.samples[0], max(sampler.samples)
    print(
        f"slow storage: offered {load.offered_bytes >> 20} MiB, answers {dict(load.statuses)}, "
        f"errors {dict(load.error_names)}, broker RSS {baseline >> 20} -> peak {peak >> 20} MiB "
        f"(quartiles {[s >> 20 for s in sampler.samples[:: max(1, len(sampler.samples) // 4)]]})"
    )
    assert load.error_names["THROTTLING_QUOTA_EXCEEDED"] > 0, "no backpressure was applied"
    assert load.offered_bytes > RSS_ALLOWANCE
    assert peak - baseline < RSS_ALLOWANCE, f"broker RSS grew {(peak - baseline) >> 20} MiB"
    threads, requests, records, _ = load.shape
    check(
        "slow-storage",
        root,
        "slow",
        ledger,
        idempotent=False,
        recovered=slowed,
        min_acknowledged_after=threads * requests * records,
    )
