"""A work queue's delayed adds: the pending deadlines of add_after and the one task that fires them.

Invariants:
- an item has at most one pending deadline, the earliest scheduled (a later one is ignored); it fires
  urgent when any of the item's adds scheduled since it last fired was urgent;
- due items are handed to `fire(item, urgent)` in deadline order, on the clock's time, by one task that
  is created by the first schedule(), owned here and cancelled by close(); between deadlines it sleeps
  until the earliest, or until an earlier one is scheduled;
- after close() nothing is pending, nothing fires and schedule() is ignored.
Used from one event loop (the queue's).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from sampledb_operator.runtime.clock import Clock, sleep_until

K = TypeVar("K", bound=Hashable)


class DelayedAdds(Generic[K]):
    """Items waiting for a deadline, and the task that hands each to `fire` when its time comes."""

    def __init__(self, clock: Clock, fire: Callable[[K, bool], None], *, task_name: str) -> None:
        self._clock = clock
        self._fire = fire
        self._task_name = task_name
        # heap of (ready_at, seq, item); _pending maps item -> its live (ready_at, seq, urgent), so a heap
        # entry superseded by an earlier deadline of the same item is skipped when reached
        self._heap: list[tuple[float, int, K]] = []
        self._pending: dict[K, tuple[float, int, bool]] = {}
        self._seq = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        """Items waiting for their deadline."""
        return len(self._pending)

    def schedule(self, item: K, delay: float, *, urgent: bool = False) -> None:
        """fire(item, urgent) `delay` seconds of clock time from now; an earlier pending deadline of `item`
        wins (and fires urgent if this add is)."""
        if self._closed:
            return
        ready_at = self._clock.monotonic() + delay
        current = self._pending.get(item)
        if current is not None and current[0] <= ready_at:
            if urgent and not current[2]:
                self._pending[item] = (current[0], current[1], True)
            return
        urgent = urgent or (current is not None and current[2])
        seq = next(self._seq)
        self._pending[item] = (ready_at, seq, urgent)
        heapq.heappush(self._heap, (ready_at, seq, item))
        if self._heap[0][1] == seq:  # a new earliest deadline: the loop must look again
            self._wakeup.set()
        self._ensure_task()

    def close(self) -> None:
        """Drop every pending add and cancel the task, without awaiting it (wait_closed() does)."""
        self._closed = True
        self._heap.clear()
        self._pending.clear()
        if self._task is not None:
            self._task.cancel()

    async def wait_closed(self) -> None:
        """Wait until the task (if one was ever started) has ended; after close() it ends at once."""
        if self._task is not None:
            await asyncio.wait({self._task})

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=self._task_name)

    def _fire_due(self) -> float | None:
        """fire() every item whose deadline passed, in deadline order; the next deadline or None."""
        now = self._clock.monotonic()
        while self._heap:
            ready_at, seq, item = self._heap[0]
            live = self._pending.get(item)
            if live is None or live[:2] != (ready_at, seq):
                heapq.heappop(self._heap)  # superseded by an earlier deadline of the same item
                continue
            if ready_at > now:
                return ready_at
            heapq.heappop(self._heap)
            del self._pending[item]
            self._fire(item, live[2])
        return None

    async def _loop(self) -> None:
        while not self._closed:
            self._wakeup.clear()
            next_at = self._fire_due()
            if next_at is None:
                await self._wakeup.wait()
                continue
            sleeper = asyncio.ensure_future(sleep_until(self._clock, next_at))
            waker = asyncio.ensure_future(self._wakeup.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waker.cancel()
                await asyncio.wait({sleeper, waker})
