"""Watcher (reflector semantics) against a scripted fake of ResourceApi and a FakeClock.

The fake's list_all and watch take their answers from queues, so the watcher parks on an empty
queue and the test can look at its state deterministically before scripting the next answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import pytest
from structlog.testing import capture_logs
from tests.support.aio import eventually

from sampledb_operator.kube.api import ListResult, WatchEvent
from sampledb_operator.kube.errors import (
    Forbidden,
    Gone,
    KubeTransportError,
    ServerError,
    StreamInterrupted,
    StreamWentQuiet,
    TooManyRequests,
)
from sampledb_operator.kube.resources import STATEFULSET, Resource
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability.metrics import REGISTRY
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.watcher import Watcher

Step = WatchEvent | BaseException | Callable[[], None] | asyncio.Event


class FakeApi:
    """Scripted list_all / watch; records the arguments of every call."""

    resource: Resource = STATEFULSET

    def __init__(self) -> None:
        self.lists: asyncio.Queue[ListResult | BaseException] = asyncio.Queue()
        self.watches: asyncio.Queue[list[Step]] = asyncio.Queue()
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self.streams_closed = 0

    async def list_all(self, namespace: str | None = None, **kwargs: Any) -> ListResult:
        self.list_calls.append({"namespace": namespace, **kwargs})
        answer = await self.lists.get()
        if isinstance(answer, BaseException):
            raise answer
        keep = kwargs.get("keep")
        if keep is not None:
            return ListResult([keep(item) for item in answer.items], answer.resource_version, answer.continue_token)
        return answer

    async def watch(self, namespace: str | None = None, **kwargs: Any) -> AsyncGenerator[WatchEvent, None]:
        self.watch_calls.append({"namespace": namespace, **kwargs})
        script = await self.watches.get()
        try:
            for step in script:
                if isinstance(step, BaseException):
                    raise step
                if isinstance(step, asyncio.Event):
                    await step.wait()
                elif isinstance(step, WatchEvent):
                    yield step
                else:
                    step()
        finally:
            self.streams_closed += 1


class StubRandom(random.Random):
    """No jitter (random() == 0) and the midpoint for watch timeouts; records randint calls."""

    def __init__(self) -> None:
        super().__init__(0)
        self.randint_calls: list[tuple[int, int]] = []

    def random(self) -> float:
        return 0.0

    def randint(self, a: int, b: int) -> int:
        self.randint_calls.append((a, b))
        return (a + b) // 2


def sts(name: str, rv: str, **labels: str) -> dict[str, Any]:
    return {"kind": "StatefulSet", "apiVersion": "apps/v1",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "labels": labels}}


def event(type_: str, name: str, rv: str, **labels: str) -> WatchEvent:
    return WatchEvent(type_, sts(name, rv, **labels))


def bookmark(rv: str) -> WatchEvent:
    return WatchEvent("BOOKMARK", {"kind": "StatefulSet", "apiVersion": "apps/v1",
                                   "metadata": {"resourceVersion": rv}})


def listing(rv: str, *items: dict[str, Any]) -> ListResult:
    return ListResult(list(items), rv, None)


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0




class Harness:
    def __init__(self) -> None:
        self.api = FakeApi()
        self.clock = FakeClock()
        self.rng = StubRandom()
        self.store = Store("statefulsets")
        self.watcher = Watcher(self.api, self.store, clock=self.clock, rng=self.rng, label_selector="app=db",
                               read_timeout=42.0)
        self.seen: list[tuple[str, str, str]] = []
        self.watcher.add_handler(self.record)

    def record(self, type_: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.seen.append((type_, meta["name"], meta["resourceVersion"]))

    async def next_delay(self) -> float:
        """The delay of the sleep the watcher is waiting in (waits until it sleeps)."""
        await eventually(lambda: self.clock.pending_sleepers() == 1)
        deadline = self.clock.next_deadline()
        assert deadline is not None
        return round(deadline - self.clock.monotonic(), 6)

    async def watching(self, calls: int) -> None:
        """Wait until the watcher has opened `calls` watches and is parked waiting for a script."""
        await eventually(lambda: len(self.api.watch_calls) == calls and self.api.watches.empty())


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    task = asyncio.create_task(harness.watcher.run())
    yield harness
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_initial_list_fills_the_store_delivers_added_and_watches_from_its_version(h: Harness) -> None:
    relists = metric("sampledb_watch_relists_total", resource="statefulsets")
    await h.api.lists.put(listing("10", sts("a", "1"), sts("b", "2")))
    await h.watching(1)
    assert h.store.synced.is_set()
    assert h.seen == [("ADDED", "a", "1"), ("ADDED", "b", "2")]
    assert h.api.list_calls == [{"namespace": None, "label_selector": "app=db", "field_selector": None,
                                 "page_size": 100, "keep": h.store.pack}]  # each page packed as it arrives
    call = h.api.watch_calls[0]
    assert (call["resource_version"], call["label_selector"], call["read_timeout"]) == ("10", "app=db", 42.0)
    assert call["timeout_seconds"] == 450 and h.rng.randint_calls == [(300, 600)]
    assert metric("sampledb_watch_relists_total", resource="statefulsets") == relists + 1


async def test_watch_events_reach_the_store_before_the_handlers(h: Harness) -> None:
    def check(type_: str, obj: dict[str, Any]) -> None:
        cached = h.store.get(ObjectRef.of(obj))
        assert cached is None if type_ == "DELETED" else cached is obj

    h.watcher.add_handler(check)
    added = metric("sampledb_watch_events_total", resource="statefulsets", type="ADDED")
    await h.api.lists.put(listing("10", sts("a", "1"), sts("b", "2")))
    await h.api.watches.put([event("ADDED", "c", "11"), event("MODIFIED", "a", "12"),
                             event("DELETED", "b", "13")])
    await h.watching(2)
    assert h.seen[2:] == [("ADDED", "c", "11"), ("MODIFIED", "a", "12"), ("DELETED", "b", "13")]
    assert sorted(ref.name for ref in h.store.refs()) == ["a", "c"]
    assert metric("sampledb_watch_events_total", resource="statefulsets", type="ADDED") == added + 1


async def test_handlers_see_the_objects_as_the_store_transform_left_them(h: Harness) -> None:
    h.store.transform = lambda o: {**o, "metadata": {**o["metadata"], "labels": {"slim": "yes"}}}
    labels: list[dict[str, str]] = []
    h.watcher.add_handler(lambda _t, o: labels.append(o["metadata"]["labels"]))
    await h.api.lists.put(listing("10", sts("a", "1")))
    await h.api.watches.put([event("ADDED", "c", "11"), event("DELETED", "a", "12")])
    await h.watching(2)
    cached = h.store.get(ObjectRef("ns", "c"))
    assert cached is not None and cached["metadata"]["labels"] == {"slim": "yes"}
    assert labels == [{"slim": "yes"}] * 3


async def test_resumes_from_the_last_resource_version_bookmarks_included_when_the_server_ends_the_stream(
    h: Harness,
) -> None:
    closed = metric("sampledb_watch_restarts_total", resource="statefulsets", cause="closed")
    await h.api.lists.put(listing("10", sts("a", "1")))
    await h.api.watches.put([event("MODIFIED", "a", "11"), bookmark("15")])
    await h.watching(2)
    assert h.api.watch_calls[1]["resource_version"] == "15"
    assert h.store.resource_version == "15"
    assert len(h.api.list_calls) == 1
    assert h.clock.pending_sleepers() == 0
    assert h.seen[-1] == ("MODIFIED", "a", "11")  # bookmarks are not delivered
    assert metric("sampledb_watch_restarts_total", resource="statefulsets", cause="closed") == closed + 1


async def test_gone_relists_at_once_and_delivers_deletions_of_objects_that_vanished(h: Harness) -> None:
    expired = metric("sampledb_watch_restarts_total", resource="statefulsets", cause="expired")
    await h.api.lists.put(listing("10", sts("a", "1"), sts("b", "2"), sts("same", "3")))
    await h.api.watches.put([event("MODIFIED", "a", "11"), Gone(410, "Expired", "too old resource version")])
    await h.api.lists.put(listing("30", sts("b", "25"), sts("same", "3"), sts("c", "28")))
    await h.watching(2)
    assert h.clock.pending_sleepers() == 0
    assert h.seen[3:] == [("MODIFIED", "a", "11"), ("DELETED", "a", "11"), ("MODIFIED", "b", "25"),
                          ("ADDED", "c", "28")]
    assert sorted(ref.name for ref in h.store.refs()) == ["b", "c", "same"]
    assert h.api.watch_calls[1]["resource_version"] == "30"
    assert metric("sampledb_watch_restarts_total", resource="statefulsets", cause="expired") == expired + 1


async def test_gone_again_right_after_a_relist_backs_off(h: Harness) -> None:
    await h.api.lists.put(listing("10"))
    await h.api.watches.put([Gone(410, "Expired", "")])
    await h.api.lists.put(listing("20"))
    await h.watching(2)
    await h.api.watches.put([Gone(410, "Expired", "")])
    assert await h.next_delay() == 1.6
    await h.api.lists.put(listing("30"))
    h.clock.advance(1.6)
    await h.watching(3)
    assert len(h.api.list_calls) == 3


async def test_silent_connection_restarts_the_watch_at_once_from_the_last_resource_version(h: Harness) -> None:
    silent = metric("sampledb_watch_restarts_total", resource="statefulsets", cause="silent")
    await h.api.lists.put(listing("10"))
    await h.api.watches.put([event("ADDED", "x", "11"), lambda: h.clock.advance(42),
                             StreamWentQuiet("GET: nothing for 42 s")])
    await h.watching(2)  # no sleep in between: a quiet connection is not an error
    assert h.api.watch_calls[1]["resource_version"] == "11"
    assert len(h.api.list_calls) == 1
    assert metric("sampledb_watch_restarts_total", resource="statefulsets", cause="silent") == silent + 1


async def test_repeated_silent_timeouts_and_dropped_quiet_streams_never_grow_the_backoff(h: Harness) -> None:
    """Issue #11, item 13e: they pushed the backoff to 30-60 s, with no watch open meanwhile."""
    await h.api.lists.put(listing("10"))
    for i in range(8):
        quiet = StreamWentQuiet("GET: nothing for 42 s") if i % 2 else StreamInterrupted("GET: connection reset")
        await h.api.watches.put([lambda: h.clock.advance(42), quiet])
        await h.watching(i + 2)
    assert h.watcher.backoff.failures == 0
    await h.api.watches.put([KubeTransportError("connection refused")])  # a real failure starts at the bottom
    assert await h.next_delay() == 0.8


