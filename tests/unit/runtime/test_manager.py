"""Manager: sync gating, leadership, graceful stop, lost leadership, resync, task ownership."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest
from tests.support.aio import eventually

from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability import metrics
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.controller import Controller, Reconcile
from sampledb_operator.runtime.manager import Manager

_names = itertools.count()
A = ObjectRef("ns", "a")




class FakeStore:
    def __init__(self) -> None:
        self.synced = asyncio.Event()


class FakeWatcher:
    def __init__(self, journal: list[str], name: str = "w") -> None:
        self.store = FakeStore()
        self.journal = journal
        self.name = name
        self.running = False
        self.resyncs = 0
        self.fail: BaseException | None = None
        self._crash = asyncio.Event()

    async def run(self) -> None:
        self.running = True
        try:
            await self._crash.wait()
            assert self.fail is not None
            raise self.fail
        except asyncio.CancelledError:
            self.journal.append(f"{self.name} cancelled")
            raise
        finally:
            self.running = False

    def crash(self, error: BaseException) -> None:
        self.fail = error
        self._crash.set()

    def resync(self) -> None:
        self.resyncs += 1


class FakeLeader:
    def __init__(self, journal: list[str]) -> None:
        self.journal = journal
        self.is_leader = False
        self.grant = asyncio.Event()
        self.lose = asyncio.Event()

    async def acquire(self) -> None:
        await self.grant.wait()
        self.is_leader = True

    async def hold(self) -> None:
        await self.lose.wait()
        self.is_leader = False

    async def release(self) -> None:
        self.journal.append("released")
        self.is_leader = False


class Setup:
    def __init__(self, reconcile: Reconcile, *, watchers: int = 1, leader: bool = False,
                 shutdown_timeout: float = 30.0, resync_period: float | None = None,
                 journal: list[str] | None = None) -> None:
        self.clock = FakeClock()
        self.journal: list[str] = journal if journal is not None else []
        self.watchers = [FakeWatcher(self.journal, f"w{i}") for i in range(watchers)]
        self.leader = FakeLeader(self.journal) if leader else None
        self.manager = Manager(clock=self.clock, leader=self.leader, shutdown_timeout=shutdown_timeout,
                               resync_period=resync_period)
        self.controller = Controller(f"mgr-ctl-{next(_names)}", reconcile, clock=self.clock, workers=2)
        for watcher in self.watchers:
            self.manager.add_watcher(watcher)
        self.manager.add_controller(self.controller)
        self.stop = asyncio.Event()
        self.task: asyncio.Task[int] | None = None

    def start(self) -> asyncio.Task[int]:
        self.task = asyncio.create_task(self.manager.run(self.stop))
        return self.task

    def sync_all(self) -> None:
        for watcher in self.watchers:
            watcher.store.synced.set()


@pytest.fixture
async def setups() -> AsyncIterator[list[Setup]]:
    made: list[Setup] = []
    yield made
    for setup in made:
        if setup.task is not None and not setup.task.done():
            setup.task.cancel()
            await asyncio.wait({setup.task})


def ready(manager: Manager) -> bool:
    """manager.ready, read through a call (the value changes between reads)."""
    return manager.ready


def leading(manager: Manager) -> bool:
    return manager.leading


def recording(calls: list[ObjectRef]) -> Reconcile:
    async def reconcile(ref: ObjectRef) -> None:
        calls.append(ref)

    return reconcile


async def test_no_worker_runs_before_every_store_is_synced(setups: list[Setup]) -> None:
    calls: list[ObjectRef] = []
    s = Setup(recording(calls), watchers=2)
    setups.append(s)
    s.controller.enqueue(A)
    s.start()
    await eventually(lambda: all(w.running for w in s.watchers))
    assert not ready(s.manager)
    s.watchers[0].store.synced.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert calls == [] and not s.controller.running
    metrics.caches_synced_timestamp_seconds.set(0)
    s.watchers[1].store.synced.set()
    await eventually(lambda: calls == [A])
    assert ready(s.manager) and leading(s.manager)
    # the moment of the sync, for sampledb_caches_synced_timestamp_seconds - process_start_time_seconds
    assert metrics.caches_synced_timestamp_seconds._value.get() == s.clock.now().timestamp()


async def test_stop_shuts_controllers_then_releases_lease_then_cancels_watchers(setups: list[Setup]) -> None:
    gate = asyncio.Event()
    started = asyncio.Event()
    journal: list[str] = []

    async def reconcile(ref: ObjectRef) -> None:
        started.set()
        await gate.wait()
        journal.append("reconcile finished")

    s = Setup(reconcile, leader=True, journal=journal)
    setups.append(s)
    assert s.leader is not None
    s.controller.enqueue(A)
    task = s.start()
    s.sync_all()
    assert not leading(s.manager)
    s.leader.grant.set()
    await asyncio.wait_for(started.wait(), 1.0)
    assert leading(s.manager)
    s.stop.set()
    await eventually(lambda: s.controller.queue.shutting_down)
    assert not task.done()  # waits for the in-flight reconcile
    gate.set()
    assert await asyncio.wait_for(task, 1.0) == 0
    assert journal == ["reconcile finished", "released", "w0 cancelled"]
    assert not s.controller.running


async def test_stop_waits_at_most_shutdown_timeout_for_in_flight_reconciles(setups: list[Setup]) -> None:
    cancelled = asyncio.Event()
    started = asyncio.Event()

    async def reconcile(ref: ObjectRef) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    s = Setup(reconcile, shutdown_timeout=5.0)
    setups.append(s)
    s.controller.enqueue(A)
    task = s.start()
    s.sync_all()
    await asyncio.wait_for(started.wait(), 1.0)
    s.stop.set()
    await eventually(lambda: s.clock.pending_sleepers() == 1)
    s.clock.advance(4.0)
    await asyncio.sleep(0)
    assert not cancelled.is_set()
    s.clock.advance(1.0)
    assert await asyncio.wait_for(task, 1.0) == 0
    assert cancelled.is_set()


async def test_lost_leadership_stops_reconciles_at_once_and_returns_1(setups: list[Setup]) -> None:
    cancelled = asyncio.Event()
    calls: list[ObjectRef] = []

    async def reconcile(ref: ObjectRef) -> None:
        calls.append(ref)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    s = Setup(reconcile, leader=True)
    setups.append(s)
    assert s.leader is not None
    s.controller.enqueue(A)
    task = s.start()
    s.sync_all()
    s.leader.grant.set()
    await eventually(lambda: calls == [A])
    s.leader.lose.set()
    assert await asyncio.wait_for(task, 1.0) == 1
    assert cancelled.is_set()
    assert "released" not in s.journal  # the lease is no longer ours to release
    assert not s.controller.running
    s.controller.enqueue(ObjectRef("ns", "b"))
    await asyncio.sleep(0)
    assert calls == [A]
    assert not s.watchers[0].running


async def test_no_controller_starts_before_the_lease_is_held(setups: list[Setup]) -> None:
    calls: list[ObjectRef] = []
    s = Setup(recording(calls), leader=True)
    setups.append(s)
    assert s.leader is not None
    s.controller.enqueue(A)
    s.start()
    s.sync_all()
    await eventually(lambda: s.manager.ready)
    for _ in range(5):
        await asyncio.sleep(0)
    assert calls == []
    s.leader.grant.set()
    await eventually(lambda: calls == [A])


async def test_stop_before_sync_returns_0_and_cleans_up(setups: list[Setup]) -> None:
    calls: list[ObjectRef] = []
    s = Setup(recording(calls))
    setups.append(s)
    s.controller.enqueue(A)
    task = s.start()
    await eventually(lambda: s.watchers[0].running)
    s.stop.set()
    assert await asyncio.wait_for(task, 1.0) == 0
    assert calls == []
    assert not s.watchers[0].running
    assert s.controller.queue.shutting_down


async def test_stop_while_waiting_for_the_lease_returns_0_without_release(setups: list[Setup]) -> None:
    s = Setup(recording([]), leader=True)
    setups.append(s)
    task = s.start()
    s.sync_all()
    await eventually(lambda: s.manager.ready)
    s.stop.set()
    assert await asyncio.wait_for(task, 1.0) == 0
    assert "released" not in s.journal


async def test_a_crashed_watcher_makes_run_return_1(setups: list[Setup]) -> None:
    s = Setup(recording([]), watchers=2)
    setups.append(s)
    task = s.start()
    s.sync_all()
    await eventually(lambda: s.controller.running)
    s.watchers[1].crash(RuntimeError("watch broke"))
    assert await asyncio.wait_for(task, 1.0) == 1
    assert not s.controller.running
    assert not s.watchers[0].running


async def test_resync_period_resyncs_every_watcher_on_the_clock(setups: list[Setup]) -> None:
    s = Setup(recording([]), watchers=2, resync_period=60.0)
    setups.append(s)
    s.start()
    s.sync_all()
    await eventually(lambda: s.clock.next_deadline() == 60.0)
    s.clock.advance(59.0)
    await asyncio.sleep(0)
    assert [w.resyncs for w in s.watchers] == [0, 0]
    s.clock.advance(1.0)
    await eventually(lambda: [w.resyncs for w in s.watchers] == [1, 1])
    await eventually(lambda: s.clock.next_deadline() == 120.0)
    s.clock.advance(60.0)
    await eventually(lambda: [w.resyncs for w in s.watchers] == [2, 2])


async def test_run_leaves_no_task_behind(setups: list[Setup]) -> None:
    s = Setup(recording([]), watchers=2, leader=True, resync_period=10.0)
    setups.append(s)
    assert s.leader is not None
    before = asyncio.all_tasks()
    task = s.start()
    s.sync_all()
    s.leader.grant.set()
    s.controller.enqueue_after(A, 100.0)  # the queue's delay task must go too
    await eventually(lambda: s.controller.running)
    s.stop.set()
    assert await asyncio.wait_for(task, 1.0) == 0
    leftover = {t for t in asyncio.all_tasks() - before if not t.done()}
    assert leftover == set()


def test_resync_period_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Manager(clock=FakeClock(), resync_period=0)
