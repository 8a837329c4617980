"""ShardCaches: the filtered watchers follow the shards held; a shard is ready only once every watcher's
listing covers it; a selector that adds shards waits for a labelling pass that succeeded."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from tests.support.aio import eventually

from sampledb_operator.observability.metrics import REGISTRY
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.shard_caches import ShardCaches


def selector_of(base: str) -> Callable[[frozenset[int]], str]:
    """A watcher's selectors: each watcher has its own (as the Pods' differs from the other children's)."""
    return lambda held: f"{base},b in (" + ",".join(["s", *map(str, sorted(held))]) + ")"


class FakeWatcher:
    """Records select() calls; a test completes its listing with list_done()."""

    def __init__(self, base: str) -> None:
        self.selector_of = selector_of(base)
        self.selected = self.selector_of(frozenset())
        self.listed_selector: str | None = None
        self.selects: list[str | None] = []
        self._listed: list[Callable[[], None]] = []

    def select(self, label_selector: str | None) -> None:
        if label_selector != self.selected:
            self.selects.append(label_selector)
            self.selected = label_selector or ""

    def add_listed_handler(self, handler: Callable[[], None]) -> None:
        self._listed.append(handler)

    def on(self, shards: set[int]) -> bool:
        """The watcher's selector names `shards` (with its own base)."""
        return self.selected == self.selector_of(frozenset(shards))

    def list_done(self) -> None:
        self.listed_selector = self.selected
        for handler in self._listed:
            handler()


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.watchers = [FakeWatcher("managed"), FakeWatcher("managed,component=database")]
        self.ready: list[int] = []
        self.relabels = 0
        self.relabelled: list[frozenset[int]] = []
        self.relabel_error: Exception | None = None
        self.relabel_gate: asyncio.Event | None = None
        self.caches = ShardCaches([(w, w.selector_of) for w in self.watchers], clock=self.clock,
                                  relabel=self.relabel, on_ready=self.ready.append, retry_period=2.0)

    async def relabel(self, shards: frozenset[int]) -> int:
        self.relabels += 1
        self.relabelled.append(shards)
        if self.relabel_gate is not None:
            await self.relabel_gate.wait()
        if self.relabel_error is not None:
            raise self.relabel_error
        return 3

    def all_on(self, shards: set[int]) -> bool:
        return all(w.on(shards) for w in self.watchers)

    def list_all(self) -> None:
        for w in self.watchers:
            w.list_done()


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    task = asyncio.create_task(harness.caches.run())
    yield harness
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_wanted_shard_is_ready_only_once_every_watcher_listed_it(h: Harness) -> None:
    h.list_all()  # the initial listings: no shard
    assert not h.caches.ready(1) and h.ready == []
    h.caches.want({1, 4})
    await eventually(lambda: h.all_on({1, 4}))
    assert h.relabels == 1
    h.watchers[0].list_done()
    assert not h.caches.ready(1) and not h.caches.ready(4)  # the second cache lacks them still
    assert REGISTRY.get_sample_value("sampledb_shards_cached") == 0
    h.watchers[1].list_done()
    assert h.caches.ready(1) and h.caches.ready(4) and h.ready == [1, 4]
    assert REGISTRY.get_sample_value("sampledb_shards_cached") == 2
    h.list_all()  # another listing with the same selector: no new readiness
    assert h.ready == [1, 4]


async def test_dropping_a_shard_selects_at_once_without_labelling_and_it_stops_being_ready(h: Harness) -> None:
    h.caches.want({1, 4})
    await eventually(lambda: h.watchers[1].on({1, 4}))
    h.list_all()
    h.caches.want({4})
    await eventually(lambda: h.all_on({4}))
    assert h.relabels == 1
    assert h.caches.ready(1)  # the stores hold the old listing until the new one is in
    h.list_all()
    assert not h.caches.ready(1) and h.caches.ready(4) and h.ready == [1, 4]


async def test_a_failed_labelling_pass_keeps_the_selector_and_is_retried_after_the_period(h: Harness) -> None:
    h.relabel_error = RuntimeError("apiserver down")
    h.caches.want({2})
    await eventually(lambda: h.relabels == 1 and h.clock.pending_sleepers() == 1)  # the retry's wait
    assert all(w.selects == [] for w in h.watchers)
    h.relabel_error = None
    h.clock.advance(2.0)
    await eventually(lambda: h.all_on({2}))
    assert h.relabels == 2
    h.list_all()
    assert h.ready == [2]


async def test_the_newest_wanted_set_wins_after_a_slow_labelling_pass(h: Harness) -> None:
    h.relabel_gate = asyncio.Event()
    h.caches.want({0})
    await eventually(lambda: h.relabels == 1)
    h.caches.want({0, 3})  # arrives while the first pass runs
    h.relabel_gate.set()
    await eventually(lambda: h.all_on({0, 3}))
    assert h.relabelled == [{0}, {0, 3}]  # shard 3 was wanted after the first pass started: labelled again
    h.list_all()
    assert h.ready == [0, 3]


async def test_the_same_wanted_set_again_changes_nothing(h: Harness) -> None:
    h.caches.want({5})
    await eventually(lambda: h.watchers[1].on({5}))
    h.caches.want({5})
    await asyncio.sleep(0)
    assert h.relabels == 1 and all(len(w.selects) == 1 for w in h.watchers)


async def test_the_labelling_pass_runs_again_every_period_while_shards_are_held(h: Harness) -> None:
    await eventually(lambda: h.clock.pending_sleepers() == 1)
    h.clock.advance(60.0)  # nothing held: no pass
    await eventually(lambda: h.clock.pending_sleepers() == 1)
    assert h.relabels == 0
    h.caches.want({1})
    await eventually(lambda: h.watchers[1].on({1}))
    await eventually(lambda: h.clock.pending_sleepers() == 1)
    h.clock.advance(60.0)
    await eventually(lambda: h.relabels == 2)
    assert h.relabelled == [{1}, {1}]
    assert all(len(w.selects) == 1 for w in h.watchers)  # the selector stays