async def test_a_stream_that_breaks_at_once_is_still_a_failure(h: Harness) -> None:
    await h.api.lists.put(listing("10"))
    await h.api.watches.put([StreamInterrupted("GET: connection reset")])
    assert await h.next_delay() == 0.8


async def test_a_quiet_stream_that_stayed_open_two_minutes_resets_the_backoff(h: Harness) -> None:
    await h.api.lists.put(listing("10"))
    for expected in (0.8, 1.6):
        await h.api.watches.put([KubeTransportError("connection refused")])
        assert await h.next_delay() == expected
        h.clock.advance(expected)
    await h.api.watches.put([lambda: h.clock.advance(150), StreamWentQuiet("GET: nothing for 150 s")])
    await h.api.watches.put([KubeTransportError("connection refused")])
    assert await h.next_delay() == 0.8


async def test_backoff_doubles_up_to_the_maximum_and_resets_after_two_minutes_of_streaming(
    h: Harness,
) -> None:
    await h.api.lists.put(listing("10"))
    for expected in (0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0):
        await h.api.watches.put([KubeTransportError("connection reset")])
        assert await h.next_delay() == expected
        h.clock.advance(expected)
    await h.api.watches.put([event("ADDED", "a", "20"), lambda: h.clock.advance(121),
                             event("MODIFIED", "a", "21"), KubeTransportError("connection reset")])
    assert await h.next_delay() == 0.8
    assert h.api.watch_calls[-1]["resource_version"] == "10"


