"""Watcher.select: a new label selector drops the running stream, relists with it, and listed_selector
names the selector of the listing the store holds (the shard-filtered caches' readiness rests on it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from tests.support.aio import eventually
from tests.unit.runtime.test_watcher import Harness, event, listing, sts

from sampledb_operator.kube.errors import ServerError


@pytest.fixture
async def w() -> AsyncIterator[Harness]:
    harness = Harness()
    task = asyncio.create_task(harness.watcher.run())
    yield harness
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_select_drops_the_stream_and_relists_with_the_new_selector(w: Harness) -> None:
    listed: list[str | None] = []
    w.watcher.add_listed_handler(lambda: listed.append(w.watcher.listed_selector))
    await w.api.lists.put(listing("10", sts("a", "1"), sts("b", "2")))
    await w.watching(1)
    assert w.watcher.listed_selector == "app=db" and listed == ["app=db"]
    w.watcher.select("app=db,bucket in (1)")
    await eventually(lambda: len(w.api.list_calls) == 2)
    assert w.api.list_calls[1]["label_selector"] == "app=db,bucket in (1)"
    assert w.watcher.listed_selector == "app=db"  # the store still holds the old listing
    await w.api.lists.put(listing("20", sts("b", "2"), sts("c", "3")))
    await w.watching(2)
    assert w.api.watch_calls[1]["label_selector"] == "app=db,bucket in (1)"
    assert w.api.watch_calls[1]["resource_version"] == "20"
    assert w.watcher.listed_selector == "app=db,bucket in (1)" and listed[-1] == "app=db,bucket in (1)"
    assert sorted(ref.name for ref in w.store.refs()) == ["b", "c"]
    assert ("DELETED", "a", "1") in w.seen and ("ADDED", "c", "3") in w.seen  # the difference delivered


async def test_the_same_selector_again_changes_nothing(w: Harness) -> None:
    await w.api.lists.put(listing("10", sts("a", "1")))
    await w.watching(1)
    w.watcher.select("app=db")
    await w.api.watches.put([event("MODIFIED", "a", "11")])
    await w.watching(2)
    assert len(w.api.list_calls) == 1 and w.api.watch_calls[1]["resource_version"] == "11"


async def test_a_select_during_a_list_lists_again_with_the_newest_selector(w: Harness) -> None:
    await eventually(lambda: len(w.api.list_calls) == 1)  # the first list is parked
    w.watcher.select("app=db,bucket in (2)")
    await eventually(lambda: len(w.api.list_calls) == 2)
    assert w.api.list_calls[1]["label_selector"] == "app=db,bucket in (2)"
    assert w.watcher.listed_selector is None and not w.store.synced.is_set()
    await w.api.lists.put(listing("10", sts("x", "1")))
    await w.watching(1)
    assert w.watcher.listed_selector == "app=db,bucket in (2)"


async def test_a_select_during_the_backoff_wait_lists_at_once(w: Harness) -> None:
    await w.api.lists.put(listing("10", sts("a", "1")))
    await w.api.watches.put([ServerError(500, "InternalError", "boom")])
    await w.next_delay()  # waiting to retry
    w.watcher.select("app=db,bucket in (3)")
    await eventually(lambda: len(w.api.list_calls) == 2)
    assert w.api.list_calls[1]["label_selector"] == "app=db,bucket in (3)"
