"""ShardCaches: the filtered watchers follow the shards held at once; a shard is ready only once every
watcher's listing covers it and a labelling pass begun after it was selected succeeded (with listings begun
after that pass when it labelled something); a restart starts from the shards its Leases name (the hint)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from tests.support.aio import eventually

from sampledb_operator.observability.metrics import REGISTRY
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.shard_caches import HINT_WAIT, ShardCaches


def selector_of(base: str) -> Callable[[frozenset[int]], str]:
    """A watcher's selectors: each watcher has its own (as the Pods' differs from the other children's)."""
    return lambda held: f"{base},b in (" + ",".join(["s", *map(str, sorted(held))]) + ")"


class FakeWatcher:
    """Records select() and relist() calls; a test completes its listing with list_done()."""

    def __init__(self, base: str) -> None:
        self.selector_of = selector_of(base)
        self.selected = self.selector_of(frozenset())
        self.listed_selector: str | None = None
        self.listed_generation = 0
        self.requested = 0  # relist() calls
        self.selects: list[str | None] = []
        self._listed: list[Callable[[], None]] = []

    def relist(self) -> int:
        self.requested += 1
        return self.requested

    def select(self, label_selector: str | None) -> None:
        if label_selector != self.selected:
            self.selects.append(label_selector)
            self.selected = label_selector or ""

    def add_listed_handler(self, handler: Callable[[], None]) -> None:
        self._listed.append(handler)

    def on(self, shards: set[int]) -> bool:
        """The watcher's selector names `shards` (with its own base)."""
        return self.selected == self.selector_of(frozenset(shards))

    def list_done(self, *, begun_before_relist: bool = False) -> None:
        """A listing with the current selector replaced the store; `begun_before_relist`: one that was under
        way when the last relist() came (its generation is the one before)."""
        self.listed_selector = self.selected
        self.listed_generation = self.requested - 1 if begun_before_relist else self.requested
        for handler in self._listed:
            handler()


class Harness:
    def __init__(self, hint: Callable[[], Awaitable[frozenset[int]]] | None = None) -> None:
        self.clock = FakeClock()
        self.watchers = [FakeWatcher("managed"), FakeWatcher("managed,component=database")]
        self.ready: list[int] = []
        self.relabels = 0
        self.relabelled: list[frozenset[int]] = []
        self.relabel_error: Exception | None = None
        self.relabel_gate: asyncio.Event | None = None
        self.labelled = 0  # what each pass reports it labelled
        self.caches = ShardCaches([(w, w.selector_of) for w in self.watchers], clock=self.clock,
                                  relabel=self.relabel, on_ready=self.ready.append, hint=hint, retry_period=2.0)

    async def relabel(self, shards: frozenset[int]) -> int:
        self.relabels += 1
        self.relabelled.append(shards)
        if self.relabel_gate is not None:
            await self.relabel_gate.wait()
        if self.relabel_error is not None:
            raise self.relabel_error
        return self.labelled

    def all_on(self, shards: set[int]) -> bool:
        return all(w.on(shards) for w in self.watchers)

    def list_all(self) -> None:
        for w in self.watchers:
            w.list_done()


@contextlib.asynccontextmanager
async def running(harness: Harness) -> AsyncIterator[Harness]:
    task = asyncio.create_task(harness.caches.run())
    try:
        yield harness
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    async with running(Harness()) as harness:
        yield harness


async def test_a_wanted_shard_is_selected_at_once_and_ready_once_labelled_and_listed_by_every_watcher(
        h: Harness) -> None:
    h.list_all()  # the initial listings: no shard
    assert not h.caches.ready(1) and h.ready == []
    h.relabel_gate = asyncio.Event()
    h.caches.want({1, 4})
    await eventually(lambda: h.all_on({1, 4}) and h.relabels == 1)  # listing while the labels are checked
    h.list_all()
    assert not h.caches.ready(1) and h.ready == []  # the pass has not ended
    h.relabel_gate.set()
    await eventually(lambda: h.ready == [1, 4])
    assert REGISTRY.get_sample_value("sampledb_shards_cached") == 2
    assert all(w.requested == 0 for w in h.watchers)  # nothing labelled: the listings stand
    h.list_all()  # another listing with the same selector: no new readiness
    assert h.ready == [1, 4]