async def test_a_watch_closed_at_once_without_events_counts_as_a_failure(h: Harness) -> None:
    await h.api.lists.put(listing("10"))
    await h.api.watches.put([])
    assert await h.next_delay() == 0.8


async def test_too_many_requests_waits_for_retry_after_when_longer_than_the_backoff(h: Harness) -> None:
    await h.api.lists.put(listing("10"))
    await h.api.watches.put([TooManyRequests(429, "TooManyRequests", "", retry_after=7.0)])
    assert await h.next_delay() == 7.0
    h.clock.advance(7.0)
    await h.api.watches.put([TooManyRequests(429, "TooManyRequests", "", retry_after=0.1)])
    assert await h.next_delay() == 1.6


async def test_forbidden_is_logged_as_an_error_and_retried_at_the_maximum_backoff(h: Harness) -> None:
    with capture_logs() as logs:
        await h.api.lists.put(Forbidden(403, "Forbidden", "cannot list statefulsets"))
        assert await h.next_delay() == 30.0
    assert [entry["log_level"] for entry in logs if entry["event"].startswith("watch denied")] == ["error"]
    await h.api.lists.put(listing("10"))
    h.clock.advance(30.0)
    await h.watching(1)
    assert len(h.api.list_calls) == 2


async def test_a_failed_list_is_retried_after_backing_off(h: Harness) -> None:
    await h.api.lists.put(ServerError(500, "InternalError", "etcd"))
    assert await h.next_delay() == 0.8
    await h.api.lists.put(listing("10", sts("a", "1")))
    h.clock.advance(0.8)
    await h.watching(1)
    assert h.seen == [("ADDED", "a", "1")]


