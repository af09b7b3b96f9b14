"""Per-broker quota accounting: windowed meters per quota budget, and who is muted until when.

The math is ``lakelog.security.quota``; this module keeps the state of one
broker (meters, the overrides read from ``_meta/quotas``) and its metrics.
As in Kafka each broker enforces quotas on its own share of the traffic.

Besides delaying the answer that went over the quota, a budget stays
*muted* for the throttle time: a request of the same budget arriving in
that time waits for the mute to end before it is processed (Kafka mutes the
client's connection; HTTP clients may open several, so the broker holds
their requests instead).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from lakelog.security.quota import (
    QuotaEntity,
    QuotaKind,
    RateMeter,
    ResolvedQuota,
    WindowConfig,
    resolve_quota,
    throttle_time_ms,
)
from server.metrics import BrokerMetrics
from server.settings import BrokerSettings

Quotas = dict[QuotaEntity, dict[QuotaKind, float]]


def user_of(principal: str) -> str:
    """The user name quotas are configured by: ``alice`` for ``User:alice``."""
    return principal.partition(":")[2] or principal


class QuotaManager:
    def __init__(
        self,
        settings: BrokerSettings,
        metrics: BrokerMetrics,
        clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000,
    ) -> None:
        self.window = WindowConfig(settings.quota_window_num, settings.quota_window_size_ms)
        self.static: dict[QuotaKind, float | None] = {
            QuotaKind.PRODUCE: settings.quota_producer_byte_rate,
            QuotaKind.FETCH: settings.quota_consumer_byte_rate,
            QuotaKind.REQUEST: settings.quota_request_rate,
        }
        self.overrides: Quotas = {}
        self.metrics = metrics
        self._clock_ms = clock_ms
        self._meters: dict[tuple[QuotaKind, str], RateMeter] = {}
        self._muted_until: dict[tuple[QuotaKind, str], float] = {}
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Whether any quota is configured at all (otherwise nothing is metered)."""
        return any(v is not None for v in self.static.values()) or bool(self.overrides)

    def set_overrides(self, overrides: Quotas) -> None:
        with self._lock:
            self.overrides = overrides

    def _budget(self, kind: QuotaKind, user: str, client_id: str) -> ResolvedQuota:
        return resolve_quota(self.overrides, kind, user, client_id, self.static[kind])

    def record(self, kind: QuotaKind, principal: str, client_id: str, value: float) -> int:
        """Count ``value`` against the requester's budget; the throttle time in ms (0: none)."""
        if not self.active:
            return 0
        user = user_of(principal)
        with self._lock:
            quota = self._budget(kind, user, client_id)
            if quota.limit is None:
                return 0
            now = self._clock_ms()
            key = (kind, quota.budget_key)
            meter = self._meters.setdefault(key, RateMeter(self.window))
            meter.record(value, int(now))
            cap = self.window.sample_ms if kind is QuotaKind.REQUEST else None
            throttle = throttle_time_ms(
                meter.rate(int(now)), quota.limit, meter.elapsed_ms(int(now)), cap
            )
            if throttle > 0:
                self._muted_until[key] = max(self._muted_until.get(key, 0.0), now + throttle)
        if throttle > 0:
            self.metrics.quota_throttled.labels(kind.value, user).inc()
            self.metrics.quota_throttle_seconds.labels(kind.value, user).inc(throttle / 1000)
        return throttle

    def muted_ms(self, kinds: Iterable[QuotaKind], principal: str, client_id: str) -> int:
        """How long a new request of these budgets must wait for an earlier throttle to end."""
        if not self.active:
            return 0
        user = user_of(principal)
        with self._lock:
            now = self._clock_ms()
            wait = 0.0
            for kind in kinds:
                quota = self._budget(kind, user, client_id)
                if quota.limit is not None:
                    wait = max(wait, self._muted_until.get((kind, quota.budget_key), 0.0) - now)
        return max(0, round(wait))

    def forget_idle(self) -> None:
        """Drop meters whose samples all expired (bounded memory with many clients)."""
        with self._lock:
            now = self._clock_ms()
            horizon = self.window.span_ms
            for key, meter in list(self._meters.items()):
                meter.elapsed_ms(int(now))  # purges expired samples
                if not meter.samples:
                    del self._meters[key]
            for key, until in list(self._muted_until.items()):
                if until + horizon < now:
                    del self._muted_until[key]
