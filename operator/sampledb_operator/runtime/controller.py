"""A controller: N workers taking keys from a WorkQueue and mapping each reconcile's outcome to queue ops.

Invariants:
- Reconcile is never called concurrently for one key (the queue hands a key to one worker at a time)
  and done(key) is always called after it, whatever the outcome.
- Outcome -> queue action, as controller-runtime: exception -> add_rate_limited, result "error";
  TerminalError -> forget, no requeue, on_terminal(ref, err), terminal + error counters, result
  "error"; Result(requeue_after > 0) -> forget + add_after, result "requeue_after";
  Result(requeue=True) -> add_rate_limited, result "requeue", and with a requeue_after > 0 also
  add_after: the key comes back at whichever is earlier (controller-runtime lets RequeueAfter win
  outright); otherwise forget, result "success". combine() merges the Results of a pass's parts
  so that the earliest time any part asks for is kept.
- kube.errors.NamespaceTerminating (a write refused because the namespace is being deleted) is
  expected, not a failure: add_rate_limited, result "requeue", no error counter, an info line (debug
  on the next ones) without traceback; the key goes away with the namespace's objects.
- Persistent failures are reported: after an exception, when the key has failed `error_threshold`
  (default 3) times in a row (the queue's num_requeues: since the last forget), on_error(ref, err,
  failures) is awaited, so the reconciler can say so where users look (a condition, an Event); the
  hook's own failure is logged and changes nothing else. A success forgets the count.
- A reconcile ended by asyncio.CancelledError during shutdown is not counted (no result, no error,
  no time observed) and is not requeued.
- shutdown(timeout) stops intake at once (the queue hands out nothing more, waiting keys are left to
  the next run, as the cluster still holds the state); in-flight reconciles get `timeout` seconds of
  clock time, then they are cancelled.
- Each reconcile is logged with controller, namespace, name and reconcile_id bound, both on the logger
  and in structlog's contextvars (so the reconciler's own logs carry them too).
- With an `admit` predicate (sharding: is this key's shard ours?), it is asked right before each
  reconcile; a key not admitted is forgotten (its failure count reset) and not reconciled, done() is
  still called, no reconcile metric moves. An admit that raises is logged and the key retried
  (rate-limited). `in_flight` holds the admitted keys whose reconcile is running; admission and entry
  into in_flight happen with no await between them, so a caller that stops admitting a set of keys
  and then sees none of them in flight knows none will run until admitted again.
- With an `intake` predicate (sharding: is this key's shard held here?), enqueue, enqueue_after and
  enqueue_soon drop a key it refuses (so the queue, and workqueue_depth, hold only this replica's work);
  whoever makes a key's shard held enqueues its keys then. An intake that raises takes the key (admit
  decides). The controller's own requeues (a failure, a requeue_after) are not asked.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from sampledb_operator.kube.errors import NamespaceTerminating
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.result import Result
from sampledb_operator.observability import metrics
from sampledb_operator.runtime.clock import Clock, wait_all
from sampledb_operator.runtime.ratelimit import RateLimiter
from sampledb_operator.runtime.workqueue import ShutDown, WorkQueue


class TerminalError(Exception):
    """A reconcile error that retrying cannot fix: the key is not requeued."""


Reconcile = Callable[[ObjectRef], Awaitable[Result | None]]
OnTerminal = Callable[[ObjectRef, TerminalError], Awaitable[None]]
OnError = Callable[[ObjectRef, Exception, int], Awaitable[None]]
Admit = Callable[[ObjectRef], bool]
ERROR_THRESHOLD = 3  # consecutive failures of a key before on_error is called


class _Metrics:
    def __init__(self, name: str, workers: int) -> None:
        metrics.init_controller(name, workers)
        self.total = {r: metrics.reconcile_total.labels(controller=name, result=r)
                      for r in metrics.RECONCILE_RESULTS}
        self.errors = metrics.reconcile_errors_total.labels(controller=name)
        self.terminal = metrics.terminal_reconcile_errors_total.labels(controller=name)
        self.time = metrics.reconcile_time_seconds.labels(controller=name)
        self.active = metrics.active_workers.labels(controller=name)


class Controller:
    """Runs `workers` reconcile loops over one work queue of ObjectRefs."""

    def __init__(self, name: str, reconcile: Reconcile, *, clock: Clock, workers: int = 1,
                 rate_limiter: RateLimiter[ObjectRef] | None = None,
                 on_terminal: OnTerminal | None = None, on_error: OnError | None = None,
                 error_threshold: int = ERROR_THRESHOLD, admit: Admit | None = None,
                 intake: Admit | None = None) -> None:
        if workers < 1:
            raise ValueError("a controller needs at least one worker")
        self.name = name
        self.workers = workers
        self.queue = WorkQueue[ObjectRef](name, clock=clock, rate_limiter=rate_limiter, controller=name)
        self._reconcile = reconcile
        self._on_terminal = on_terminal
        self._on_error = on_error
        self._error_threshold = max(1, error_threshold)
        self._admit = admit
        self._intake = intake
        self._in_flight: set[ObjectRef] = set()
        self._clock = clock
        self._tasks: list[asyncio.Task[None]] = []
        self._m = _Metrics(name, workers)

    def enqueue(self, ref: ObjectRef) -> None:
        if self._taken(ref):
            self.queue.add(ref)

    def enqueue_after(self, ref: ObjectRef, delay: float) -> None:
        if self._taken(ref):
            self.queue.add_after(ref, delay)

    def enqueue_soon(self, ref: ObjectRef, delay: float, *, urgent: bool = False) -> None:
        """Reconcile `ref` within `delay` seconds, together with whatever else changes meanwhile (add_soon);
        `urgent`: before the keys enqueued without it (WorkQueue's two priorities)."""
        if self._taken(ref):
            self.queue.add_soon(ref, delay, urgent=urgent)

    def _taken(self, ref: ObjectRef) -> bool:
        """The intake takes `ref` (always without one; a failing one takes it and logs)."""
        if self._intake is None:
            return True
        try:
            return self._intake(ref)
        except Exception as err:
            structlog.get_logger().error("intake check failed; enqueueing the key", controller=self.name,
                                         namespace=ref.namespace, name=ref.name, error=repr(err), exc_info=err)
            return True

    @property
    def in_flight(self) -> frozenset[ObjectRef]:
        """The keys being reconciled now (admitted and not yet done)."""
        return frozenset(self._in_flight)

    @property
    def running(self) -> bool:
        return any(not task.done() for task in self._tasks)

    async def run(self) -> None:
        """Run the workers until the queue is shut down; cancelling run() cancels them at once."""
        if self._tasks:
            raise RuntimeError(f"controller {self.name} was already started")
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._worker(), name=f"controller-{self.name}-worker-{i}")
                       for i in range(self.workers)]
        structlog.get_logger().info("controller started", controller=self.name, workers=self.workers)
        try:
            await asyncio.wait(self._tasks)
        finally:
            self.queue.shutdown_nowait()
            for task in self._tasks:
                task.cancel()
            await asyncio.wait(self._tasks)
            await self.queue.shutdown(drain=False)  # awaits the queue's delay task
        for task in self._tasks:
            if not task.cancelled() and (error := task.exception()) is not None:
                raise error

    async def shutdown(self, *, timeout: float) -> None:  # noqa: ASYNC109 - runs on the injected Clock
        """Stop intake; give in-flight reconciles `timeout` clock seconds, then cancel them."""
        self.queue.shutdown_nowait()
        tasks = [task for task in self._tasks if not task.done()]
        if await wait_all(self._clock, tasks, timeout):
            return
        structlog.get_logger().warning(
            "reconciles still running at shutdown deadline, cancelling", controller=self.name,
            timeout=timeout, in_flight=self.queue.processing,
        )
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)

    async def _worker(self) -> None:
        while True:
            try:
                ref = await self.queue.get()
            except ShutDown:
                return
            try:
                if self._admitted(ref):
                    self._in_flight.add(ref)
                    await self._reconcile_one(ref)
            finally:
                self._in_flight.discard(ref)
                self.queue.done(ref)
            # A pass over cached objects that writes nothing never suspends, and neither does a get() from a
            # non-empty queue: without this yield one worker would run the whole queue (1,000 databases after a
            # restart) while the health endpoints, watches and other workers wait (a 4 s /healthz at N=1,000).
            await asyncio.sleep(0)

    def _admitted(self, ref: ObjectRef) -> bool:
        """Whether `ref` may be reconciled now; a key not admitted is forgotten."""
        if self._admit is None:
            return True
        try:
            admitted = self._admit(ref)
        except Exception as err:
            self.queue.add_rate_limited(ref)
            structlog.get_logger().error("admit check failed; retrying the key later", controller=self.name,
                                         namespace=ref.namespace, name=ref.name, error=repr(err), exc_info=err)
            return False
        if not admitted:
            self.queue.forget(ref)
            structlog.get_logger().debug("key not admitted (its shard is not ours); skipped",
                                         controller=self.name, namespace=ref.namespace, name=ref.name)
        return admitted

    async def _reconcile_one(self, ref: ObjectRef) -> None:
        keys: dict[str, Any] = {"controller": self.name, "namespace": ref.namespace, "name": ref.name,
                                "reconcile_id": str(uuid.uuid4())}
        log = structlog.get_logger().bind(**keys)
        with structlog.contextvars.bound_contextvars(**keys):
            self._m.active.inc()
            started = self._clock.monotonic()
            try:
                if await self._attempt(ref, log):
                    self._m.time.observe(max(0.0, self._clock.monotonic() - started))
            finally:
                self._m.active.dec()

    async def _attempt(self, ref: ObjectRef, log: Any) -> bool:
        """One reconcile and its queue action; False if it was cut short by shutdown (not counted).

        CancelledError propagates when this worker itself is being cancelled.
        """
        try:
            result = await self._reconcile(ref)
        except asyncio.CancelledError as err:
            task = asyncio.current_task()
            if task is not None and task.cancelling() > 0:
                log.info("reconcile cancelled by shutdown")
                raise
            if self.queue.shutting_down:
                log.info("reconcile cancelled during shutdown")
                return False
            self._failed(ref, err, log)  # cancelled inside the reconciler: an ordinary failure
        except TerminalError as err:
            await self._terminal(ref, err, log)
        except NamespaceTerminating as err:
            self._namespace_terminating(ref, err, log)
        except Exception as err:
            self._failed(ref, err, log)
            await self._report(ref, err, log)
        else:
            self._succeeded(ref, result, log)
        return True

    def _failed(self, ref: ObjectRef, err: BaseException, log: Any) -> None:
        self.queue.add_rate_limited(ref)
        self._m.errors.inc()
        self._m.total["error"].inc()
        log.error("reconcile failed", error=repr(err), requeues=self.queue.num_requeues(ref), exc_info=err)

    async def _report(self, ref: ObjectRef, err: Exception, log: Any) -> None:
        """on_error once the key has failed error_threshold times in a row."""
        failures = self.queue.num_requeues(ref)
        if self._on_error is None or failures < self._error_threshold:
            return
        try:
            await self._on_error(ref, err, failures)
        except Exception as hook_err:
            log.error("on_error hook failed", error=repr(hook_err), exc_info=hook_err)

    def _namespace_terminating(self, ref: ObjectRef, err: NamespaceTerminating, log: Any) -> None:
        first = self.queue.num_requeues(ref) == 0
        self.queue.add_rate_limited(ref)
        self._m.total["requeue"].inc()
        (log.info if first else log.debug)("namespace is being terminated; looking again later", error=str(err))

    async def _terminal(self, ref: ObjectRef, err: TerminalError, log: Any) -> None:
        self.queue.forget(ref)
        self._m.terminal.inc()
        self._m.errors.inc()
        self._m.total["error"].inc()
        log.error("reconcile failed terminally, not requeued", error=str(err))
        if self._on_terminal is None:
            return
        try:
            await self._on_terminal(ref, err)
        except Exception as hook_err:
            log.error("on_terminal hook failed", error=repr(hook_err), exc_info=hook_err)

    def _succeeded(self, ref: ObjectRef, result: Result | None, log: Any) -> None:
        after = result.requeue_after if result is not None and (result.requeue_after or 0.0) > 0 else None
        if result is not None and result.requeue:
            self.queue.add_rate_limited(ref)
            if after is not None:
                self.queue.add_after(ref, after)  # the queue keeps the earlier of the two deadlines
            self._m.total["requeue"].inc()
            log.debug("reconcile done, rate-limited requeue", requeue_after=after)
        elif after is not None:
            self.queue.forget(ref)
            self.queue.add_after(ref, after)
            self._m.total["requeue_after"].inc()
            log.debug("reconcile done, requeue after", requeue_after=after)
        else:
            self.queue.forget(ref)
            self._m.total["success"].inc()
            log.debug("reconcile done")
