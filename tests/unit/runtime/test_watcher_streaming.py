"""Watcher with streaming lists (sendInitialEvents): all or nothing, the same stream goes on as the watch,
and a server that refuses them makes the watcher list page by page from then on.

Uses test_watcher.py's scripted FakeApi: its watch scripts are the streams' events in order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from structlog.testing import capture_logs
from tests.unit.runtime.test_watcher import Harness, bookmark, event, listing, metric, sts

from sampledb_operator.kube.api import WatchEvent, initial_events_end
from sampledb_operator.kube.errors import BadRequest, Gone, Invalid, KubeTransportError, StreamInterrupted
from sampledb_operator.model.refs import ObjectRef


def end_of_initial_events(rv: str) -> WatchEvent:
    return WatchEvent("BOOKMARK", {"kind": "StatefulSet", "apiVersion": "apps/v1", "metadata": {
        "resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}})


@pytest.fixture
async def s() -> AsyncIterator[Harness]:
    harness = Harness()
    harness.watcher.streaming = True
    task = asyncio.create_task(harness.watcher.run())
    yield harness
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def test_only_the_annotated_bookmark_ends_the_initial_events() -> None:
    assert initial_events_end(end_of_initial_events("5"))
    assert not initial_events_end(bookmark("5"))
    assert not initial_events_end(WatchEvent("ADDED", {"metadata": {"annotations": {
        "k8s.io/initial-events-end": "true"}}}))


async def test_a_streaming_list_fills_the_store_at_its_end_bookmark_and_its_stream_goes_on_as_the_watch(
        s: Harness) -> None:
    relists = metric("sampledb_watch_relists_total", resource="statefulsets")
    checked: list[bool] = []
    await s.api.watches.put([
        event("ADDED", "b", "7"), event("ADDED", "a", "3"), bookmark("8"),
        # the store's first listing: its objects reach the handlers as they come, the store holds none yet
        lambda: checked.append(not s.store.synced.is_set() and s.store.refs() == []
                               and s.seen == [("ADDED", "b", "7"), ("ADDED", "a", "3")]
                               and s.watcher.resource_version == ""),
        end_of_initial_events("9"),
        lambda: checked.append(s.store.synced.is_set() and s.watcher.resource_version == "9"
                               and s.store.resource_version == "9"),
        event("MODIFIED", "a", "10"),
    ])
    await s.watching(2)
    assert checked == [True, True]
    assert s.api.list_calls == []  # no paged list at all
    first = s.api.watch_calls[0]
    assert (first["send_initial_events"], first["resource_version"], first["label_selector"]) == (True, "", "app=db")
    assert s.seen[2:] == [("MODIFIED", "a", "10")]  # nothing more at the end bookmark
    second = s.api.watch_calls[1]
    assert (second["send_initial_events"], second["resource_version"]) == (False, "10")  # a plain watch
    assert metric("sampledb_watch_relists_total", resource="statefulsets") == relists + 1


@pytest.mark.parametrize("ending", [
    pytest.param([], id="closed"),
    pytest.param([StreamInterrupted("GET: connection reset")], id="dropped"),
    pytest.param([event("MODIFIED", "a", "4")], id="a-change-before-the-end"),
])
async def test_a_streaming_list_cut_short_changes_nothing_and_is_retried_as_a_whole(
        s: Harness, ending: list[Any]) -> None:
    await s.api.watches.put([event("ADDED", "a", "3"), event("ADDED", "b", "5"), *ending])
    assert await s.next_delay() == 0.8  # a failure: backs off
    assert not s.store.synced.is_set() and s.store.refs() == []
    assert s.seen == [("ADDED", "a", "3"), ("ADDED", "b", "5")]  # a first listing is delivered as it comes
    assert s.watcher.resource_version == ""
    await s.api.watches.put([event("ADDED", "a", "3"), end_of_initial_events("6")])
    s.clock.advance(0.8)
    await s.watching(3)
    assert s.api.watch_calls[1]["send_initial_events"] is True
    # streamed again as a whole: "a" delivered again; "b" (deleted meanwhile) was delivered but is never cached
    assert s.seen == [("ADDED", "a", "3"), ("ADDED", "b", "5"), ("ADDED", "a", "3")]
    assert [ref.name for ref in s.store.refs()] == ["a"]


async def test_only_a_stores_first_listing_reaches_the_handlers_as_it_comes(s: Harness) -> None:
    """A later streaming list (after 410 Gone, or a new selector) delivers its difference only at its end, once
    the store holds it: workers may be reading the cache by then."""
    await s.api.watches.put([event("ADDED", "a", "1"), end_of_initial_events("10"),
                             Gone(410, "Expired", "too old resource version")])
    checked: list[bool] = []
    await s.api.watches.put([event("ADDED", "a", "1"), event("ADDED", "b", "12"),
                             lambda: checked.append(s.seen == [("ADDED", "a", "1")]),
                             end_of_initial_events("20")])
    await s.watching(3)
    assert checked == [True]
    assert s.seen == [("ADDED", "a", "1"), ("ADDED", "b", "12")]


async def test_a_first_listing_delivers_each_object_as_the_cache_will_hold_it(s: Harness) -> None:
    s.store.transform = lambda obj: {**obj, "spec": {}}  # e.g. cache.compact dropping what nobody reads
    got: list[dict[str, Any]] = []
    s.watcher.add_handler(lambda _type, obj: got.append(obj))
    await s.api.watches.put([event("ADDED", "a", "1"), end_of_initial_events("10")])
    await s.watching(1)
    cached = s.store.get(ObjectRef("ns", "a"))
    assert cached is not None and cached["spec"] == {}
    assert got == [cached]


@pytest.mark.parametrize("refusal", [
    Invalid(422, "Invalid", "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"),
    BadRequest(400, "BadRequest", "resourceVersionMatch is forbidden for watch"),
], ids=["invalid", "bad-request"])
async def test_a_server_that_refuses_streaming_lists_is_listed_page_by_page_from_then_on(
        s: Harness, refusal: Exception) -> None:
    with capture_logs() as logs:
        await s.api.watches.put([refusal])
        await s.api.lists.put(listing("10", sts("a", "1")))
        await s.watching(2)
    assert s.clock.pending_sleepers() == 0  # no backoff: listed at once
    assert s.watcher.streaming is False
    assert [c["send_initial_events"] for c in s.api.watch_calls] == [True, False]
    assert s.api.watch_calls[1]["resource_version"] == "10"
    assert s.seen == [("ADDED", "a", "1")]
    assert any(e["event"].startswith("the API server refused a streaming list") for e in logs)
    await s.api.watches.put([Gone(410, "Expired", "")])  # a later relist is a paged one too
    await s.api.lists.put(listing("20", sts("a", "1"), sts("b", "2")))
    await s.watching(3)
    assert len(s.api.list_calls) == 2 and s.api.watch_calls[2]["send_initial_events"] is False


async def test_a_refusal_of_a_plain_watch_keeps_streaming_lists(s: Harness) -> None:
    await s.api.watches.put([end_of_initial_events("5")])
    await s.api.watches.put([BadRequest(400, "BadRequest", "bad selector")])
    assert await s.next_delay() == 0.8
    assert s.watcher.streaming is True


async def test_gone_streams_the_list_again_and_delivers_the_difference(s: Harness) -> None:
    await s.api.watches.put([event("ADDED", "a", "1"), event("ADDED", "b", "2"), event("ADDED", "same", "3"),
                             end_of_initial_events("10"), event("MODIFIED", "a", "11"),
                             Gone(410, "Expired", "too old resource version")])
    await s.api.watches.put([event("ADDED", "b", "25"), event("ADDED", "same", "3"), event("ADDED", "c", "28"),
                             end_of_initial_events("30")])
    await s.watching(3)
    assert s.seen[3:] == [("MODIFIED", "a", "11"), ("DELETED", "a", "11"), ("MODIFIED", "b", "25"),
                          ("ADDED", "c", "28")]
    assert sorted(ref.name for ref in s.store.refs()) == ["b", "c", "same"]
    assert s.api.watch_calls[2]["resource_version"] == "30"
    assert s.api.list_calls == []
    cached = s.store.get(ObjectRef("ns", "c"))
    assert cached is not None and cached["metadata"]["resourceVersion"] == "28"


async def test_a_transport_failure_opening_a_streaming_list_backs_off_and_streams_again(s: Harness) -> None:
    await s.api.watches.put([KubeTransportError("connection refused")])
    assert await s.next_delay() == 0.8
    await s.api.watches.put([end_of_initial_events("4")])
    s.clock.advance(0.8)
    await s.watching(3)
    assert [c["send_initial_events"] for c in s.api.watch_calls] == [True, True, False]
    assert s.store.synced.is_set()


async def test_a_watcher_started_after_a_gate_lists_only_once_it_is_set() -> None:
    h = Harness()
    h.watcher.streaming = True
    gate = asyncio.Event()
    h.watcher.start_after(gate)
    h.watcher.select("app=db,b in (3)")  # e.g. the shards the gate's owner selects before opening it
    task = asyncio.create_task(h.watcher.run())
    try:
        await h.api.watches.put([event("ADDED", "a", "1"), end_of_initial_events("5")])
        for _ in range(5):
            await asyncio.sleep(0)  # let the watcher run, were it not held
        assert h.api.watch_calls == [] and not h.store.synced.is_set()
        gate.set()
        await h.watching(1)
        assert h.api.watch_calls[0]["label_selector"] == "app=db,b in (3)"
        assert h.store.synced.is_set() and h.seen == [("ADDED", "a", "1")]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
