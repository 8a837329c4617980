"""WorkQueue: dedup, per-item serialisation, FIFO, delayed and rate-limited adds, shutdown, metrics."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from tests.support.aio import eventually

from sampledb_operator.observability.metrics import REGISTRY
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.ratelimit import ItemExponentialFailureRateLimiter
from sampledb_operator.runtime.workqueue import ShutDown, WorkQueue

_names = itertools.count()




async def get(queue: WorkQueue[str]) -> str:
    return await asyncio.wait_for(queue.get(), 1.0)


def make_queue(clock: FakeClock, base_delay: float = 1.0) -> WorkQueue[str]:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay, 1000.0)
    return WorkQueue[str](f"test-q-{next(_names)}", clock=clock, rate_limiter=limiter, controller="test")


def sample(metric: str, queue: WorkQueue[str]) -> float:
    value = REGISTRY.get_sample_value(metric, {"name": queue.name, "controller": "test"})
    assert value is not None, metric
    return value


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_item_already_waiting_is_not_added_twice(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("a")
    queue.add("a")
    assert len(queue) == 1
    assert sample("workqueue_adds_total", queue) == 1
    assert sample("workqueue_depth", queue) == 1


async def test_distinct_items_come_out_in_fifo_order(clock: FakeClock) -> None:
    queue = make_queue(clock)
    for item in "cab":
        queue.add(item)
    queue.add("c")
    assert [await get(queue) for _ in range(3)] == ["c", "a", "b"]


async def test_readded_while_processing_runs_again_after_done(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("a")
    assert await get(queue) == "a"
    queue.add("a")
    assert len(queue) == 0  # not handed out while being processed
    assert sample("workqueue_depth", queue) == 1  # but dirty, as client-go counts it
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not second.done()
    queue.done("a")
    assert await asyncio.wait_for(second, 1.0) == "a"


async def test_readded_item_goes_behind_items_already_waiting(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("a")
    await get(queue)
    queue.add("a")
    queue.add("b")
    queue.done("a")
    assert [await get(queue), await get(queue)] == ["b", "a"]


async def test_done_without_readd_does_not_requeue(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("a")
    await get(queue)
    queue.done("a")
    queue.done("a")  # a second done of an item not in progress is ignored
    assert len(queue) == 0
    assert queue.processing == 0


async def test_get_waits_for_an_add(clock: FakeClock) -> None:
    queue = make_queue(clock)
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not getter.done()
    queue.add("a")
    assert await asyncio.wait_for(getter, 1.0) == "a"


async def test_cancelled_getter_does_not_lose_the_item(clock: FakeClock) -> None:
    queue = make_queue(clock)
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, 1.0) == "a"


async def test_add_after_fires_on_the_clock_not_before(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add_after("a", 5.0)
    assert queue.delayed == 1
    await eventually(lambda: clock.pending_sleepers() == 1)
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert len(queue) == 0
    clock.advance(0.1)
    await eventually(lambda: len(queue) == 1)
    assert queue.delayed == 0
    assert await get(queue) == "a"


async def test_add_after_with_no_delay_adds_at_once(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add_after("a", 0)
    queue.add_after("b", -1)
    assert len(queue) == 2


async def test_delayed_add_of_an_item_already_waiting_is_a_noop_when_it_fires(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add_after("a", 1.0)
    queue.add("a")
    clock.advance(1.0)
    await eventually(lambda: queue.delayed == 0)
    assert len(queue) == 1
    assert sample("workqueue_adds_total", queue) == 1


async def test_earliest_of_several_add_after_wins(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add_after("a", 10.0)
    queue.add_after("a", 3.0)
    queue.add_after("a", 7.0)  # later than the pending 3 s: ignored
    assert queue.delayed == 1
    await eventually(lambda: clock.pending_sleepers() == 1)
    clock.advance(3.0)
    await eventually(lambda: len(queue) == 1)
    assert await get(queue) == "a"
    queue.done("a")
    clock.advance(10.0)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(queue) == 0  # the superseded 10 s deadline never fires
    assert sample("workqueue_adds_total", queue) == 1


async def test_delayed_items_fire_in_deadline_order(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add_after("late", 2.0)
    queue.add_after("early", 1.0)
    clock.advance(5.0)
    await eventually(lambda: len(queue) == 2)
    assert [await get(queue), await get(queue)] == ["early", "late"]


async def test_new_earlier_deadline_wakes_the_delay_loop(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add_after("slow", 100.0)
    await eventually(lambda: clock.next_deadline() == 100.0)
    queue.add_after("fast", 1.0)
    await eventually(lambda: clock.next_deadline() == 1.0)
    clock.advance(1.0)
    await eventually(lambda: len(queue) == 1)
    assert await get(queue) == "fast"


async def test_add_rate_limited_waits_the_limiters_delay_and_counts_retries(clock: FakeClock) -> None:
    queue = make_queue(clock, base_delay=2.0)
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")  # second failure: 4 s, but the pending 2 s deadline wins
    assert queue.num_requeues("a") == 2
    assert sample("workqueue_retries_total", queue) == 2
    await eventually(lambda: clock.pending_sleepers() == 1)
    clock.advance(1.9)
    await asyncio.sleep(0)
    assert len(queue) == 0
    clock.advance(0.1)
    await eventually(lambda: len(queue) == 1)
    queue.forget("a")
    assert queue.num_requeues("a") == 0


async def test_shutdown_with_drain_finishes_waiting_and_in_progress_items(clock: FakeClock) -> None:
    queue = make_queue(clock)
    for item in "abc":
        queue.add(item)
    assert await get(queue) == "a"
    queue.add("a")  # re-added while processing, before the shutdown: must run again
    shutdown = asyncio.create_task(queue.shutdown(drain=True))
    await asyncio.sleep(0)
    assert queue.shutting_down
    queue.add("z")  # ignored after shutdown
    queue.add_after("y", 1.0)
    queue.add_rate_limited("x")
    seen = []
    queue.done("a")
    while not shutdown.done():
        try:
            item = await get(queue)
        except ShutDown:
            break
        seen.append(item)
        queue.done(item)
    await asyncio.wait_for(shutdown, 1.0)
    assert seen == ["b", "c", "a"]
    with pytest.raises(ShutDown):
        await get(queue)


async def test_idle_getter_waits_for_in_progress_item_during_drain(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("a")
    await get(queue)
    queue.add("a")
    shutdown = asyncio.create_task(queue.shutdown(drain=True))
    idle = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not idle.done() and not shutdown.done()
    queue.done("a")  # requeues the dirty item: the idle getter gets it
    assert await asyncio.wait_for(idle, 1.0) == "a"
    assert not shutdown.done()
    queue.done("a")
    await asyncio.wait_for(shutdown, 1.0)


async def test_shutdown_without_drain_stops_get_at_once(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("a")
    queue.add("b")
    await get(queue)
    await asyncio.wait_for(queue.shutdown(drain=False), 1.0)
    with pytest.raises(ShutDown):
        await get(queue)
    queue.done("a")  # done after shutdown is harmless


async def test_shutdown_wakes_blocked_getters(clock: FakeClock) -> None:
    queue = make_queue(clock)
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    await asyncio.wait_for(queue.shutdown(), 1.0)
    for getter in getters:
        with pytest.raises(ShutDown):
            await asyncio.wait_for(getter, 1.0)


async def test_drain_timeout_bounds_shutdown(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("stuck")
    queue.add("waiting")
    await get(queue)
    shutdown = asyncio.create_task(queue.shutdown(drain=True, timeout=30.0))
    await eventually(lambda: clock.pending_sleepers() == 1)
    clock.advance(29.0)
    await asyncio.sleep(0)
    assert not shutdown.done()
    clock.advance(1.0)
    await asyncio.wait_for(shutdown, 1.0)
    with pytest.raises(ShutDown):
        await get(queue)  # "waiting" is abandoned once the drain timed out


async def test_shutdown_drops_pending_delayed_adds(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add_after("a", 1.0)
    await eventually(lambda: clock.pending_sleepers() == 1)
    await asyncio.wait_for(queue.shutdown(), 1.0)
    assert queue.delayed == 0
    assert clock.pending_sleepers() == 0  # the delay task is gone
    clock.advance(5.0)
    with pytest.raises(ShutDown):
        await get(queue)


async def test_queue_and_work_durations_are_observed_on_the_clock(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("a")
    clock.advance(2.0)
    await get(queue)
    assert sample("workqueue_queue_duration_seconds_sum", queue) == 2.0
    assert sample("workqueue_depth", queue) == 0
    clock.advance(3.0)
    queue.done("a")
    assert sample("workqueue_work_duration_seconds_sum", queue) == 3.0
    assert sample("workqueue_work_duration_seconds_count", queue) == 1


async def test_unfinished_work_and_longest_processor_are_computed_at_scrape(clock: FakeClock) -> None:
    queue = make_queue(clock)
    assert sample("workqueue_unfinished_work_seconds", queue) == 0
    queue.add("a")
    queue.add("b")
    await get(queue)
    clock.advance(4.0)
    await get(queue)
    clock.advance(1.0)
    assert sample("workqueue_unfinished_work_seconds", queue) == 6.0  # 5 + 1
    assert sample("workqueue_longest_running_processor_seconds", queue) == 5.0
    queue.done("a")
    queue.done("b")
    assert sample("workqueue_unfinished_work_seconds", queue) == 0
    assert sample("workqueue_longest_running_processor_seconds", queue) == 0


async def test_add_soon_coalesces_a_burst_into_one_item_and_skips_an_item_already_waiting(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("waiting")
    queue.add_soon("waiting", 1.0)  # the coming pass will see it: nothing delayed
    assert queue.delayed == 0
    for _ in range(5):
        queue.add_soon("burst", 1.0)
        clock.advance(0.1)
    assert queue.delayed == 1 and len(queue) == 1
    await eventually(lambda: clock.pending_sleepers() == 1)
    clock.advance(0.5)  # one second after the first add_soon
    await eventually(lambda: len(queue) == 2)
    assert [await get(queue), await get(queue)] == ["waiting", "burst"]


async def test_add_soon_while_processing_brings_another_pass_after_the_delay(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("a")
    assert await get(queue) == "a"  # processing: its pass may have read the caches before the change
    queue.add_soon("a", 1.0)
    assert queue.delayed == 1
    await eventually(lambda: clock.pending_sleepers() == 1)
    clock.advance(1.0)
    await eventually(lambda: queue.delayed == 0)
    queue.done("a")
    assert len(queue) == 1 and await get(queue) == "a"
