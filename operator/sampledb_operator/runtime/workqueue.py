"""A work queue with client-go semantics: dedup, per-item serialisation, delayed and rate-limited adds,
and two priorities.

Invariants:
- An item is waiting at most once (the dirty set); FIFO among the waiting items of one priority.
- Two priorities: an add(item, urgent=True) goes before every item added without it (an item already
  waiting is moved up; one in progress comes back urgent after done()), but at most URGENT_STREAK urgent
  items are handed out in a row while plain ones wait, so plain items are never starved. (What a
  controller marks urgent is its business: the SampleDB controller marks a database when a child's event
  moves one of its steps, decide/urgency.py, so work under way finishes before the next new database
  starts; controller-runtime's priority queue likewise lets the initial list's items wait behind events.)
- An item handed out by get() is "processing" until done(item); an add meanwhile marks it dirty and
  it is queued again at done(), so no item is ever processed concurrently with itself.
- add_after(item, d) fires add(item) d seconds of clock time later (the earliest pending deadline of
  an item wins); one internal task (runtime.delayed_adds), owned by the queue and cancelled at shutdown,
  runs the delays.
  A fired add of an item already waiting is a no-op (dedup). add_soon(item, d) is add_after unless
  the item is already dirty. A delayed add is urgent when any of the item's pending delayed adds was.
- After shutdown() every add is ignored. drain=True: get() keeps handing out waiting items (and items
  re-queued by done()) until none is waiting or processing, or until the timeout; drain=False:
  get() raises ShutDown at once.
- Metrics (workqueue_* {name, controller}): depth counts dirty items (waiting, or re-added while
  processing) as client-go; adds_total counts adds that were not deduplicated; retries_total counts
  add_rate_limited() calls only (client-go also counts plain AddAfter: here a requeue_after is not a
  retry); queue_duration and work_duration are observed at get() and done().
  unfinished_work_seconds and longest_running_processor_seconds are computed at scrape time
  (Gauge.set_function over the items in progress), so they cost nothing between scrapes and stay
  accurate when a processor is stuck. The queue must be used from one event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from sampledb_operator.observability import metrics
from sampledb_operator.runtime.clock import Clock, wait_all
from sampledb_operator.runtime.delayed_adds import DelayedAdds
from sampledb_operator.runtime.ratelimit import RateLimiter, default_controller_rate_limiter

K = TypeVar("K", bound=Hashable)
URGENT_STREAK = 4  # urgent items handed out in a row, at most, while plain ones wait


class ShutDown(Exception):
    """The queue is shut down: no more items will be handed out."""


class _Metrics:
    """The queue's metric children, looked up once."""

    def __init__(self, name: str, controller: str) -> None:
        metrics.init_queue(name, controller)
        labels = {"name": name, "controller": controller}
        self.depth = metrics.workqueue_depth.labels(**labels)
        self.adds = metrics.workqueue_adds_total.labels(**labels)
        self.retries = metrics.workqueue_retries_total.labels(**labels)
        self.queue_duration = metrics.workqueue_queue_duration_seconds.labels(**labels)
        self.work_duration = metrics.workqueue_work_duration_seconds.labels(**labels)
        self.unfinished = metrics.workqueue_unfinished_work_seconds.labels(**labels)
        self.longest = metrics.workqueue_longest_running_processor_seconds.labels(**labels)


def _in_progress_gauges(queue: WorkQueue[K], m: _Metrics) -> None:
    """Bind the two in-progress gauges to `queue` at scrape time, without keeping it alive."""
    ref = weakref.ref(queue)

    def unfinished() -> float:
        q = ref()
        return q.unfinished_work_seconds() if q is not None else 0.0

    def longest() -> float:
        q = ref()
        return q.longest_running_processor_seconds() if q is not None else 0.0

    m.unfinished.set_function(unfinished)
    m.longest.set_function(longest)


