"""The manager: starts watchers, waits for their caches, (leads,) runs controllers, shuts down cleanly.

Invariants:
- No controller worker starts before every watcher's store is synced (and, with a leader elector,
  before the lease is held). `ready` is true once every store is synced (for /readyz).
- On the stop event: controllers get `shutdown_timeout` seconds of clock time to finish in-flight
  reconciles, then the lease is released (a standby takes over at once), then watchers are cancelled;
  run() returns 0.
- On lost leadership: controllers are cancelled at once (another replica may already be acting) and
  run() returns 1. A watcher or controller task that ends by itself is a fault: run() returns 1.
- Every task the manager creates is owned by run() and cancelled (and awaited) before it returns.
- With resync_period, every watcher's resync() is called each period while controllers run
  (controller-runtime's SyncPeriod).
- Runnables (add_runnable) start with the controllers (after sync and leadership), or, added with
  early=True (one that steers the caches, e.g. ShardCaches, or whose effects reach only the controllers'
  queues, e.g. the ShardOwner: the workers still start after sync), with the watchers; they keep
  running while the controllers finish in-flight reconciles on a graceful stop; then each started one
  is cancelled and its stop() awaited (at most shutdown_timeout together), before the lease is released
  and the watchers are cancelled (also when the stop comes before the controllers started). A runnable
  that ends by itself is a fault (run() returns 1, after a graceful stop).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol

import structlog

from sampledb_operator.observability import metrics
from sampledb_operator.runtime.clock import Clock, wait_all
from sampledb_operator.runtime.controller import Controller


class SyncedStore(Protocol):
    """What the manager needs of a cache: its synced flag."""

    @property
    def synced(self) -> asyncio.Event: ...


class WatcherLike(Protocol):
    """What the manager needs of a watcher (runtime.watcher.Watcher satisfies it)."""

    @property
    def store(self) -> SyncedStore: ...

    async def run(self) -> None:
        """List and watch until cancelled."""
        ...

    def resync(self) -> None:
        """Deliver every cached object to the handlers again."""
        ...


class LeaderLike(Protocol):
    """What the manager needs of a leader elector (runtime.leader.LeaderElector satisfies it)."""

    @property
    def is_leader(self) -> bool: ...

    async def acquire(self) -> None:
        """Return once this process holds the lease."""
        ...

    async def hold(self) -> None:
        """Keep renewing; return when leadership is lost."""
        ...

    async def release(self) -> None:
        """Give the lease up so a standby takes over at once."""
        ...


class Runnable(Protocol):
    """A component run beside the controllers (runtime.shards.ShardOwner satisfies it)."""

    async def run(self) -> None:
        """Work until cancelled; returning or raising is a fault."""
        ...

    async def stop(self) -> None:
        """Clean up after run() was cancelled on a graceful stop (e.g. release what it holds)."""
        ...


class Manager:
    """Owns the watchers, the controllers and the lease for one run."""

    def __init__(self, *, clock: Clock, leader: LeaderLike | None = None, shutdown_timeout: float = 30.0,
                 resync_period: float | None = None) -> None:
        if resync_period is not None and resync_period <= 0:
            raise ValueError("resync_period must be > 0")
        self._clock = clock
        self._leader = leader
        self._shutdown_timeout = shutdown_timeout
        self._resync_period = resync_period
        self._watchers: list[WatcherLike] = []
        self._controllers: list[Controller] = []
        self._runnables: list[tuple[str, Runnable, bool]] = []  # (name, runnable, early)
        self._started: list[tuple[str, Runnable]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._log = structlog.get_logger().bind(component="manager")

    def add_watcher(self, watcher: WatcherLike) -> None:
        self._watchers.append(watcher)

    def add_controller(self, controller: Controller) -> None:
        self._controllers.append(controller)

    def add_runnable(self, name: str, runnable: Runnable, *, early: bool = False) -> None:
        """Run `runnable` beside the controllers, or from the start with the watchers when `early` (see the
        module's invariants)."""
        self._runnables.append((name, runnable, early))

    @property
    def ready(self) -> bool:
        """Every watcher's cache is synced."""
        return all(w.store.synced.is_set() for w in self._watchers)

    @property
    def leading(self) -> bool:
        """This process may act (it holds the lease, or there is no leader election)."""
        return self._leader is None or self._leader.is_leader

    async def run(self, stop: asyncio.Event) -> int:
        """Run until `stop` is set (0) or leadership is lost or a component dies (1)."""
        try:
            return await self._run(stop)
        finally:
            await self._cancel(self._tasks)
            for controller in self._controllers:  # those never started still own a queue
                await controller.queue.shutdown(drain=False)

    async def _run(self, stop: asyncio.Event) -> int:
        stopper = self._spawn(stop.wait(), "manager-stop")
        watchers = [self._spawn(w.run(), f"watcher-{i}") for i, w in enumerate(self._watchers)]
        synced = self._spawn(self._wait_synced(), "manager-sync")
        early = self._start_runnables(early=True)
        first = await self._first(stopper, synced, *watchers, *early)
        if first is not synced:
            return await self._stop_before_start(first, stopper, early)
        self._log.info("caches synced")
        metrics.caches_synced_timestamp_seconds.set(self._clock.now().timestamp())
        if self._leader is not None:
            acquired = self._spawn(self._leader.acquire(), "leader-acquire")
            first = await self._first(stopper, acquired, *watchers, *early)
            if first is not acquired:
                return await self._stop_before_start(first, stopper, early)
            self._log.info("leadership acquired")
        controllers = [self._spawn(c.run(), f"controller-{c.name}") for c in self._controllers]
        runnables = early + self._start_runnables(early=False)
        holder = self._spawn(self._leader.hold(), "leader-hold") if self._leader is not None else None
        if self._resync_period is not None:
            self._spawn(self._resync_loop(self._resync_period), "manager-resync")
        first = await self._first(stopper, *([holder] if holder else []), *watchers, *controllers, *runnables)
        if first is stopper:
            await self._graceful_stop(holder, runnables)
            return 0
        if first is holder:
            self._log.error("leadership lost, stopping controllers at once")
            await self._cancel(controllers)
            return 1
        self._log.error("a watcher or controller stopped unexpectedly", task=first.get_name(),
                        error=_describe(first))
        await self._graceful_stop(holder, runnables)
        return 1

    def _start_runnables(self, *, early: bool) -> list[asyncio.Task[Any]]:
        """Start the runnables added with this `early`; their tasks."""
        chosen = [(name, r) for name, r, e in self._runnables if e is early]
        self._started.extend(chosen)
        return [self._spawn(r.run(), f"runnable-{name}") for name, r in chosen]

    async def _stop_before_start(self, first: asyncio.Task[Any], stopper: asyncio.Task[Any],
                                 early: list[asyncio.Task[Any]]) -> int:
        if self._started:
            await self._cancel(early)
            await self._stop_runnables()
        if first is stopper:
            self._log.info("stopped before controllers started")
            return 0
        self._log.error("a component stopped before controllers started", task=first.get_name(),
                        error=_describe(first))
        return 1

    async def _graceful_stop(self, holder: asyncio.Task[Any] | None,
                             runnables: Iterable[asyncio.Task[Any]] = ()) -> None:
        self._log.info("shutting down controllers", timeout=self._shutdown_timeout)
        await asyncio.gather(*(c.shutdown(timeout=self._shutdown_timeout) for c in self._controllers))
        if self._started:
            await self._cancel(runnables)
            await self._stop_runnables()
        if holder is not None and self._leader is not None:
            await self._cancel({holder})
            await self._release()

    async def _release(self) -> None:
        assert self._leader is not None
        release = self._spawn(self._leader.release(), "leader-release")
        if not await wait_all(self._clock, [release], self._shutdown_timeout):
            self._log.warning("lease release timed out")  # an error of release() is logged by _cancel

    async def _stop_runnables(self) -> None:
        stops = [self._spawn(r.stop(), f"runnable-{name}-stop") for name, r in self._started]
        if not await wait_all(self._clock, stops, self._shutdown_timeout):
            self._log.warning("runnables did not stop in time")
        await self._cancel(stops)   # logs (and so retrieves) an error a stop() ended with

    async def _wait_synced(self) -> None:
        for watcher in self._watchers:
            await watcher.store.synced.wait()

    async def _resync_loop(self, period: float) -> None:
        while True:
            await self._clock.sleep(period)
            for watcher in self._watchers:
                watcher.resync()

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        return task

    async def _first(self, *tasks: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """The first of `tasks` to finish (the earliest in argument order if several have)."""
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return next(task for task in tasks if task.done())

    async def _cancel(self, tasks: Iterable[asyncio.Task[Any]]) -> None:
        """Cancel and await `tasks`; log (and so retrieve) any error one of them ended with."""
        owned = list(tasks)
        pending = [task for task in owned if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        for task in owned:
            self._tasks.discard(task)
            if not task.cancelled() and (error := task.exception()) is not None:
                self._log.error("task ended with an error", task=task.get_name(), error=repr(error))


def _describe(task: asyncio.Task[Any]) -> str:
    if task.cancelled():
        return "cancelled"
    with contextlib.suppress(asyncio.InvalidStateError):
        error = task.exception()
        return repr(error) if error is not None else "returned"
    return "running"
