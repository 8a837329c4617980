"""runtime/watch_retry: the wait and the relist after each kind of failed watch cycle (pure)."""

from __future__ import annotations

import random

import pytest

from sampledb_operator.kube.errors import (
    Forbidden,
    Gone,
    ReadTimeout,
    ServerError,
    StreamWentQuiet,
    TooManyRequests,
    Unauthorized,
)
from sampledb_operator.runtime.watch_retry import Backoff, IncompleteList, ShortWatch, after_failure


def backoff() -> Backoff:
    return Backoff(0.8, 30.0, random.Random(7))


def test_backoff_jitter_stays_within_one_to_two_times_the_base() -> None:
    b = backoff()
    for base in (0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0):
        assert base <= b.next() < 2 * base
    b.reset()
    assert 0.8 <= b.next() < 1.6


def test_the_first_gone_relists_at_once_a_second_one_after_the_backoff() -> None:
    b = backoff()
    first = after_failure(Gone(410, "Expired", ""), b)
    assert (first.delay, first.cause, first.relist) == (0.0, "expired", True)
    second = after_failure(Gone(410, "Expired", ""), b)
    assert second.relist and 1.6 <= second.delay < 3.2


def test_a_gone_after_other_failures_relists_after_the_backoff() -> None:
    b = backoff()
    after_failure(ShortWatch("closed at once"), b)
    retry = after_failure(Gone(410, "Expired", ""), b)
    assert retry.relist and 1.6 <= retry.delay < 3.2


@pytest.mark.parametrize("exc", [Unauthorized(401, "Unauthorized", ""), Forbidden(403, "Forbidden", "")])
def test_a_denied_watch_waits_the_longest_backoff(exc: Exception) -> None:
    b = backoff()
    retry = after_failure(exc, b)
    assert retry.denied and not retry.relist and retry.cause == "error"
    assert 30.0 <= retry.delay < 60.0
    assert b.failures == 1


def test_too_many_requests_waits_at_least_retry_after() -> None:
    assert after_failure(TooManyRequests(429, "TooManyRequests", "", retry_after=7.0), backoff()).delay == 7.0
    assert 0.8 <= after_failure(TooManyRequests(429, "", "", retry_after=0.1), backoff()).delay < 1.6


@pytest.mark.parametrize("exc, cause", [
    (ReadTimeout("silent"), "silent"),
    (StreamWentQuiet("quiet"), "silent"),
    (ServerError(500, "InternalError", ""), "error"),
    (IncompleteList("ended early"), "error"),
    (ShortWatch("closed at once"), "error"),
    (RuntimeError("a bug"), "error"),
])
def test_other_failures_take_the_next_backoff_step(exc: Exception, cause: str) -> None:
    b = backoff()
    b.next()
    retry = after_failure(exc, b)
    assert (retry.cause, retry.relist, retry.denied) == (cause, False, False)
    assert 1.6 <= retry.delay < 3.2
