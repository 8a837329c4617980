"""The pieces sharding adds to the controller and the manager: intake(ref), admit(ref), in_flight, runnables."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest
from tests.support.aio import eventually

from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability.metrics import REGISTRY
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.controller import Admit, Controller, Reconcile
from sampledb_operator.runtime.manager import Manager
from sampledb_operator.runtime.ratelimit import ItemExponentialFailureRateLimiter

_names = itertools.count()
A = ObjectRef("ns", "a")
B = ObjectRef("ns", "b")


def total(controller: Controller) -> float:
    return sum(REGISTRY.get_sample_value("controller_runtime_reconcile_total",
                                         {"controller": controller.name, "result": r}) or 0.0
               for r in ("success", "error", "requeue", "requeue_after"))


@pytest.fixture
async def tasks() -> AsyncIterator[list[asyncio.Task[object]]]:
    made: list[asyncio.Task[object]] = []
    yield made
    for task in made:
        task.cancel()
    if made:
        await asyncio.wait(made)


def controller(reconcile: Reconcile, admit: Admit | None, clock: FakeClock | None = None) -> Controller:
    return Controller(f"shard-ctl-{next(_names)}", reconcile, clock=clock or FakeClock(), workers=2, admit=admit,
                      rate_limiter=ItemExponentialFailureRateLimiter[ObjectRef](1.0, 100.0))


# -- Controller.intake ----------------------------------------------------------------------------


async def test_a_key_the_intake_refuses_is_queued_by_no_enqueue() -> None:
    async def reconcile(ref: ObjectRef) -> None:
        return None

    ctl = Controller(f"shard-ctl-{next(_names)}", reconcile, clock=FakeClock(), intake=lambda ref: ref == A)
    ctl.enqueue(B)
    ctl.enqueue_after(B, 1.0)
    ctl.enqueue_soon(B, 0.25, urgent=True)
    assert (len(ctl.queue), ctl.queue.delayed) == (0, 0)
    ctl.enqueue(A)
    ctl.enqueue_after(A, 1.0)
    assert (len(ctl.queue), ctl.queue.delayed) == (1, 1)
    ctl.queue.add(B)  # the queue itself (a controller's own requeues) is not asked
    assert len(ctl.queue) == 2


async def test_an_intake_that_fails_takes_the_key() -> None:
    async def reconcile(ref: ObjectRef) -> None:
        return None

    def intake(ref: ObjectRef) -> bool:
        raise RuntimeError("a bug")

    ctl = Controller(f"shard-ctl-{next(_names)}", reconcile, clock=FakeClock(), intake=intake)
    ctl.enqueue(A)
    assert len(ctl.queue) == 1


# -- Controller.admit -----------------------------------------------------------------------------


async def test_a_key_not_admitted_is_forgotten_not_reconciled(tasks: list[asyncio.Task[object]]) -> None:
    calls: list[ObjectRef] = []
    asked: list[ObjectRef] = []

    async def reconcile(ref: ObjectRef) -> None:
        calls.append(ref)

    def admit(ref: ObjectRef) -> bool:
        asked.append(ref)
        return ref == A

    ctl = controller(reconcile, admit)
    ctl.queue.add_rate_limited(B)          # B has a failure count: forgetting it resets that
    ctl.queue.add_rate_limited(B)
    assert ctl.queue.num_requeues(B) == 2
    ctl.enqueue(A)
    ctl.enqueue(B)
    tasks.append(asyncio.create_task(ctl.run()))
    await eventually(lambda: calls == [A] and len(asked) >= 2 and ctl.queue.processing == 0)
    assert calls == [A]
    assert ctl.queue.num_requeues(B) == 0
    assert total(ctl) == 1                   # only A's reconcile is counted
    ctl.enqueue(B)                           # done() was called for B: it can be handed out again
    await eventually(lambda: asked.count(B) == 2)


async def test_in_flight_holds_the_keys_being_reconciled(tasks: list[asyncio.Task[object]]) -> None:
    gate = asyncio.Event()

    async def reconcile(ref: ObjectRef) -> None:
        await gate.wait()

    ctl = controller(reconcile, lambda ref: True)
    ctl.enqueue(A)
    tasks.append(asyncio.create_task(ctl.run()))
    await eventually(lambda: ctl.in_flight == {A})
    gate.set()
    await eventually(lambda: ctl.in_flight == frozenset())


async def test_an_admit_that_raises_retries_the_key_later(tasks: list[asyncio.Task[object]]) -> None:
    calls: list[ObjectRef] = []
    clock = FakeClock()
    broken = [True]

    async def reconcile(ref: ObjectRef) -> None:
        calls.append(ref)

    def admit(ref: ObjectRef) -> bool:
        if broken[0]:
            raise RuntimeError("boom")
        return True

    ctl = controller(reconcile, admit, clock)
    ctl.enqueue(A)
    tasks.append(asyncio.create_task(ctl.run()))
    await eventually(lambda: ctl.queue.num_requeues(A) == 1)
    assert calls == [] and ctl.running
    broken[0] = False
    clock.advance(1.0)
    await eventually(lambda: calls == [A])


async def test_without_admit_every_key_is_reconciled(tasks: list[asyncio.Task[object]]) -> None:
    calls: list[ObjectRef] = []

    async def reconcile(ref: ObjectRef) -> None:
        calls.append(ref)

    ctl = controller(reconcile, None)
    ctl.enqueue(A)
    ctl.enqueue(B)
    tasks.append(asyncio.create_task(ctl.run()))
    await eventually(lambda: sorted(calls) == [A, B])


# -- Manager.add_runnable -----------------------------------------------------------------------


class FakeStore:
    def __init__(self) -> None:
        self.synced = asyncio.Event()


class FakeWatcher:
    def __init__(self, journal: list[str]) -> None:
        self.store = FakeStore()
        self.journal = journal

    async def run(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.journal.append("watcher cancelled")
            raise

    def resync(self) -> None:
        pass


class FakeRunnable:
    def __init__(self, journal: list[str]) -> None:
        self.journal = journal
        self.started = asyncio.Event()
        self.crash = asyncio.Event()

    async def run(self) -> None:
        self.journal.append("runnable started")
        self.started.set()
        try:
            await self.crash.wait()
        except asyncio.CancelledError:
            self.journal.append("runnable cancelled")
            raise
        raise RuntimeError("runnable died")

    async def stop(self) -> None:
        self.journal.append("runnable stopped")


class Setup:
    def __init__(self, journal: list[str], reconcile: Reconcile) -> None:
        self.clock = FakeClock()
        self.watcher = FakeWatcher(journal)
        self.runnable = FakeRunnable(journal)
        self.manager = Manager(clock=self.clock, shutdown_timeout=5.0)
        self.controller = Controller(f"shard-mgr-{next(_names)}", reconcile, clock=self.clock)
        self.manager.add_watcher(self.watcher)
        self.manager.add_controller(self.controller)
        self.manager.add_runnable("shards", self.runnable)
        self.stop = asyncio.Event()


async def test_a_runnable_starts_after_sync_and_stops_after_the_controllers(
        tasks: list[asyncio.Task[object]]) -> None:
    journal: list[str] = []
    gate = asyncio.Event()
    started = asyncio.Event()

    async def reconcile(ref: ObjectRef) -> None:
        started.set()
        await gate.wait()
        journal.append("reconcile finished")

    s = Setup(journal, reconcile)
    s.controller.enqueue(A)
    task = asyncio.create_task(s.manager.run(s.stop))
    tasks.append(task)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not s.runnable.started.is_set()           # not before the caches are synced
    s.watcher.store.synced.set()
    await asyncio.wait_for(s.runnable.started.wait(), 1.0)
    await asyncio.wait_for(started.wait(), 1.0)
    s.stop.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert "runnable cancelled" not in journal       # keeps running while the reconcile finishes
    gate.set()
    assert await asyncio.wait_for(task, 1.0) == 0
    assert journal == ["runnable started", "reconcile finished", "runnable cancelled", "runnable stopped",
                       "watcher cancelled"]


async def test_a_runnable_that_dies_is_a_fault(tasks: list[asyncio.Task[object]]) -> None:
    journal: list[str] = []

    async def reconcile(ref: ObjectRef) -> None:
        pass

    s = Setup(journal, reconcile)
    task = asyncio.create_task(s.manager.run(s.stop))
    tasks.append(task)
    s.watcher.store.synced.set()
    await asyncio.wait_for(s.runnable.started.wait(), 1.0)
    s.runnable.crash.set()
    assert await asyncio.wait_for(task, 1.0) == 1
    assert journal[-2:] == ["runnable stopped", "watcher cancelled"]
    assert not s.controller.running


async def _with_early(tasks: list[asyncio.Task[object]]) -> tuple[Setup, FakeRunnable, list[str],
                                                                   asyncio.Task[int]]:
    """A manager with a late runnable ("shards") and an early one ("caches"), run until the early one started;
    the setup, the early runnable, the journal both write to, the manager's task."""
    journal: list[str] = []

    async def reconcile(ref: ObjectRef) -> None:
        pass

    s = Setup(journal, reconcile)
    early = FakeRunnable(journal)
    s.manager.add_runnable("caches", early, early=True)
    task = asyncio.create_task(s.manager.run(s.stop))
    tasks.append(task)
    await asyncio.wait_for(early.started.wait(), 1.0)  # before the caches are synced
    return s, early, journal, task


async def test_an_early_runnable_starts_with_the_watchers_and_a_late_one_after_sync(
        tasks: list[asyncio.Task[object]]) -> None:
    s, _, journal, task = await _with_early(tasks)
    assert not s.runnable.started.is_set()
    s.watcher.store.synced.set()
    await asyncio.wait_for(s.runnable.started.wait(), 1.0)
    s.stop.set()
    assert await asyncio.wait_for(task, 1.0) == 0
    assert journal.count("runnable stopped") == 2  # both stopped, before the watchers are cancelled
    assert journal[-1] == "watcher cancelled"


async def test_a_stop_before_sync_stops_only_the_early_runnables(tasks: list[asyncio.Task[object]]) -> None:
    s, _, journal, task = await _with_early(tasks)
    s.stop.set()
    assert await asyncio.wait_for(task, 1.0) == 0
    assert not s.runnable.started.is_set()
    assert journal == ["runnable started", "runnable cancelled", "runnable stopped", "watcher cancelled"]


async def test_an_early_runnable_that_dies_before_sync_is_a_fault(tasks: list[asyncio.Task[object]]) -> None:
    s, early, journal, task = await _with_early(tasks)
    early.crash.set()
    assert await asyncio.wait_for(task, 1.0) == 1
    assert not s.runnable.started.is_set() and not s.controller.running
    assert journal[-2:] == ["runnable stopped", "watcher cancelled"]
