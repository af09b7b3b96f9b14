"""Quota math (pure, injected time): Kafka's windowed rate, throttle time and entity precedence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog.errors import InvalidRequestError
from lakelog.security.quota import (
    DEFAULT,
    QuotaEntity,
    QuotaKind,
    RateMeter,
    WindowConfig,
    decode_quotas,
    encode_quotas,
    entity_candidates,
    parse_limits,
    resolve_quota,
    throttle_time_ms,
)

WINDOW = WindowConfig(samples=11, sample_ms=1_000)


def test_a_fresh_meter_measures_over_at_least_samples_minus_one_windows() -> None:
    meter = RateMeter(WINDOW)
    meter.record(10_000, now_ms=0)
    assert meter.elapsed_ms(0) == 10_000
    assert meter.rate(0) == pytest.approx(1_000)
    # 2.5 s in: still 10 full windows assumed, plus the half window elapsed
    assert meter.elapsed_ms(2_500) == pytest.approx(10_500)


def test_samples_expire_after_the_whole_window() -> None:
    meter = RateMeter(WINDOW)
    meter.record(5_000, now_ms=0)
    meter.record(5_000, now_ms=10_500)
    assert meter.rate(10_500) == pytest.approx(10_000 / 10.5)
    assert meter.rate(11_000) == pytest.approx(5_000 / 10.5)  # first sample gone at 11 s


def test_throttle_is_kafkas_formula_and_is_capped() -> None:
    assert throttle_time_ms(rate=500, quota=1_000, elapsed_ms=10_000, max_ms=11_000) == 0
    # 50% over the quota for a 10 s window: wait 5 s
    assert throttle_time_ms(rate=1_500, quota=1_000, elapsed_ms=10_000, max_ms=11_000) == 5_000
    assert throttle_time_ms(rate=1e9, quota=1, elapsed_ms=10_000, max_ms=11_000) == 11_000


def test_waiting_the_throttle_out_brings_a_full_window_down_to_the_quota() -> None:
    """Once the window is fully measured, the throttle is the wait that restores the quota."""
    meter = RateMeter(WindowConfig(samples=2, sample_ms=10_000))
    meter.record(1_000, now_ms=0)
    now = 10_000  # one full window measured: elapsed = 10 s, rate = 100/s
    meter.record(1_000, now_ms=now)  # 2000 bytes over 10 s: 200/s against a quota of 100/s
    rate, elapsed = meter.rate(now), meter.elapsed_ms(now)
    assert (rate, elapsed) == (200, 10_000)
    throttle = throttle_time_ms(rate, 100, elapsed, 20_000)
    assert throttle == 10_000
    assert meter.rate(now + throttle - 1) == pytest.approx(100, rel=1e-3)


@given(st.lists(st.integers(1, 1_000), min_size=1, max_size=200), st.integers(1_000, 50_000))
def test_a_throttled_client_delivers_at_most_about_its_quota(
    thousandths: list[int], quota: int
) -> None:
    """Sending back to back and sleeping the throttle: bytes over time stay near the quota.

    Requests are at most one window's worth of quota (10 s here); bigger ones
    are the next test's case.
    """
    sizes = [max(1, quota * 10 * t // 1_000) for t in thousandths]
    meter = RateMeter(WINDOW)
    now, sent = 0, 0
    for size in sizes:
        meter.record(size, now)
        sent += size
        now += throttle_time_ms(meter.rate(now), quota, meter.elapsed_ms(now))
        now += 1  # the next request
    # A burst of about the measured span's worth of quota (11 s), plus one request; then at
    # most 1.5x the quota. The sampled window forgets whole 1 s samples, so a client whose
    # requests are a large fraction of a window gets up to ~1.4x (Kafka's windows do the same).
    assert sent <= quota * (1.5 * now + 11_000) / 1000 + max(sizes)


def test_a_request_bigger_than_a_window_of_quota_waits_its_size_less_the_window() -> None:
    """Kafka's formula for one oversized request: throttle = size/quota - window.

    The window then forgets the request, so a client sending only such
    requests gets through one per (size/quota + 1 s): over its quota, as in
    Kafka, where quotas are sized for many requests per window.
    """
    meter = RateMeter(WINDOW)
    meter.record(21_000, now_ms=0)
    throttle = throttle_time_ms(meter.rate(0), 1_000, meter.elapsed_ms(0))
    assert throttle == 21_000 - 10_000


def test_entity_precedence_is_kafkas() -> None:
    names = [e.key() for e in entity_candidates("alice", "app")]
    assert names == [
        "user=alice,client-id=app",
        "user=alice,client-id=<default>",
        "user=alice",
        "user=<default>,client-id=app",
        "user=<default>,client-id=<default>",
        "user=<default>",
        "client-id=app",
        "client-id=<default>",
    ]


def test_resolution_picks_the_most_specific_and_pools_by_entity() -> None:
    overrides = {
        QuotaEntity(DEFAULT, None): {QuotaKind.PRODUCE: 100.0},
        QuotaEntity("alice", None): {QuotaKind.PRODUCE: 500.0},
        QuotaEntity(None, "app"): {QuotaKind.FETCH: 7.0},
    }
    alice = resolve_quota(overrides, QuotaKind.PRODUCE, "alice", "app", None)
    assert (alice.limit, alice.budget_key) == (500.0, "user=alice")
    bob = resolve_quota(overrides, QuotaKind.PRODUCE, "bob", "x", None)
    assert (bob.limit, bob.budget_key) == (100.0, "user=bob")  # <default> still per user
    fetch = resolve_quota(overrides, QuotaKind.FETCH, "bob", "app", None)
    assert (fetch.limit, fetch.budget_key) == (7.0, "client-id=app")
    static = resolve_quota(overrides, QuotaKind.REQUEST, "bob", "app", 3.0)
    assert (static.limit, static.budget_key) == (3.0, "user=bob")
    none = resolve_quota({}, QuotaKind.REQUEST, "bob", "", None)
    assert none.limit is None


def test_parsing_and_round_trip() -> None:
    assert QuotaEntity.parse("user=alice,client-id=app") == QuotaEntity("alice", "app")
    assert QuotaEntity.parse("client_id=<default>") == QuotaEntity(None, DEFAULT)
    assert parse_limits({"producer.byte.rate": 10}) == {QuotaKind.PRODUCE: 10.0}
    quotas = {QuotaEntity("a", None): {QuotaKind.PRODUCE: 1.0, QuotaKind.REQUEST: 2.0}}
    assert decode_quotas(encode_quotas(quotas)) == quotas
    for bad in ("", "user", "team=x", "user=a,user=b", "user="):
        with pytest.raises(InvalidRequestError):
            QuotaEntity.parse(bad)
    for body in (
        {"speed": 1},
        {"request_rate": 0},
        {"request_rate": "fast"},
        {"request_rate": True},
    ):
        with pytest.raises(InvalidRequestError):
            parse_limits(body)
    with pytest.raises(ValueError):
        WindowConfig(samples=1)