class WorkQueue(Generic[K]):
    """Dedup + per-item serialisation + delayed and rate-limited adds (client-go semantics)."""

    def __init__(self, name: str, *, clock: Clock, rate_limiter: RateLimiter[K] | None = None,
                 controller: str | None = None) -> None:
        self.name = name
        self._clock = clock
        self._limiter: RateLimiter[K] = rate_limiter or default_controller_rate_limiter(clock)
        # waiting items: (ticket, item) in two FIFOs; _waiting maps each waiting item to its live ticket, so an
        # entry left behind by a move to the urgent FIFO is skipped when reached
        self._queue: deque[tuple[int, K]] = deque()
        self._urgent: deque[tuple[int, K]] = deque()
        self._waiting: dict[K, tuple[int, bool]] = {}
        self._urgent_after_done: set[K] = set()  # in progress, re-added urgent meanwhile
        self._streak = 0  # urgent items handed out in a row while plain ones waited
        self._tickets = itertools.count()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._stopped = False  # get() raises at once
        self._drained = asyncio.Event()
        self._delays: DelayedAdds[K] = DelayedAdds(
            clock, lambda item, urgent: self.add(item, urgent=urgent), task_name=f"workqueue-{name}-delays")
        self._m = _Metrics(name, controller if controller is not None else name)
        _in_progress_gauges(self, self._m)

    # -- adds -------------------------------------------------------------------------------

    def add(self, item: K, *, urgent: bool = False) -> None:
        """Mark `item` as needing processing (no-op if already waiting or after shutdown, except that an urgent
        add moves a plain waiting item up)."""
        if self._shutting_down:
            return
        if item in self._dirty:
            if urgent:
                self._make_urgent(item)
            return
        self._m.adds.inc()
        self._dirty.add(item)
        self._added_at.setdefault(item, self._clock.monotonic())
        self._m.depth.set(len(self._dirty))
        if item in self._processing:
            if urgent:
                self._urgent_after_done.add(item)
            return
        self._push(item, urgent)

    def _make_urgent(self, item: K) -> None:
        """A dirty item becomes urgent: moved to the urgent FIFO if waiting, urgent after done() if in progress."""
        waiting = self._waiting.get(item)
        if waiting is None:
            self._urgent_after_done.add(item)
        elif not waiting[1]:
            self._push(item, True)  # its plain entry is left behind, skipped when reached

    def _push(self, item: K, urgent: bool) -> None:
        ticket = next(self._tickets)
        self._waiting[item] = (ticket, urgent)
        (self._urgent if urgent else self._queue).append((ticket, item))
        self._wake_one()

    def _pop(self) -> K | None:
        """The next waiting item by priority (URGENT_STREAK bounds the urgent run), or None."""
        if not self._waiting:
            return None
        plain_waits = self._first_live(self._queue, urgent=False)
        take_urgent = self._first_live(self._urgent, urgent=True) and (
            not plain_waits or self._streak < URGENT_STREAK)
        _ticket, item = (self._urgent if take_urgent else self._queue).popleft()
        del self._waiting[item]
        self._streak = self._streak + 1 if take_urgent and plain_waits else 0
        return item

    def _first_live(self, fifo: deque[tuple[int, K]], *, urgent: bool) -> bool:
        """Drop the entries left behind at the head of `fifo`; whether a live one is there."""
        while fifo:
            ticket, item = fifo[0]
            if self._waiting.get(item) == (ticket, urgent):
                return True
            fifo.popleft()
        return False

    def add_after(self, item: K, delay: float, *, urgent: bool = False) -> None:
        """add(item) after `delay` seconds of clock time; the earliest pending deadline wins (urgent if any of
        the pending adds is)."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item, urgent=urgent)
            return
        self._delays.schedule(item, delay, urgent=urgent)

    def add_soon(self, item: K, delay: float, *, urgent: bool = False) -> None:
        """add_after(item, delay), unless `item` is already dirty (waiting, or re-added while processing): the
        pass that is coming anyway reads the caches after whatever made the caller add it (an urgent add_soon
        makes that pass urgent). So several changes within `delay` of one another bring one pass, not one each
        (client-go's AddAfter, used by controllers to coalesce bursts of events)."""
        if item in self._dirty:
            if urgent and not self._shutting_down:
                self._make_urgent(item)
            return
        self.add_after(item, delay, urgent=urgent)

    def add_rate_limited(self, item: K) -> None:
        """add_after(item, rate_limiter.when(item)); counts a retry."""
        if self._shutting_down:
            return
        self._m.retries.inc()
        self.add_after(item, self._limiter.when(item))

    def forget(self, item: K) -> None:
        """Reset the rate limiter's memory of `item` (it does not remove the item from the queue)."""
        self._limiter.forget(item)

    def num_requeues(self, item: K) -> int:
        return self._limiter.num_requeues(item)

    # -- processing -------------------------------------------------------------------------

    async def get(self) -> K:
        """The next waiting item, which becomes "processing" until done(item).

        Raises ShutDown once shut down without drain, or, when draining, once nothing is waiting or
        processing any more (or the drain timed out).
        """
        while True:
            if self._stopped:
                raise ShutDown(self.name)
            item = self._pop()
            if item is not None:
                break
            if self._shutting_down and not self._processing:
                raise ShutDown(self.name)
            await self._wait_for_item()
        now = self._clock.monotonic()
        self._processing.add(item)
        self._dirty.discard(item)
        self._m.depth.set(len(self._dirty))
        added = self._added_at.pop(item, None)
        if added is not None:
            self._m.queue_duration.observe(max(0.0, now - added))
        self._started_at[item] = now
        return item

    def done(self, item: K) -> None:
        """End processing of `item`; if it was re-added meanwhile it is queued again (at the back of its
        priority's FIFO)."""
        if item not in self._processing:
            return
        self._processing.discard(item)
        urgent = item in self._urgent_after_done
        self._urgent_after_done.discard(item)
        started = self._started_at.pop(item, None)
        if started is not None:
            self._m.work_duration.observe(max(0.0, self._clock.monotonic() - started))
        if item in self._dirty:
            self._push(item, urgent)
        self._check_drained()

    def __len__(self) -> int:
        """Items waiting to be handed out (not those in progress, not delayed ones)."""
        return len(self._waiting)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    @property
    def processing(self) -> int:
        """Items handed out and not yet done()."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """Items waiting for an add_after deadline."""
        return len(self._delays)

    def unfinished_work_seconds(self) -> float:
        """Sum of the time every in-progress item has been processing. Safe off the loop (a scrape's thread):
        the values are copied by one C call, which the GIL does not interleave with the loop's changes."""
        started_at = tuple(self._started_at.values())
        now = self._clock.monotonic()
        return sum(max(0.0, now - started) for started in started_at)

    def longest_running_processor_seconds(self) -> float:
        """How long the oldest in-progress item has been processing (0 when none); safe off the loop, as above."""
        started_at = tuple(self._started_at.values())
        return max(0.0, self._clock.monotonic() - min(started_at)) if started_at else 0.0

    # -- shutdown ---------------------------------------------------------------------------

    def shutdown_nowait(self) -> None:
        """shutdown(drain=False) without awaiting: ignore adds, get() raises ShutDown at once.

        The delay task is cancelled but not awaited; a later `await shutdown()` awaits it.
        """
        self._begin_shutdown()
        self._stop_getting()

    async def shutdown(
        self, *, drain: bool = True, timeout: float | None = None  # noqa: ASYNC109 - on the Clock
    ) -> None:
        """Stop accepting adds; with drain, wait (up to `timeout` clock seconds) for the work to finish."""
        self._begin_shutdown()
        try:
            await self._delays.wait_closed()
            if drain and not self._stopped:
                self._check_drained()
                waiter = asyncio.ensure_future(self._drained.wait())
                try:
                    await wait_all(self._clock, [waiter], timeout)
                finally:
                    waiter.cancel()
                    await asyncio.wait({waiter})
        finally:
            self._stop_getting()

    def _begin_shutdown(self) -> None:
        """Ignore adds from now on; drop delayed adds and cancel the delay task."""
        self._shutting_down = True
        self._delays.close()
        self._wake_all()

    def _stop_getting(self) -> None:
        self._stopped = True
        self._wake_all()

    def _check_drained(self) -> None:
        if self._shutting_down and not self._waiting and not self._processing:
            self._drained.set()
            self._wake_all()

    # -- getters ----------------------------------------------------------------------------

    async def _wait_for_item(self) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._getters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future in self._getters:
                self._getters.remove(future)
            elif not future.cancelled():
                self._wake_one()  # we were woken but will not take the item: pass the turn on
            raise

    def _wake_one(self) -> None:
        while self._getters:
            future = self._getters.popleft()
            if not future.done():
                future.set_result(None)
                return

    def _wake_all(self) -> None:
        while self._getters:
            future = self._getters.popleft()
            if not future.done():
                future.set_result(None)
