"""Rate limiters for work-queue retries, as client-go's workqueue rate limiters.

Invariants: when(item) returns a delay >= 0 in seconds and records one more failure (or reserves
one token); forget(item) resets what is kept per item; num_requeues(item) counts when() calls since
the last forget. The default controller limiter is max(per-item exponential 5 ms * 2^n capped at
1000 s, overall token bucket 10 qps burst 100), as controller-runtime's.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from sampledb_operator.runtime.clock import Clock

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

_MAX_EXPONENT = 64  # 2**64 * any sane base delay exceeds any sane cap; avoids float overflow


class RateLimiter(Protocol[K_contra]):
    """Decides how long an item waits before its next retry."""

    def when(self, item: K_contra) -> float:
        """Seconds to wait before retrying `item`; records the retry."""
        ...

    def forget(self, item: K_contra) -> None:
        """Stop tracking `item` (its next failure starts from scratch)."""
        ...

    def num_requeues(self, item: K_contra) -> int:
        """How many retries of `item` were recorded since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """base_delay * 2**failures, capped at max_delay; per item."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < 0:
            raise ValueError("delays must be >= 0")
        self._base = base_delay
        self._max = max_delay
        self._failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        if exponent >= _MAX_EXPONENT:
            return self._max
        return min(self._base * float(2**exponent), self._max)

    def forget(self, item: K) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """An overall token bucket (golang.org/x/time/rate semantics): each when() reserves one token.

    The bucket starts full (`burst` tokens) and refills at `qps` tokens per second of clock time;
    a reservation made while the bucket is empty returns the wait until its token exists.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()

    def when(self, item: Hashable) -> float:
        now = self._clock.monotonic()
        elapsed = max(0.0, now - self._last)
        self._tokens = min(self._burst, self._tokens + elapsed * self._qps) - 1.0
        self._last = max(now, self._last)
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def forget(self, item: Hashable) -> None:
        """Nothing is kept per item."""

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """The longest delay of several limiters; every limiter records every retry."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("at least one rate limiter is needed")
        self._limiters = limiters

    def when(self, item: K) -> float:
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: K) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: K) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock) -> MaxOfRateLimiter[Hashable]:
    """controller-runtime's default: max(exponential 5 ms .. 1000 s per item, bucket 10 qps burst 100)."""
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter[Hashable](0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )
