"""WorkQueue's two priorities: urgent items go first, a plain waiting item is moved up by an urgent add, an
item in progress comes back urgent, and plain items are never starved (URGENT_STREAK). The SampleDB
controller marks a database urgent when a child's event shows a state a step acts on (app._handlers_for,
decide/urgency.py)."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from tests.support.aio import eventually
from tests.support.fake_cluster import NS, FakeCluster, sampledb

from sampledb_operator.app import _handlers_for
from sampledb_operator.decide.labels import DATABASE_LABEL
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability.metrics import REGISTRY
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.controller import Controller
from sampledb_operator.runtime.workqueue import URGENT_STREAK, WorkQueue

_names = itertools.count()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_queue(clock: FakeClock) -> WorkQueue[str]:
    return WorkQueue[str](f"prio-q-{next(_names)}", clock=clock, controller="test")


async def drain(queue: WorkQueue[str]) -> list[str]:
    out = []
    while len(queue):
        item = await asyncio.wait_for(queue.get(), 1.0)
        queue.done(item)
        out.append(item)
    return out


async def test_urgent_items_go_before_plain_ones_fifo_within_each(clock: FakeClock) -> None:
    queue = make_queue(clock)
    for item in ("new-1", "new-2"):
        queue.add(item)
    for item in ("moving-1", "moving-2"):
        queue.add(item, urgent=True)
    assert await drain(queue) == ["moving-1", "moving-2", "new-1", "new-2"]


async def test_an_urgent_add_moves_a_waiting_item_up_once(clock: FakeClock) -> None:
    queue = make_queue(clock)
    for item in ("a", "b", "c"):
        queue.add(item)
    adds = REGISTRY.get_sample_value("workqueue_adds_total", {"name": queue.name, "controller": "test"})
    queue.add("c", urgent=True)
    queue.add_soon("b", 1.0, urgent=True)  # already waiting: its coming pass becomes urgent, nothing delayed
    assert len(queue) == 3 and queue.delayed == 0
    assert REGISTRY.get_sample_value("workqueue_adds_total", {"name": queue.name, "controller": "test"}) == adds
    queue.add("c")  # a plain add does not move it back
    assert await drain(queue) == ["c", "b", "a"]


async def test_an_item_made_urgent_while_in_progress_comes_back_urgent(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("b")
    queue.add_soon("a", 1.0, urgent=False)  # a plain re-add of the item in progress ...
    queue.add("a", urgent=True)  # ... then an urgent one
    queue.done("a")
    assert await drain(queue) == ["a", "b"]


async def test_plain_items_are_not_starved(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("plain-1")
    queue.add("plain-2")
    for i in range(2 * URGENT_STREAK + 1):
        queue.add(f"u{i}", urgent=True)
    got = await drain(queue)
    assert got[URGENT_STREAK] == "plain-1" and got[2 * URGENT_STREAK + 1] == "plain-2"
    assert [g for g in got if g.startswith("u")] == [f"u{i}" for i in range(2 * URGENT_STREAK + 1)]


async def test_a_delayed_add_fires_urgent_when_any_pending_add_was(clock: FakeClock) -> None:
    queue = make_queue(clock)
    queue.add("plain")
    queue.add_after("late", 1.0)
    queue.add_after("late", 5.0, urgent=True)  # a later deadline does not win, but its urgency does
    assert queue.delayed == 1
    await eventually(lambda: clock.pending_sleepers() == 1)
    clock.advance(1.0)
    await eventually(lambda: len(queue) == 2)
    assert await drain(queue) == ["late", "plain"]


def test_a_childs_event_wakes_its_database_urgent_only_when_a_step_acts_on_it() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb("orders"))
    calls: list[tuple[str, bool]] = []

    class Recording(Controller):
        def enqueue(self, ref: ObjectRef) -> None:
            calls.append((f"now {ref.name}", False))

        def enqueue_soon(self, ref: ObjectRef, delay: float, *, urgent: bool = False) -> None:
            calls.append((f"soon {ref.name}", urgent))

    async def noop(_ref: ObjectRef) -> None:
        return None

    dbs = Recording("prio-dbs", noop, clock=cluster.clock)
    backups = Recording("prio-backups", noop, clock=cluster.clock)
    meta = {"name": "orders-0", "namespace": NS, "labels": {DATABASE_LABEL: "orders"}}
    handlers = _handlers_for("Pod", dbs, backups, cluster.ctx)
    for phase in ("Pending", "Running"):
        for handler in handlers:
            handler("MODIFIED", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": {"phase": phase}})
    assert calls == [("soon orders", False), ("soon orders", True)]
    calls.clear()
    db = cluster.get("SampleDB", "orders")
    assert db is not None
    for handler in _handlers_for("SampleDB", dbs, backups, cluster.ctx):
        handler("MODIFIED", {**db, "metadata": {**db["metadata"], "resourceVersion": "999"}})
    assert ("now orders", False) in calls
