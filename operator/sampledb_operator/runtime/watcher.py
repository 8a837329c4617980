"""Watcher: keeps one Store in step with the API server (list, then watch; client-go reflector).

The loop: list, replace the store atomically and deliver the difference to the handlers; then
watch from the list's resourceVersion with bookmarks, for a server-side timeoutSeconds drawn from
[min_watch_timeout, max_watch_timeout], and a client read timeout that drops a silent connection.
The list is a streaming list when `streaming` (Kubernetes' WatchList, client-go's default since
1.35): one watch with sendInitialEvents, whose ADDED events are packed one at a time until the
bookmark that ends them, served from the API server's watch cache, and the same stream then goes on
as the watch. A server that refuses it (Invalid or BadRequest: the WatchList feature off, or a
version before it) makes this watcher list page by page from then on: every page with
resourceVersion unset (a consistent read, never older than what this process already saw).

Invariants:
- a streaming list is all or nothing: the store and the recorded resourceVersion change only at the
  bookmark that ends its initial events; a stream that ends or fails before it is a failure, and the
  next cycle lists again;
- the resourceVersion of every event (BOOKMARK included) is recorded; a stream the server
  closes, or a failed one, is resumed from the last recorded resourceVersion; only 410 Gone
  causes a relist, whose diff (deletions of objects that vanished meanwhile included) is
  delivered like watch events;
- failures back off 0.8 s doubling to 30 s (runtime/watch_retry decides each wait: 429, 401/403, 410);
  2 minutes of healthy streaming reset the backoff; a stream that ends within a second without any
  event counts as a failure (as in client-go);
- ending a watch is not a failure: a clean server-side timeout, or an opened stream that went quiet
  for the read timeout or dropped (kube.errors.StreamInterrupted), is resumed at once without
  growing the backoff (only one that breaks within a second without events counts as a failure), and
  a stream that stayed open for the healthy period resets the backoff, events or not;
- the store is updated before handlers see an event, but for a store's first listing: while a store has never
  been synced (and holds nothing), a streaming list's objects reach the handlers as ADDED one by one as they
  arrive, each already decoded and transformed, and the replace at its end delivers nothing more (it would
  deliver exactly those, each decoded once again). Nothing reads a cache before it first synced (the
  manager starts no worker until every cache has), so a handler's effects (keys queued) wait for the store
  all the same; a first listing cut short is streamed again, its objects delivered again, and one deleted
  meanwhile was delivered but is never cached: its key finds nothing, as a deleted object's does. A
  handler's exception is logged and never stops the watcher; every wait is on the injected Clock.
- select(selector) changes the label selector: the running stream (or list, or backoff wait) is dropped
  at once and the next cycle lists with the new selector; until that list completes the store keeps what
  the old selector listed and watched (stale, as during any relist). `listed_selector` is the selector
  of the listing the store holds and the stream goes on with: set with the store's replacement, before
  the difference is delivered; the listed handlers are called after it.
- relist() asks for a fresh listing with the same selector (the running stream, list or wait is dropped
  as by select()) and returns its generation: `listed_generation` reaches it only with a listing whose
  cycle began after the call, never with one that was under way then.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from prometheus_client import Counter

from sampledb_operator.kube.api import ListResult, WatchEvent, initial_events_end
from sampledb_operator.kube.errors import ApiError, BadRequest, Invalid, KubeError, StreamInterrupted, StreamWentQuiet
from sampledb_operator.kube.resources import Resource
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability import metrics
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.runtime.clock import Clock
from sampledb_operator.runtime.store import Packed, Store
from sampledb_operator.runtime.watch_retry import Backoff, IncompleteList, ShortWatch, after_failure

T = TypeVar("T")
EventHandler = Callable[[str, dict[str, Any]], None]
"""("ADDED" | "MODIFIED" | "DELETED", object); synchronous and cheap (enqueue only)."""

HEALTHY_PERIOD = 120.0
SHORT_WATCH = 1.0


LIST_PAGE_SIZE = 100  # objects per list page: every watcher relists at once, each holding one page parsed
# (measured at N=300: peak resident memory 187 MiB with pages of 500, 124-134 MiB with 100; synced 1.1 -> 1.25 s)


class WatchApi(Protocol):
    """What the Watcher needs of a ResourceApi (kube.api.ResourceApi satisfies it)."""

    @property
    def resource(self) -> Resource: ...

    async def list_all(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        resource_version: str | None = None,
        keep: Callable[[dict[str, Any]], Any] | None = None,
    ) -> ListResult: ...

    def watch(
        self,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int,
        read_timeout: float,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
    ) -> AsyncGenerator[WatchEvent, None]: ...


class Watcher:
    """List+watch of one resource (optionally one namespace and selectors) into a Store."""

    def __init__(
        self,
        api: WatchApi,
        store: Store,
        *,
        clock: Clock,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = LIST_PAGE_SIZE,
        min_watch_timeout: int = 300,
        max_watch_timeout: int = 600,
        read_timeout: float = 150.0,
        backoff_initial: float = 0.8,
        backoff_max: float = 30.0,
        rng: random.Random | None = None,
        healthy_period: float = HEALTHY_PERIOD,
        streaming: bool = False,
    ) -> None:
        if not 0 < min_watch_timeout <= max_watch_timeout:
            raise ValueError("need 0 < min_watch_timeout <= max_watch_timeout")
        self._api = api
        self.store = store
        self.name = api.resource.plural
        self._clock = clock
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._page_size = page_size
        self._timeouts = (min_watch_timeout, max_watch_timeout)
        self._read_timeout = read_timeout
        self._rng = rng or random.Random()
        self.backoff = Backoff(backoff_initial, backoff_max, self._rng)
        self._healthy_period = healthy_period
        self._handlers: list[EventHandler] = []
        self._listed_handlers: list[Callable[[], None]] = []
        self._reselected = asyncio.Event()
        self._cycle_selector = label_selector  # the selector the running cycle lists and watches with
        self.listed_selector: str | None = None  # the selector of the listing the store holds (None: none yet)
        self._need_list = True
        self._list_requests = 0  # relist() calls so far: the generation the next listing must reach
        self._cycle_generation = 0  # _list_requests when the running cycle began
        self.listed_generation = 0  # the generation of the listing the store holds
        self.streaming = streaming  # lists are streaming lists; cleared for good when the server refuses one
        self._initial: list[Packed] | None = None  # a streaming list's objects so far, until its end bookmark
        self._initial_delivered = False  # the running streaming list is the store's first: delivered as it comes
        self._gate: asyncio.Event | None = None  # start_after's
        # watch_events_total's child per event type: labels() on every event cost a tenth of what caching an
        # object costs on a restart (docs/benchmarks.md, "Restarts")
        self._event_counters: dict[str, Counter] = {}
        self.resource_version = ""
        self._log = get_logger(__name__, resource=self.name, namespace=namespace or "")

    def add_handler(self, handler: EventHandler) -> None:
        """Handlers see every change after the store has it (a first listing's objects as they arrive: see the
        module's invariants), in registration order."""
        self._handlers.append(handler)

    def start_after(self, gate: asyncio.Event) -> None:
        """run() lists only once `gate` is set (a sharded replica's filtered watches wait for the shards its Leases
        name: runtime/shard_caches.ShardCaches.hinted)."""
        self._gate = gate

    def add_listed_handler(self, handler: Callable[[], None]) -> None:
        """Called after every listing that replaced the store (listed_selector names its selector)."""
        self._listed_handlers.append(handler)

    @property
    def label_selector(self) -> str | None:
        """The label selector the watcher lists and watches with from its next cycle on (select() sets it)."""
        return self._label_selector

    def select(self, label_selector: str | None) -> None:
        """List and watch with `label_selector` from now on (see the module's invariants)."""
        if label_selector == self._label_selector:
            return
        self._label_selector = label_selector
        self._need_list = True
        self._reselected.set()

    def relist(self) -> int:
        """List again from the next cycle on (see the module's invariants); the generation that listing
        will have (listed_generation reaches it once it has replaced the store)."""
        self._list_requests += 1
        self._need_list = True
        self._reselected.set()
        return self._list_requests

    def resync(self) -> None:
        """Deliver MODIFIED for every cached object (a periodic replay; no API call)."""
        for obj in self.store.list():
            self._deliver("MODIFIED", obj)

    async def run(self) -> None:
        """List and watch until cancelled (once start_after's gate is set)."""
        if self._gate is not None:
            await self._gate.wait()
        while True:
            self._reselected.clear()
            delay = await self._unless_reselected(self._cycle())
            if delay is not None and delay > 0:
                await self._unless_reselected(self._clock.sleep(delay))

    async def _unless_reselected(self, step: Coroutine[Any, Any, T]) -> T | None:
        """`step`'s result, or None once select() changed the selector first (`step` is then cancelled)."""
        task = asyncio.ensure_future(step)
        reselected = asyncio.ensure_future(self._reselected.wait())
        try:
            await asyncio.wait((task, reselected), return_when=asyncio.FIRST_COMPLETED)
        finally:
            reselected.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return task.result() if not task.cancelled() else None

    async def _cycle(self) -> float:
        """A relist if needed, then one watch stream; the delay before the next cycle."""
        streamed = self._need_list and self.streaming
        self._cycle_selector = self._label_selector
        self._cycle_generation = self._list_requests
        try:
            if self._need_list and not streamed:
                await self._relist()
            await self._watch_once()
        except asyncio.CancelledError:
            raise
        except (Invalid, BadRequest) as exc:
            if not streamed:
                return self._on_error(exc)
            self.streaming = False
            self._log.info("the API server refused a streaming list; listing page by page from now on",
                           status=exc.status, message=exc.message)
            return 0.0
        except Exception as exc:  # every failure is retried; the cause decides how soon
            return self._on_error(exc)
        finally:
            self._initial = None
        return 0.0

    async def _relist(self) -> None:
        result = await self._api.list_all(
            self._namespace, label_selector=self._cycle_selector, field_selector=self._field_selector,
            page_size=self._page_size, keep=self.store.pack,
        )  # packed page by page: a listing is never held as parsed JSON all at once
        self._replaced(result.items, result.resource_version, streamed=False)

    async def _watch_once(self) -> None:
        """One watch stream until it ends; its end is recorded as a restart cause (closed, silent, dropped)."""
        opened = self._clock.monotonic()
        last_ok = opened
        received = 0
        cause = "closed"
        listing = self._need_list  # a streaming list (a paged one, when needed, came before)
        if listing:
            self._initial = []
            self._initial_delivered = not self.store.synced.is_set() and len(self.store) == 0
        stream = self._api.watch(
            self._namespace, resource_version="" if listing else self.resource_version,
            label_selector=self._cycle_selector, field_selector=self._field_selector,
            timeout_seconds=self._rng.randint(*self._timeouts), read_timeout=self._read_timeout,
            send_initial_events=listing,
        )
        try:
            try:
                async with contextlib.aclosing(stream) as events:
                    async for event in events:
                        received += 1
                        last_ok = self._clock.monotonic()
                        self._apply(event)
            except StreamInterrupted as exc:
                if self._initial is not None:
                    raise IncompleteList(f"streaming list interrupted: {exc}") from exc
                if received == 0 and self._clock.monotonic() - opened < SHORT_WATCH:
                    raise  # broke at once: a failure like any other
                cause = "silent" if isinstance(exc, StreamWentQuiet) else "dropped"
                self._log.info("watch stream ended without an answer; resuming", cause=cause, error=str(exc),
                               resource_version=self.resource_version)
            last_ok = self._clock.monotonic()  # the stream was open and working until now
        finally:
            if last_ok - opened >= self._healthy_period:
                self.backoff.reset()
        if received == 0 and last_ok - opened < SHORT_WATCH:
            raise ShortWatch("watch closed at once without events")
        if self._initial is not None:
            raise IncompleteList(f"streaming list ended after {len(self._initial)} objects, before its end bookmark")
        metrics.watch_restarts_total.labels(resource=self.name, cause=cause).inc()

    def _apply(self, event: WatchEvent) -> None:
        counter = self._event_counters.get(event.type)
        if counter is None:
            counter = self._event_counters[event.type] = metrics.watch_events_total.labels(resource=self.name,
                                                                                           type=event.type)
        counter.inc()
        if self._initial is not None:
            self._apply_initial(event)
            return
        rv = event.resource_version
        if rv:
            self.resource_version = rv
            self.store.resource_version = rv
        if event.type == "BOOKMARK":
            return
        obj = event.object
        if not (obj.get("metadata") or {}).get("name"):
            self._log.warning("watch event without metadata.name ignored", type=event.type)
            return
        if event.type == "DELETED":
            self.store.delete(ObjectRef.of(obj))
            obj = self.store.transform(obj)
        else:
            obj = self.store.upsert(obj)  # handlers see what the cache holds
        self._deliver(event.type, obj)

    def _apply_initial(self, event: WatchEvent) -> None:
        """One event of a streaming list's initial state: collected, or at its end bookmark the store replaced."""
        assert self._initial is not None
        if initial_events_end(event):
            items, self._initial = self._initial, None
            self._replaced(items, event.resource_version, streamed=True, delivered=self._initial_delivered)
        elif event.type == "ADDED":
            if not (event.object.get("metadata") or {}).get("name"):
                self._log.warning("watch event without metadata.name ignored", type=event.type)
            elif self._initial_delivered:
                packed, obj = self.store.pack_with_object(event.object)
                self._initial.append(packed)
                self._deliver("ADDED", obj)
            else:
                self._initial.append(self.store.pack(event.object))
        elif event.type != "BOOKMARK":  # a progress bookmark carries nothing yet
            raise IncompleteList(f"streaming list: a {event.type} event before the end of its initial events")

    def _replaced(self, items: list[Packed], resource_version: str, *, streamed: bool,
                  delivered: bool = False) -> None:
        """A full listing swapped in: recorded, and its difference delivered to the handlers (unless `delivered`:
        a first listing, whose objects, all ADDED, reached them as they came)."""
        metrics.watch_relists_total.labels(resource=self.name).inc()
        changes = self.store.replace_packed(items, resource_version=resource_version)
        # select() or relist() came while listing
        self._need_list = (self._label_selector != self._cycle_selector
                           or self._list_requests != self._cycle_generation)
        self.listed_selector = self._cycle_selector
        self.listed_generation = self._cycle_generation
        self.resource_version = resource_version
        self._log.info("listed", objects=len(items), changes=len(changes), resource_version=resource_version,
                       streamed=streamed)
        for type_, packed in () if delivered else changes:
            self._deliver(type_, self.store.unpack(packed))  # decoded one at a time
        for handler in self._listed_handlers:
            try:
                handler()
            except Exception:
                self._log.exception("listed handler failed")

    def _deliver(self, type_: str, obj: dict[str, Any]) -> None:
        for handler in self._handlers:
            try:
                handler(type_, obj)
            except Exception:  # a handler bug must not stop the cache
                meta = obj.get("metadata") or {}
                self._log.exception("event handler failed", type=type_, object=meta.get("name"),
                                    object_namespace=meta.get("namespace"))

    def _on_error(self, exc: Exception) -> float:
        retry = after_failure(exc, self.backoff)
        metrics.watch_restarts_total.labels(resource=self.name, cause=retry.cause).inc()
        if retry.relist:
            self._need_list = True
            self._log.info("resource version expired; relisting", resource_version=self.resource_version,
                           delay=retry.delay)
        elif retry.denied and isinstance(exc, ApiError):
            self._log.error("watch denied: check the operator's RBAC and credentials", status=exc.status,
                            reason=exc.reason, message=exc.message, delay=retry.delay)
        elif isinstance(exc, KubeError):
            status = exc.status if isinstance(exc, ApiError) else None
            self._log.warning("watch failed; retrying", error=str(exc), status=status, cause=retry.cause,
                              delay=retry.delay, listing=self._need_list)
        else:
            self._log.error("watch failed unexpectedly; retrying", error=repr(exc), delay=retry.delay, exc_info=exc)
        return retry.delay
