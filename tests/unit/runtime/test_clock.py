"""FakeClock, RealClock and wait_all."""

from __future__ import annotations

import asyncio
from datetime import UTC, timedelta

import pytest
from tests.support.aio import eventually

from sampledb_operator.runtime.clock import Clock, FakeClock, RealClock, wait_all


def test_fake_clock_starts_where_told_and_moves_only_on_advance() -> None:
    clock = FakeClock(start=5.0)
    assert clock.monotonic() == 5.0
    clock.advance(2.5)
    assert clock.monotonic() == 7.5


def test_fake_clock_now_is_utc_and_follows_advance() -> None:
    clock = FakeClock()
    before = clock.now()
    clock.advance(90)
    assert before.tzinfo is UTC
    assert clock.now() - before == timedelta(seconds=90)


def test_fake_clock_refuses_to_go_backwards() -> None:
    with pytest.raises(ValueError):
        FakeClock().advance(-1)


async def test_advance_wakes_only_sleepers_whose_deadline_passed_in_deadline_order() -> None:
    clock = FakeClock()
    woken: list[float] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woken.append(seconds)

    tasks = [asyncio.create_task(sleeper(s)) for s in (3.0, 1.0, 2.0, 10.0)]
    await eventually(lambda: clock.pending_sleepers() == 4)
    assert clock.next_deadline() == 1.0
    clock.advance(3.0)
    await eventually(lambda: len(woken) == 3)
    assert woken == [1.0, 2.0, 3.0]
    assert clock.pending_sleepers() == 1
    clock.advance(6.9)
    await asyncio.sleep(0)
    assert len(woken) == 3
    clock.advance(0.1)
    await asyncio.gather(*tasks)
    assert woken == [1.0, 2.0, 3.0, 10.0]


async def test_sleep_zero_or_negative_returns_without_advance() -> None:
    clock = FakeClock()
    await asyncio.wait_for(clock.sleep(0), 1.0)
    await asyncio.wait_for(clock.sleep(-1), 1.0)
    assert clock.pending_sleepers() == 0


async def test_cancelled_sleeper_is_not_pending() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(5))
    await eventually(lambda: clock.pending_sleepers() == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.pending_sleepers() == 0
    clock.advance(10)  # popping a cancelled sleeper is harmless


async def test_real_clock_is_monotonic_and_utc() -> None:
    clock: Clock = RealClock()
    first = clock.monotonic()
    await clock.sleep(0)
    assert clock.monotonic() >= first
    assert clock.now().tzinfo is UTC


async def test_wait_all_returns_true_when_tasks_finish_before_timeout() -> None:
    clock = FakeClock()
    gate = asyncio.Event()
    task = asyncio.create_task(gate.wait())
    waiter = asyncio.create_task(wait_all(clock, [task], timeout=5))
    await eventually(lambda: clock.pending_sleepers() == 1)
    gate.set()
    assert await asyncio.wait_for(waiter, 1.0) is True
    assert clock.pending_sleepers() == 0


async def test_wait_all_returns_false_after_clock_timeout_and_leaves_tasks_running() -> None:
    clock = FakeClock()
    task = asyncio.create_task(asyncio.Event().wait())
    waiter = asyncio.create_task(wait_all(clock, [task], timeout=5))
    await eventually(lambda: clock.pending_sleepers() == 1)
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert not waiter.done()
    clock.advance(0.1)
    assert await asyncio.wait_for(waiter, 1.0) is False
    assert not task.done()
    task.cancel()


async def test_wait_all_without_timeout_waits_for_everything() -> None:
    clock = FakeClock()
    tasks = [asyncio.create_task(asyncio.sleep(0)) for _ in range(3)]
    assert await asyncio.wait_for(wait_all(clock, tasks, timeout=None), 1.0) is True
    assert await wait_all(clock, [], timeout=1) is True
