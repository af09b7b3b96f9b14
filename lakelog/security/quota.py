"""Client quotas the way Kafka computes them: windowed rates, throttle times, entity precedence.

Pure logic with injected time. Above its quota an answer is delayed by

    throttle = (rate - quota) / quota * window

with ``window`` the elapsed time of the live samples, at least ``samples - 1``
sample windows (Kafka's ``Rate``: a fresh sensor does not measure its first
burst over a few milliseconds). Byte-rate throttles are not capped; the
request-rate throttle is capped at one sample window (``boundedThrottleTime``).
Quotas follow Kafka's entity precedence, most specific first, then the static
defaults; usage is pooled per matched entity, as in Kafka.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakelog.errors import InvalidRequestError

#: The ``<default>`` entity name of Kafka's quota configs.
DEFAULT = "<default>"


class QuotaKind(enum.StrEnum):
    """The three quotas; their values are Kafka's config names."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_rate"


@dataclass(frozen=True, slots=True)
class WindowConfig:
    """Kafka's ``quota.window.num`` samples of ``quota.window.size.seconds`` each."""

    samples: int = 11
    sample_ms: int = 1_000

    def __post_init__(self) -> None:
        if self.samples < 2 or self.sample_ms < 1:
            raise ValueError("a quota window needs at least 2 samples of at least 1 ms")

    @property
    def span_ms(self) -> int:
        """The whole window: a sample this old has expired."""
        return self.samples * self.sample_ms


@dataclass(slots=True)
class _Sample:
    start_ms: int
    value: float = 0.0


@dataclass(slots=True)
class RateMeter:
    """A windowed rate (Kafka's ``SampledStat`` + ``Rate``) for one entity and quota."""

    window: WindowConfig
    samples: list[_Sample] = field(default_factory=list)

    def _purge(self, now_ms: int) -> None:
        self.samples = [s for s in self.samples if now_ms - s.start_ms < self.window.span_ms]

    def record(self, value: float, now_ms: int) -> None:
        self._purge(now_ms)
        if not self.samples or now_ms >= self.samples[-1].start_ms + self.window.sample_ms:
            self.samples.append(_Sample(now_ms))
        self.samples[-1].value += value

    def elapsed_ms(self, now_ms: int) -> float:
        """The measured span: since the oldest live sample, at least ``samples - 1`` windows."""
        self._purge(now_ms)
        oldest = self.samples[0].start_ms if self.samples else now_ms
        elapsed = float(now_ms - oldest)
        minimum = (self.window.samples - 1) * self.window.sample_ms
        full = elapsed // self.window.sample_ms
        if full < self.window.samples - 1:
            elapsed += minimum - full * self.window.sample_ms
        return elapsed

    def rate(self, now_ms: int) -> float:
        """Value per second over the measurement window."""
        elapsed = self.elapsed_ms(now_ms)
        total = sum(s.value for s in self.samples)
        return total / (elapsed / 1000.0)


def throttle_time_ms(
    rate: float, quota: float, elapsed_ms: float, max_ms: int | None = None
) -> int:
    """Kafka's throttle: how long to wait so the rate over the measured window is the quota."""
    if quota <= 0 or math.isinf(quota) or rate <= quota:
        return 0
    throttle = round((rate - quota) / quota * elapsed_ms)
    return throttle if max_ms is None else min(max_ms, throttle)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A quota config's target: ``user``/``client_id`` are names, ``DEFAULT``, or None (unset)."""

    user: str | None = None
    client_id: str | None = None

    def check(self) -> QuotaEntity:
        """Refuse entities a quota cannot be configured for (the empty client id is Kafka's
        anonymous client and may be looked up, but quotas are set per name or ``<default>``)."""
        if self.user is None and self.client_id is None:
            raise InvalidRequestError("a quota entity names a user, a client id, or both")
        for what, value in (("user", self.user), ("client id", self.client_id)):
            if value is not None and not value:
                raise InvalidRequestError(f"a quota entity's {what} cannot be empty")
        return self

    def key(self) -> str:
        named = (("user", self.user), ("client-id", self.client_id))
        return ",".join(f"{name}={value}" for name, value in named if value is not None)

    @classmethod
    def parse(cls, text: str) -> QuotaEntity:
        """``user=alice``, ``client-id=c1``, ``user=alice,client-id=c1``, ``user=<default>``."""
        values: dict[str, str] = {}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            name = name.strip().replace("_", "-")
            if not sep or name not in ("user", "client-id") or name in values:
                raise InvalidRequestError(
                    f"invalid quota entity {text!r}; use user=NAME and/or client-id=NAME"
                )
            values[name] = value.strip()
        return cls(values.get("user"), values.get("client-id")).check()


def entity_candidates(user: str, client_id: str) -> list[QuotaEntity]:
    """Kafka's eight quota entities for ``(user, client_id)``, most specific first."""
    return [
        QuotaEntity(u, c)
        for u in (user, DEFAULT, None)
        for c in (client_id, DEFAULT, None)
        if (u, c) != (None, None)
    ]


@dataclass(frozen=True, slots=True)
class ResolvedQuota:
    """The quota that applies and whose budget (``budget_key``) the usage counts against."""

    limit: float | None
    budget_key: str


def resolve_quota(
    overrides: Mapping[QuotaEntity, Mapping[QuotaKind, float]],
    kind: QuotaKind,
    user: str,
    client_id: str,
    static_default: float | None,
) -> ResolvedQuota:
    """The first configured quota of ``kind`` in Kafka's precedence, else the static default.

    The budget key names the concrete user/client the usage is pooled under:
    a ``<default>`` entity still gives each user (client) its own budget.
    """
    for entity in entity_candidates(user, client_id):
        limit = overrides.get(entity, {}).get(kind)
        if limit is not None:
            concrete = QuotaEntity(
                user if entity.user is not None else None,
                client_id if entity.client_id is not None else None,
            )
            return ResolvedQuota(limit, concrete.key())
    return ResolvedQuota(static_default, QuotaEntity(user, None).key())


def parse_limits(body: Mapping[str, Any]) -> dict[QuotaKind, float]:
    """Quota values from JSON (``{"producer_byte_rate": 1048576}``); names the bad one."""
    limits: dict[QuotaKind, float] = {}
    for name, value in body.items():
        try:
            kind = QuotaKind(name.replace(".", "_").replace("-", "_"))
        except ValueError:
            names = ", ".join(k.value for k in QuotaKind)
            raise InvalidRequestError(f"unknown quota {name!r}; expected {names}") from None
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InvalidRequestError(f"quota {name} must be a positive number, got {value!r}")
        if math.isinf(value):
            raise InvalidRequestError(f"quota {name} must be finite; remove it for no limit")
        limits[kind] = float(value)
    return limits


def encode_quotas(
    quotas: Mapping[QuotaEntity, Mapping[QuotaKind, float]],
) -> list[dict[str, Any]]:
    """Quota overrides as JSON, sorted so equal configs encode equally."""
    out = []
    for entity in sorted(quotas, key=QuotaEntity.key):
        limits = quotas[entity]
        if limits:
            out.append(
                {
                    "user": entity.user,
                    "client_id": entity.client_id,
                    "quotas": {k.value: limits[k] for k in sorted(limits)},
                }
            )
    return out


def decode_quotas(
    items: Iterable[Mapping[str, Any]],
) -> dict[QuotaEntity, dict[QuotaKind, float]]:
    out: dict[QuotaEntity, dict[QuotaKind, float]] = {}
    for item in items:
        entity = QuotaEntity(item.get("user"), item.get("client_id")).check()
        out[entity] = parse_limits(item.get("quotas", {}))
    return out
