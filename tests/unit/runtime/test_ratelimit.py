"""Rate limiters: per-item exponential, token bucket, max-of, the controller default."""

from __future__ import annotations

import pytest

from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_per_failure_from_5ms() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    assert [limiter.when("a") for _ in range(5)] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert limiter.num_requeues("a") == 5


def test_exponential_is_capped_at_max_delay_and_never_overflows() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](0.005, 1000.0)
    delays = [limiter.when("a") for _ in range(2000)]
    assert max(delays) == 1000.0
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655 s, below the cap
    assert delays[18] == 1000.0  # 1310 s, capped
    assert delays[-1] == 1000.0


def test_exponential_counts_items_independently_and_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](1.0, 100.0)
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == 1.0
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 1.0
    assert limiter.num_requeues("b") == 1


def test_bucket_allows_burst_then_spaces_by_qps() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10.0, burst=100, clock=clock)
    assert all(limiter.when(i) == 0.0 for i in range(100))
    assert limiter.when("x") == pytest.approx(0.1)
    assert limiter.when("y") == pytest.approx(0.2)  # reserved: each wait is behind the previous one


def test_bucket_refills_with_clock_time_up_to_burst() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=2.0, burst=3, clock=clock)
    for _ in range(3):
        assert limiter.when("a") == 0.0
    assert limiter.when("a") == pytest.approx(0.5)  # owes one token
    clock.advance(0.5)
    assert limiter.when("a") == pytest.approx(0.5)
    clock.advance(100)
    assert [limiter.when("a") for _ in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.5])


def test_bucket_keeps_nothing_per_item() -> None:
    limiter = BucketRateLimiter(qps=1.0, burst=1, clock=FakeClock())
    limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(1.0)


def test_bucket_rejects_nonsense_settings() -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0, burst=1, clock=FakeClock())
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=1, burst=0, clock=FakeClock())


def test_max_of_returns_longest_delay_and_records_in_every_limiter() -> None:
    fast = ItemExponentialFailureRateLimiter[str](1.0, 1000.0)
    slow = ItemExponentialFailureRateLimiter[str](3.0, 1000.0)
    limiter = MaxOfRateLimiter(fast, slow)
    assert limiter.when("a") == 3.0
    assert limiter.when("a") == 6.0
    assert fast.num_requeues("a") == 2
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert fast.num_requeues("a") == slow.num_requeues("a") == 0


def test_max_of_needs_a_limiter() -> None:
    with pytest.raises(ValueError):
        MaxOfRateLimiter[str]()


def test_default_limiter_is_per_item_exponential_until_the_bucket_runs_dry() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.when("a") == pytest.approx(0.01)
    for i in range(98):
        assert limiter.when(i) == pytest.approx(0.005)
    assert limiter.when("fresh") == pytest.approx(0.1)  # 101st token: bucket dominates
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