async def test_every_watcher_must_have_listed_a_labelled_shard(h: Harness) -> None:
    h.caches.want({1, 4})
    await eventually(lambda: h.relabels == 1 and h.clock.pending_sleepers() == 1)  # pass done, idle
    h.watchers[0].list_done()
    assert not h.caches.ready(1) and not h.caches.ready(4)  # the second cache lacks them still
    assert REGISTRY.get_sample_value("sampledb_shards_cached") == 0
    h.watchers[1].list_done()
    assert h.caches.ready(1) and h.caches.ready(4) and h.ready == [1, 4]


async def test_after_a_pass_that_labelled_only_listings_begun_after_it_count(h: Harness) -> None:
    h.caches.want({1})
    await eventually(lambda: h.relabels == 1 and h.clock.pending_sleepers() == 1)
    h.list_all()
    assert h.ready == [1]
    h.labelled = 2  # the next shard's children include some made before the label
    h.relabel_gate = asyncio.Event()
    h.caches.want({1, 3})
    await eventually(lambda: h.all_on({1, 3}) and h.relabels == 2)
    h.list_all()  # a listing done before the pass labelled them: it may lack them
    h.relabel_gate.set()
    await eventually(lambda: all(w.requested == 1 for w in h.watchers))  # each asked to list again
    assert h.ready == [1] and h.caches.ready(1)  # the shard held before stays ready meanwhile
    for w in h.watchers:
        w.list_done(begun_before_relist=True)  # one already under way when relist() came
    assert not h.caches.ready(3)
    h.watchers[0].list_done()
    assert not h.caches.ready(3)
    h.watchers[1].list_done()
    assert h.ready == [1, 3]


async def test_dropping_a_shard_selects_at_once_without_labelling_and_it_stops_being_ready(h: Harness) -> None:
    h.caches.want({1, 4})
    await eventually(lambda: h.watchers[1].on({1, 4}))
    h.list_all()
    await eventually(lambda: h.ready == [1, 4])
    h.caches.want({4})
    await eventually(lambda: h.all_on({4}))
    assert h.relabels == 1
    assert h.caches.ready(1)  # the stores hold the old listing until the new one is in
    h.list_all()
    assert not h.caches.ready(1) and h.caches.ready(4) and h.ready == [1, 4]


async def test_a_failed_labelling_pass_keeps_the_shard_not_ready_and_is_retried_after_the_period(h: Harness) -> None:
    h.relabel_error = RuntimeError("apiserver down")
    h.caches.want({2})
    await eventually(lambda: h.relabels == 1 and h.clock.pending_sleepers() == 1)  # the retry's wait
    assert h.all_on({2})  # listed meanwhile
    h.list_all()
    assert not h.caches.ready(2)
    h.relabel_error = None
    h.clock.advance(2.0)
    await eventually(lambda: h.ready == [2])
    assert h.relabels == 2


async def test_the_newest_wanted_set_wins_after_a_slow_labelling_pass(h: Harness) -> None:
    h.relabel_gate = asyncio.Event()
    h.caches.want({0})
    await eventually(lambda: h.relabels == 1)
    h.caches.want({0, 3})  # arrives while the first pass runs
    h.relabel_gate.set()
    await eventually(lambda: h.all_on({0, 3}) and h.relabels == 2)
    assert h.relabelled == [{0}, {0, 3}]  # shard 3 was selected after the first pass started: labelled again
    h.list_all()
    await eventually(lambda: h.ready == [0, 3])


