"""MemoryTrimmer: trims at once and then every period, off the loop; survives a failing trim; a C library
without malloc_trim makes it a no-op; glibc's malloc_trim really returns freed heap memory."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest
from tests.support.aio import eventually

from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.memory import MemoryTrimmer, libc_malloc_trim


async def test_trims_when_started_and_then_every_period_in_a_worker_thread() -> None:
    clock = FakeClock()
    threads: list[int] = []

    def trim() -> int:
        threads.append(threading.get_ident())
        return 1

    task = asyncio.ensure_future(MemoryTrimmer(clock, period=60, find_trim=lambda: trim).run())
    try:
        await eventually(lambda: len(threads) == 1 and clock.pending_sleepers() == 1)
        clock.advance(59)
        await asyncio.sleep(0)
        assert len(threads) == 1
        clock.advance(1)
        await eventually(lambda: len(threads) == 2)
        assert threading.get_ident() not in threads
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_failing_trim_is_logged_and_tried_again_next_period() -> None:
    clock = FakeClock()
    calls: list[int] = []

    def trim() -> int:
        calls.append(1)
        raise OSError("no")

    task = asyncio.ensure_future(MemoryTrimmer(clock, period=10, find_trim=lambda: trim).run())
    try:
        await eventually(lambda: len(calls) == 1 and clock.pending_sleepers() == 1)
        clock.advance(10)
        await eventually(lambda: len(calls) == 2)
        assert not task.done()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_without_malloc_trim_it_waits_until_cancelled() -> None:
    task = asyncio.ensure_future(MemoryTrimmer(FakeClock(), find_trim=lambda: None).run())
    await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="period"):
        MemoryTrimmer(FakeClock(), period=0)


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def test_glibc_malloc_trim_returns_freed_heap_memory() -> None:
    trim = libc_malloc_trim()
    assert trim is not None, "this machine's C library is glibc"
    # many 2 KiB buffers (C heap, not mmap) with one small survivor after each: freeing the rest leaves holes
    # that the heap's top cannot shrink past
    buffers = [bytearray(2048) for _ in range(40_000)]
    keep = [bytearray(64) for _ in range(40_000)]
    for b in buffers:
        b[0] = 1  # touched: resident
    before = _rss_kib()
    del buffers
    freed = _rss_kib()
    trim()
    after = _rss_kib()
    assert keep
    assert after < freed - 40_000, (before, freed, after)
