"""What a Watcher does after a failed cycle: how long it waits, whether it lists again (client-go's reflector).

Pure but for the Backoff it is given (its failure count and random source); the Watcher logs and counts.

Invariants:
- failures back off `initial` doubling to `maximum`, times a jitter factor in [1, 2);
- 410 Gone (the resourceVersion expired) always relists; the first after a healthy period (the backoff
  reset, so this is its first failure) at once, later ones after the backoff;
- 401/403 wait the maximum backoff (a denied watch is a configuration error, retried slowly);
- 429 waits at least its Retry-After;
- every other failure (transport, server, a stream that ended at once, an incomplete streaming list)
  waits the next backoff step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from sampledb_operator.kube.errors import (
    Forbidden,
    Gone,
    KubeError,
    KubeTransportError,
    ReadTimeout,
    TooManyRequests,
    Unauthorized,
)


class ShortWatch(KubeError):
    """The server closed a watch at once without sending anything."""


class IncompleteList(KubeTransportError):
    """A streaming list's stream ended, or went wrong, before the bookmark that ends its initial events."""


class Backoff:
    """Exponential backoff with multiplicative jitter in [1, 2)."""

    def __init__(self, initial: float, maximum: float, rng: random.Random) -> None:
        self.initial = initial
        self.maximum = maximum
        self.failures = 0
        self._rng = rng

    def next(self) -> float:
        """The delay before the next try; counts one more failure."""
        base = min(self.initial * 2.0 ** min(self.failures, 62), self.maximum)
        self.failures += 1
        return base * (1.0 + self._rng.random())

    def longest(self) -> float:
        """The maximum delay (jittered); counts one more failure."""
        self.failures += 1
        return self.maximum * (1.0 + self._rng.random())

    def reset(self) -> None:
        self.failures = 0


Cause = Literal["expired", "silent", "error"]
"""watch_restarts_total's cause of a failed cycle."""


@dataclass(frozen=True, slots=True)
class Retry:
    """The decision after one failed cycle."""

    delay: float  # seconds before the next cycle
    cause: Cause
    relist: bool  # the next cycle lists (410 Gone)
    denied: bool = False  # 401/403: the operator's RBAC or credentials


def after_failure(exc: Exception, backoff: Backoff) -> Retry:
    """What to do after `exc` ended a cycle; counts one more failure on `backoff`."""
    if isinstance(exc, Gone):
        delay = backoff.next()
        return Retry(0.0 if backoff.failures == 1 else delay, "expired", relist=True)
    cause: Cause = "silent" if isinstance(exc, ReadTimeout) else "error"
    if isinstance(exc, Unauthorized | Forbidden):
        return Retry(backoff.longest(), cause, relist=False, denied=True)
    delay = backoff.next()
    if isinstance(exc, TooManyRequests):
        delay = max(delay, exc.retry_after or 0.0)
    return Retry(delay, cause, relist=False)