async def test_the_same_wanted_set_again_changes_nothing(h: Harness) -> None:
    h.caches.want({5})
    await eventually(lambda: h.watchers[1].on({5}) and h.relabels == 1)
    h.caches.want({5})
    await eventually(lambda: h.clock.pending_sleepers() == 1)
    assert h.relabels == 1 and all(len(w.selects) == 1 for w in h.watchers)


async def test_the_labelling_pass_runs_again_every_period_while_shards_are_held(h: Harness) -> None:
    await eventually(lambda: h.clock.pending_sleepers() == 1)
    h.clock.advance(60.0)  # nothing held: no pass
    await eventually(lambda: h.clock.pending_sleepers() == 1)
    assert h.relabels == 0
    h.caches.want({1})
    await eventually(lambda: h.watchers[1].on({1}) and h.relabels == 1)
    await eventually(lambda: h.clock.pending_sleepers() == 1)
    h.labelled = 1  # a periodic pass that labels a child (its label removed by a user) relists nothing
    h.clock.advance(60.0)
    await eventually(lambda: h.relabels == 2)
    assert h.relabelled == [{1}, {1}]
    assert all(len(w.selects) == 1 and w.requested == 0 for w in h.watchers)  # the selector stays


async def test_a_restart_starts_from_the_shards_its_leases_name() -> None:
    async def hint() -> frozenset[int]:
        return frozenset({2, 5})

    async with running(Harness(hint)) as h:
        await eventually(lambda: h.all_on({2, 5}) and h.relabels == 1)  # before any want()
        h.list_all()
        await eventually(lambda: h.ready == [2, 5])
        h.caches.want({2})  # the ShardOwner's first period took back only shard 2
        await eventually(lambda: h.all_on({2}))
        h.list_all()
        assert h.caches.ready(2) and not h.caches.ready(5)


async def test_the_watchers_first_listing_waits_for_the_hint_and_its_shards_selected() -> None:
    answer = asyncio.Event()

    async def hint() -> frozenset[int]:
        await answer.wait()
        return frozenset({2, 5})

    async with running(Harness(hint)) as h:
        await eventually(lambda: h.clock.pending_sleepers() == 1)  # the hint's HINT_WAIT timer
        assert not h.caches.hinted.is_set()
        answer.set()
        await eventually(h.caches.hinted.is_set)
        assert h.all_on({2, 5})  # selected before the gate opened: the first listing is of those shards


@pytest.mark.parametrize("hint_kind", ["none", "failing", "slow"])
async def test_the_watchers_first_listing_never_waits_for_a_missing_failing_or_slow_hint(hint_kind: str) -> None:
    async def failing() -> frozenset[int]:
        raise RuntimeError("leases unreadable")

    async def slow() -> frozenset[int]:
        await asyncio.Event().wait()
        return frozenset({1})

    hint = {"none": None, "failing": failing, "slow": slow}[hint_kind]
    async with running(Harness(hint)) as h:
        if hint_kind == "slow":
            await eventually(lambda: h.clock.pending_sleepers() == 1)
            assert not h.caches.hinted.is_set()
            h.clock.advance(HINT_WAIT)
        await eventually(h.caches.hinted.is_set)
        assert all(w.selects == [] for w in h.watchers)  # no shard: the watchers list as they were made


async def test_a_want_before_the_hint_answers_wins_and_a_failing_hint_is_ignored() -> None:
    answer = asyncio.Event()

    async def late_hint() -> frozenset[int]:
        await answer.wait()
        return frozenset({2, 5})

    async with running(Harness(late_hint)) as h:
        h.caches.want({1})
        answer.set()
        await eventually(lambda: h.all_on({1}) and h.relabels == 1)
        assert all(len(w.selects) == 1 for w in h.watchers)

    async def failing_hint() -> frozenset[int]:
        raise RuntimeError("leases unreadable")

    async with running(Harness(failing_hint)) as h:
        await eventually(lambda: h.clock.pending_sleepers() == 1)  # running, waiting for want()
        assert all(w.selects == [] for w in h.watchers) and h.relabels == 0
