"""Time as an injected dependency: the Clock protocol, a real clock and a deterministic fake.

Invariants: every timeout and delay in runtime/ is measured on a Clock, never on the loop's clock
directly, so tests drive time with FakeClock.advance(). `monotonic()` never goes backwards; `now()`
is timezone-aware UTC. FakeClock wakes sleepers only from advance(), in deadline order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    """A source of time that can also wait."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (only differences are meaningful)."""
        ...

    def now(self) -> datetime:
        """Wall-clock time, timezone-aware UTC."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""
        ...


class RealClock:
    """The process's clocks: time.monotonic, datetime.now(UTC), asyncio.sleep."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


_FAKE_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told to; sleepers wake from advance(), earliest deadline first.

    sleep(0) (or negative) returns after one event-loop turn without registering a sleeper.
    """

    def __init__(self, start: float = 0.0, *, wall_start: datetime = _FAKE_EPOCH) -> None:
        self._now = start
        self._start = start
        self._wall_start = wall_start
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def monotonic(self) -> float:
        return self._now

    def now(self) -> datetime:
        return self._wall_start + timedelta(seconds=self._now - self._start)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), future))
        await future

    def advance(self, seconds: float) -> None:
        """Move time forward and wake (in deadline order) every sleeper whose deadline has passed."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def pending_sleepers(self) -> int:
        """How many sleeps are waiting (cancelled ones excluded)."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    def next_deadline(self) -> float | None:
        """The earliest deadline of a waiting sleeper, or None."""
        live = [deadline for deadline, _, future in self._sleepers if not future.done()]
        return min(live) if live else None


async def sleep_until(clock: Clock, deadline: float) -> None:
    """Sleep until clock.monotonic() reaches `deadline`.

    The remaining time is computed when this coroutine starts running, not when it is created, so a
    task started later (or a fake clock advanced meanwhile) still wakes at `deadline`.
    """
    await clock.sleep(deadline - clock.monotonic())


async def wait_all(
    clock: Clock, tasks: Iterable[asyncio.Future[Any]], timeout: float | None  # noqa: ASYNC109 - on the Clock
) -> bool:
    """Wait until every task is done or `timeout` seconds of `clock` time passed.

    Returns True if all finished. The tasks are neither cancelled nor awaited for their result.
    """
    pending: set[asyncio.Future[Any]] = {task for task in tasks if not task.done()}
    if not pending:
        return True
    if timeout is None:
        await asyncio.wait(pending)
        return True
    timer = asyncio.ensure_future(sleep_until(clock, clock.monotonic() + timeout))
    try:
        while pending and not timer.done():
            _, still = await asyncio.wait(pending | {timer}, return_when=asyncio.FIRST_COMPLETED)
            pending = still - {timer}
        return not pending
    finally:
        timer.cancel()
        await asyncio.wait({timer})


async def within(clock: Clock, awaitable: Awaitable[T], seconds: float) -> T | None:
    """The result of `awaitable`, or None if `seconds` of `clock` pass first (it is cancelled)."""
    task = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        return None
    finally:
        task.cancel()
        timer.cancel()
        await asyncio.wait({task, timer})   # both end promptly; an outer cancel still propagates
        if not task.cancelled():
            task.exception()                # mark retrieved (it was raised above if it mattered)