async def test_a_handler_exception_is_logged_and_never_stops_the_watcher(h: Harness) -> None:
    def broken(_type: str, _obj: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    h.watcher.add_handler(broken)
    with capture_logs() as logs:
        await h.api.lists.put(listing("10", sts("a", "1")))
        await h.api.watches.put([event("MODIFIED", "a", "2")])
        await h.watching(2)
    assert h.seen == [("ADDED", "a", "1"), ("MODIFIED", "a", "2")]
    assert sum(entry["event"] == "event handler failed" for entry in logs) == 2


async def test_a_duplicate_modified_with_the_same_resource_version_still_updates_the_store(
    h: Harness,
) -> None:
    await h.api.lists.put(listing("10", sts("a", "5", tier="old")))
    await h.api.watches.put([event("MODIFIED", "a", "5", tier="new")])
    await h.watching(2)
    cached = h.store.get(ObjectRef("ns", "a"))
    assert cached is not None and cached["metadata"]["labels"] == {"tier": "new"}
    assert h.seen[-1] == ("MODIFIED", "a", "5")


async def test_resync_replays_modified_for_every_cached_object(h: Harness) -> None:
    await h.api.lists.put(listing("10", sts("a", "1"), sts("b", "2")))
    await h.watching(1)
    h.watcher.resync()
    assert h.seen[2:] == [("MODIFIED", "a", "1"), ("MODIFIED", "b", "2")]


async def test_cancelling_the_watcher_closes_the_open_stream() -> None:
    harness = Harness()
    task = asyncio.create_task(harness.watcher.run())
    never = asyncio.Event()
    await harness.api.lists.put(listing("10"))
    await harness.api.watches.put([event("ADDED", "a", "11"), never])
    await eventually(lambda: len(harness.seen) == 1)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert harness.api.streams_closed == 1


# --- select: a new label selector drops the running stream and relists with it; listed_selector names
# the selector of the listing the store holds (the shard-filtered caches' readiness rests on it)

async def test_select_drops_the_stream_and_relists_with_the_new_selector(h: Harness) -> None:
    listed: list[str | None] = []
    h.watcher.add_listed_handler(lambda: listed.append(h.watcher.listed_selector))
    await h.api.lists.put(listing("10", sts("a", "1"), sts("b", "2")))
    await h.watching(1)
    assert h.watcher.listed_selector == "app=db" and listed == ["app=db"]
    h.watcher.select("app=db,bucket in (1)")
    await eventually(lambda: len(h.api.list_calls) == 2)
    assert h.api.list_calls[1]["label_selector"] == "app=db,bucket in (1)"
    assert h.watcher.listed_selector == "app=db"  # the store still holds the old listing
    await h.api.lists.put(listing("20", sts("b", "2"), sts("c", "3")))
    await h.watching(2)
    assert h.api.watch_calls[1]["label_selector"] == "app=db,bucket in (1)"
    assert h.api.watch_calls[1]["resource_version"] == "20"
    assert h.watcher.listed_selector == "app=db,bucket in (1)" and listed[-1] == "app=db,bucket in (1)"
    assert sorted(ref.name for ref in h.store.refs()) == ["b", "c"]
    assert ("DELETED", "a", "1") in h.seen and ("ADDED", "c", "3") in h.seen  # the difference delivered


async def test_the_same_selector_again_changes_nothing(h: Harness) -> None:
    await h.api.lists.put(listing("10", sts("a", "1")))
    await h.watching(1)
    h.watcher.select("app=db")
    await h.api.watches.put([event("MODIFIED", "a", "11")])
    await h.watching(2)
    assert len(h.api.list_calls) == 1 and h.api.watch_calls[1]["resource_version"] == "11"


async def test_a_select_during_a_list_lists_again_with_the_newest_selector(h: Harness) -> None:
    await eventually(lambda: len(h.api.list_calls) == 1)  # the first list is parked
    h.watcher.select("app=db,bucket in (2)")
    await eventually(lambda: len(h.api.list_calls) == 2)
    assert h.api.list_calls[1]["label_selector"] == "app=db,bucket in (2)"
    assert h.watcher.listed_selector is None and not h.store.synced.is_set()
    await h.api.lists.put(listing("10", sts("x", "1")))
    await h.watching(1)
    assert h.watcher.listed_selector == "app=db,bucket in (2)"


async def test_a_select_during_the_backoff_wait_lists_at_once(h: Harness) -> None:
    await h.api.lists.put(listing("10", sts("a", "1")))
    await h.api.watches.put([ServerError(500, "InternalError", "boom")])
    await h.next_delay()  # waiting to retry
    h.watcher.select("app=db,bucket in (3)")
    await eventually(lambda: len(h.api.list_calls) == 2)
    assert h.api.list_calls[1]["label_selector"] == "app=db,bucket in (3)"


# --- relist: a fresh listing with the same selector; listed_generation reaches the generation relist()
# returned only with a listing begun after the call (the shard-filtered caches count a shard whose
# children were just labelled only with such a listing)

async def test_relist_drops_the_stream_and_lists_again_with_the_same_selector(h: Harness) -> None:
    await h.api.lists.put(listing("10", sts("a", "1")))
    await h.watching(1)
    assert h.watcher.listed_generation == 0
    generation = h.watcher.relist()
    assert generation == 1
    await eventually(lambda: len(h.api.list_calls) == 2)
    assert h.api.list_calls[1]["label_selector"] == "app=db"
    assert h.watcher.listed_generation == 0  # the store still holds the listing from before
    await h.api.lists.put(listing("20", sts("a", "1"), sts("b", "2")))
    await h.watching(2)
    assert h.watcher.listed_generation == 1 and ("ADDED", "b", "2") in h.seen


async def test_a_listing_under_way_when_relist_comes_does_not_reach_its_generation(h: Harness) -> None:
    await eventually(lambda: len(h.api.list_calls) == 1)  # the first list is parked
    h.api.lists.put_nowait(listing("10", sts("a", "1")))  # its answer arrives as relist() comes
    generation = h.watcher.relist()
    await eventually(lambda: len(h.api.list_calls) == 2)  # listed again
    assert h.watcher.listed_selector == "app=db"  # the listing under way did replace the store...
    assert h.watcher.listed_generation < generation  # ...but does not count as the fresh one
    await h.api.lists.put(listing("20", sts("a", "1")))
    await h.watching(2)  # the first listing's stream was opened, then dropped
    assert h.watcher.listed_generation == generation
