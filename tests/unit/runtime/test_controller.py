"""Controller: outcome mapping, metrics, logging, per-key serialisation, shutdown."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import structlog
from structlog.testing import capture_logs
from tests.support.aio import eventually

from sampledb_operator.kube.errors import NamespaceTerminating
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.result import Result, combine
from sampledb_operator.observability.metrics import REGISTRY
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.controller import Controller, Reconcile, TerminalError
from sampledb_operator.runtime.ratelimit import ItemExponentialFailureRateLimiter

_names = itertools.count()
A = ObjectRef("ns", "a")
B = ObjectRef("ns", "b")




def value(metric: str, controller: Controller, **labels: str) -> float:
    found = REGISTRY.get_sample_value(metric, {"controller": controller.name, **labels})
    assert found is not None, metric
    return found


def count_reaches(calls: list[ObjectRef], n: int) -> Callable[[], bool]:
    return lambda: len(calls) >= n


def results(controller: Controller) -> dict[str, float]:
    return {r: value("controller_runtime_reconcile_total", controller, result=r)
            for r in ("success", "error", "requeue", "requeue_after")}


class Harness:
    """A controller on a fake clock with its run() task, and a record of reconcile calls."""

    def __init__(self, reconcile: Reconcile, *, workers: int = 1,
                 on_terminal: Callable[[ObjectRef, TerminalError], Awaitable[None]] | None = None) -> None:
        self.clock = FakeClock()
        self.controller = Controller(
            f"ctl-{next(_names)}", reconcile, clock=self.clock, workers=workers,
            rate_limiter=ItemExponentialFailureRateLimiter[ObjectRef](1.0, 100.0), on_terminal=on_terminal,
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.controller.run())

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.wait({self.task})


@pytest.fixture
async def harnesses() -> AsyncIterator[list[Harness]]:
    made: list[Harness] = []
    yield made
    for harness in made:
        await harness.close()


def recorder(calls: list[ObjectRef], outcomes: list[object]) -> Reconcile:
    """A reconcile that records its calls and plays `outcomes` (a Result, None or an exception)."""

    async def reconcile(ref: ObjectRef) -> Result | None:
        calls.append(ref)
        outcome = outcomes.pop(0) if outcomes else None
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is None or isinstance(outcome, Result)
        return outcome

    return reconcile


async def test_success_forgets_the_key_and_counts_success(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    h = Harness(recorder(calls, [RuntimeError("boom"), None]))
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await eventually(lambda: len(calls) == 1 and h.controller.queue.processing == 0)
    assert h.controller.queue.num_requeues(A) == 1
    h.clock.advance(1.0)
    await eventually(lambda: len(calls) == 2 and h.controller.queue.processing == 0)
    assert h.controller.queue.num_requeues(A) == 0
    assert results(h.controller) == {"success": 1, "error": 1, "requeue": 0, "requeue_after": 0}


async def test_exception_requeues_rate_limited_with_growing_delay(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    h = Harness(recorder(calls, [RuntimeError(str(i)) for i in range(10)]))
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await eventually(lambda: len(calls) == 1)
    for expected_delay in (1.0, 2.0, 4.0):
        done = len(calls)
        await eventually(lambda: h.clock.next_deadline() is not None)
        h.clock.advance(expected_delay - 0.01)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(calls) == done, f"retried before {expected_delay} s"
        h.clock.advance(0.01)
        await eventually(count_reaches(calls, done + 1))
    await eventually(lambda: h.controller.queue.processing == 0)
    assert value("controller_runtime_reconcile_errors_total", h.controller) == 4
    assert results(h.controller)["error"] == 4
    assert value("workqueue_retries_total", h.controller, name=h.controller.name) == 4


async def test_terminal_error_is_not_requeued_and_calls_on_terminal(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    terminal: list[tuple[ObjectRef, str]] = []

    async def on_terminal(ref: ObjectRef, err: TerminalError) -> None:
        terminal.append((ref, str(err)))

    h = Harness(recorder(calls, [RuntimeError("transient"), TerminalError("bad spec")]), on_terminal=on_terminal)
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await eventually(lambda: len(calls) == 1 and h.controller.queue.processing == 0)
    h.clock.advance(1.0)
    await eventually(lambda: len(terminal) == 1 and h.controller.queue.processing == 0)
    assert terminal == [(A, "bad spec")]
    assert h.controller.queue.delayed == 0 and len(h.controller.queue) == 0
    assert h.controller.queue.num_requeues(A) == 0
    assert value("controller_runtime_terminal_reconcile_errors_total", h.controller) == 1
    assert value("controller_runtime_reconcile_errors_total", h.controller) == 2
    assert results(h.controller)["error"] == 2
    h.clock.advance(1000.0)
    await asyncio.sleep(0)
    assert len(calls) == 2


async def test_failing_on_terminal_hook_does_not_stop_the_worker(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []

    async def on_terminal(ref: ObjectRef, err: TerminalError) -> None:
        raise RuntimeError("event sink down")

    h = Harness(recorder(calls, [TerminalError("x"), None]), on_terminal=on_terminal)
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    h.controller.enqueue(B)
    await eventually(lambda: len(calls) == 2 and h.controller.queue.processing == 0)
    assert results(h.controller)["success"] == 1


async def test_requeue_after_forgets_and_adds_after_the_delay(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    h = Harness(recorder(calls, [RuntimeError("first"), Result(requeue_after=30.0), None]))
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await eventually(lambda: len(calls) == 1 and h.controller.queue.processing == 0)
    h.clock.advance(1.0)
    await eventually(lambda: len(calls) == 2 and h.controller.queue.processing == 0)
    assert h.controller.queue.num_requeues(A) == 0
    assert h.controller.queue.delayed == 1
    await eventually(lambda: h.clock.next_deadline() == 31.0)
    h.clock.advance(29.0)
    await asyncio.sleep(0)
    assert len(calls) == 2
    h.clock.advance(1.0)
    await eventually(lambda: len(calls) == 3 and h.controller.queue.processing == 0)
    assert results(h.controller) == {"success": 1, "error": 1, "requeue": 0, "requeue_after": 1}


async def test_result_requeue_is_a_rate_limited_requeue(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    h = Harness(recorder(calls, [Result(requeue=True), Result(requeue_after=0.0)]))
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await eventually(lambda: len(calls) == 1 and h.controller.queue.processing == 0)
    assert h.controller.queue.num_requeues(A) == 1
    h.clock.advance(1.0)
    await eventually(lambda: len(calls) == 2 and h.controller.queue.processing == 0)
    assert results(h.controller) == {"success": 1, "error": 0, "requeue": 1, "requeue_after": 0}


async def test_requeue_with_requeue_after_comes_back_at_whichever_is_earlier(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    outcomes: list[object] = [Result(requeue_after=30.0, requeue=True), Result(requeue_after=0.5, requeue=True)]
    h = Harness(recorder(calls, outcomes))
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await eventually(lambda: len(calls) == 1 and h.controller.queue.processing == 0)
    await eventually(lambda: h.clock.next_deadline() == 1.0)  # the backoff (1 s) is before 30 s
    h.clock.advance(1.0)
    await eventually(lambda: len(calls) == 2 and h.controller.queue.processing == 0)
    await eventually(lambda: h.clock.next_deadline() == 1.5)  # 0.5 s is before the backoff (now 2 s)
    assert h.controller.queue.num_requeues(A) == 2
    h.clock.advance(0.5)
    await eventually(lambda: len(calls) == 3 and h.controller.queue.processing == 0)
    assert results(h.controller) == {"success": 1, "error": 0, "requeue": 2, "requeue_after": 0}


def test_combined_results_keep_the_earliest_time_and_any_requeue() -> None:
    assert combine() is None
    assert combine(None, Result(), Result(requeue_after=0.0)) is None
    assert combine(Result(requeue_after=300.0), None, Result(requeue_after=60.0)) == Result(requeue_after=60.0)
    assert combine(Result(requeue=True), Result(requeue_after=3600.0), Result(requeue_after=60.0)) == \
        Result(requeue_after=60.0, requeue=True)
    assert combine(Result(requeue=True), None) == Result(requeue=True)


async def test_a_namespace_being_terminated_is_a_quiet_requeue_not_an_error(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    refused = NamespaceTerminating(403, "Forbidden", "unable to create new content in namespace ns because it is"
                                   " being terminated")
    h = Harness(recorder(calls, [refused, refused]))
    harnesses.append(h)
    h.start()
    with capture_logs() as logs:
        h.controller.enqueue(A)
        await eventually(lambda: len(calls) == 1 and h.controller.queue.processing == 0)
        h.clock.advance(1.0)
        await eventually(lambda: len(calls) == 2 and h.controller.queue.processing == 0)
    assert h.controller.queue.num_requeues(A) == 2  # looked at again with backoff until the object is gone
    assert results(h.controller) == {"success": 0, "error": 0, "requeue": 2, "requeue_after": 0}
    assert value("controller_runtime_reconcile_errors_total", h.controller) == 0
    quiet = [e for e in logs if "terminated" in e["event"]]
    assert [e["log_level"] for e in quiet] == ["info", "debug"]
    assert not any(e["log_level"] in ("warning", "error") or "exc_info" in e for e in logs)


async def test_active_workers_and_reconcile_time_follow_the_reconcile(harnesses: list[Harness]) -> None:
    gate = asyncio.Event()
    started = asyncio.Event()

    async def reconcile(ref: ObjectRef) -> None:
        started.set()
        await gate.wait()

    h = Harness(reconcile, workers=3)
    harnesses.append(h)
    assert value("controller_runtime_max_concurrent_reconciles", h.controller) == 3
    h.start()
    h.controller.enqueue(A)
    await asyncio.wait_for(started.wait(), 1.0)
    assert value("controller_runtime_active_workers", h.controller) == 1
    h.clock.advance(2.5)
    gate.set()
    await eventually(lambda: h.controller.queue.processing == 0)
    assert value("controller_runtime_active_workers", h.controller) == 0
    assert value("controller_runtime_reconcile_time_seconds_sum", h.controller) == 2.5
    assert value("controller_runtime_reconcile_time_seconds_count", h.controller) == 1


async def test_reconcile_is_never_called_concurrently_for_one_key(harnesses: list[Harness]) -> None:
    rng = random.Random(7)
    keys = [ObjectRef("ns", f"k{i}") for i in range(3)]
    in_flight: set[ObjectRef] = set()
    overlaps: list[ObjectRef] = []
    calls: list[ObjectRef] = []
    controller_box: list[Controller] = []

    async def reconcile(ref: ObjectRef) -> None:
        if ref in in_flight:
            overlaps.append(ref)
        in_flight.add(ref)
        calls.append(ref)
        for _ in range(rng.randint(1, 3)):
            await asyncio.sleep(0)  # let other workers interleave
            if len(calls) < 300:
                controller_box[0].enqueue(rng.choice(keys))  # including itself, while in flight
        in_flight.discard(ref)

    h = Harness(reconcile, workers=4)
    harnesses.append(h)
    controller_box.append(h.controller)
    h.start()
    for key in keys:
        h.controller.enqueue(key)
    await eventually(lambda: len(calls) >= 300 and h.controller.queue.processing == 0
                     and len(h.controller.queue) == 0)
    assert overlaps == []
    assert value("controller_runtime_active_workers", h.controller) == 0


async def test_key_added_while_reconciling_is_reconciled_again_after(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    gate = asyncio.Event()

    async def reconcile(ref: ObjectRef) -> None:
        calls.append(ref)
        if len(calls) == 1:
            await gate.wait()

    h = Harness(reconcile, workers=2)
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await eventually(lambda: len(calls) == 1)
    h.controller.enqueue(A)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(calls) == 1  # the idle second worker must not take A
    gate.set()
    await eventually(lambda: len(calls) == 2)


async def test_reconcile_logs_and_contextvars_carry_the_keys(harnesses: list[Harness]) -> None:
    seen_context: list[dict[str, object]] = []

    async def reconcile(ref: ObjectRef) -> None:
        seen_context.append(structlog.contextvars.get_contextvars())
        raise RuntimeError("boom")

    h = Harness(reconcile)
    harnesses.append(h)
    with capture_logs() as logs:
        h.start()
        h.controller.enqueue(A)
        await eventually(lambda: any(e["event"] == "reconcile failed" for e in logs))
    failure = next(e for e in logs if e["event"] == "reconcile failed")
    assert failure["controller"] == h.controller.name
    assert (failure["namespace"], failure["name"]) == ("ns", "a")
    assert len(str(failure["reconcile_id"])) == 36
    assert failure["log_level"] == "error"
    assert seen_context[0]["reconcile_id"] == failure["reconcile_id"]
    assert seen_context[0]["name"] == "a"
    assert "reconcile_id" not in structlog.contextvars.get_contextvars()


async def test_shutdown_lets_in_flight_reconcile_finish_and_takes_no_new_work(harnesses: list[Harness]) -> None:
    gate = asyncio.Event()
    calls: list[ObjectRef] = []

    async def reconcile(ref: ObjectRef) -> None:
        calls.append(ref)
        await gate.wait()

    h = Harness(reconcile)
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    h.controller.enqueue(B)
    await eventually(lambda: len(calls) == 1)
    shutdown = asyncio.create_task(h.controller.shutdown(timeout=10.0))
    await eventually(lambda: h.clock.pending_sleepers() == 1)
    h.clock.advance(9.0)
    gate.set()
    await asyncio.wait_for(shutdown, 1.0)
    assert h.task is not None
    await asyncio.wait_for(h.task, 1.0)
    assert calls == [A]  # B was waiting: left for the next run
    assert results(h.controller)["success"] == 1
    h.controller.enqueue(B)  # ignored after shutdown
    assert len(h.controller.queue) == 1


async def test_shutdown_cancels_reconciles_after_the_deadline_without_counting_errors(
    harnesses: list[Harness],
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def reconcile(ref: ObjectRef) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    h = Harness(reconcile, workers=2)
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await asyncio.wait_for(started.wait(), 1.0)
    shutdown = asyncio.create_task(h.controller.shutdown(timeout=10.0))
    await eventually(lambda: h.clock.pending_sleepers() == 1)
    h.clock.advance(9.9)
    await asyncio.sleep(0)
    assert not cancelled.is_set()
    h.clock.advance(0.1)
    await asyncio.wait_for(shutdown, 1.0)
    assert cancelled.is_set()
    assert h.task is not None
    await asyncio.wait_for(h.task, 1.0)
    assert value("controller_runtime_reconcile_errors_total", h.controller) == 0
    assert sum(results(h.controller).values()) == 0
    assert value("controller_runtime_active_workers", h.controller) == 0
    assert h.controller.queue.processing == 0


async def test_cancelled_error_from_reconcile_during_shutdown_is_not_an_error(harnesses: list[Harness]) -> None:
    gate = asyncio.Event()

    async def reconcile(ref: ObjectRef) -> None:
        await gate.wait()
        raise asyncio.CancelledError  # e.g. a client closed under it by the shutdown

    h = Harness(reconcile)
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await eventually(lambda: h.controller.queue.processing == 1)
    shutdown = asyncio.create_task(h.controller.shutdown(timeout=10.0))
    await eventually(lambda: h.controller.queue.shutting_down)
    gate.set()
    await asyncio.wait_for(shutdown, 1.0)
    assert value("controller_runtime_reconcile_errors_total", h.controller) == 0
    assert sum(results(h.controller).values()) == 0


async def test_cancelled_error_from_reconcile_outside_shutdown_is_an_error(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    h = Harness(recorder(calls, [asyncio.CancelledError(), None]))
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await eventually(lambda: len(calls) == 1 and h.controller.queue.processing == 0)
    assert results(h.controller)["error"] == 1
    h.clock.advance(1.0)
    await eventually(lambda: len(calls) == 2 and h.controller.queue.processing == 0)
    assert results(h.controller)["success"] == 1


async def test_cancelling_run_stops_workers_at_once(harnesses: list[Harness]) -> None:
    started = asyncio.Event()

    async def reconcile(ref: ObjectRef) -> None:
        started.set()
        await asyncio.Event().wait()

    h = Harness(reconcile, workers=2)
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    await asyncio.wait_for(started.wait(), 1.0)
    assert h.task is not None
    h.task.cancel()
    await asyncio.wait({h.task})
    assert not h.controller.running
    assert h.controller.queue.shutting_down
    assert value("controller_runtime_reconcile_errors_total", h.controller) == 0


async def test_run_twice_and_zero_workers_are_refused(harnesses: list[Harness]) -> None:
    h = Harness(recorder([], []))
    harnesses.append(h)
    h.start()
    await eventually(lambda: h.controller.running)
    with pytest.raises(RuntimeError):
        await h.controller.run()
    with pytest.raises(ValueError):
        Controller("zero", recorder([], []), clock=FakeClock(), workers=0)


async def test_on_error_is_called_once_a_key_has_failed_threshold_times_in_a_row(harnesses: list[Harness]) -> None:
    calls: list[ObjectRef] = []
    reported: list[tuple[ObjectRef, str, int]] = []

    async def on_error(ref: ObjectRef, err: Exception, failures: int) -> None:
        reported.append((ref, str(err), failures))

    outcomes: list[object] = [RuntimeError("403 a"), RuntimeError("403 b"), RuntimeError("403 c"), None,
                              RuntimeError("again")]
    h = Harness(recorder(calls, outcomes))
    h.controller = Controller(f"ctl-{next(_names)}", recorder(calls, outcomes), clock=h.clock,
                              rate_limiter=ItemExponentialFailureRateLimiter[ObjectRef](1.0, 100.0),
                              on_error=on_error, error_threshold=3)
    harnesses.append(h)
    h.start()
    h.controller.enqueue(A)
    for n, delay in ((1, 1.0), (2, 2.0)):
        await eventually(lambda n=n: len(calls) == n and h.controller.queue.processing == 0)  # type: ignore[misc]
        assert reported == []
        h.clock.advance(delay)
    await eventually(lambda: len(calls) == 3 and h.controller.queue.processing == 0)
    assert reported == [(A, "403 c", 3)]
    h.clock.advance(4.0)
    await eventually(lambda: len(calls) == 4 and h.controller.queue.processing == 0)  # a success forgets
    h.controller.enqueue(A)
    await eventually(lambda: len(calls) == 5 and h.controller.queue.processing == 0)
    assert len(reported) == 1  # one failure after a success is not persistent


async def test_a_busy_worker_lets_other_tasks_run_between_passes(harnesses: list[Harness]) -> None:
    """Passes that never suspend (everything cached, nothing written) over a full queue: the event loop still runs
    other tasks (the health endpoints, the watches) between two passes, not only once the queue is empty."""
    calls: list[ObjectRef] = []
    h = Harness(recorder(calls, []))
    harnesses.append(h)
    keys = [ObjectRef("ns", f"db-{i}") for i in range(200)]
    for key in keys:
        h.controller.enqueue(key)
    seen_at: list[int] = []

    async def probe() -> None:  # a /healthz request: it needs a few turns of the loop
        for _ in range(3):
            await asyncio.sleep(0)
        seen_at.append(len(calls))

    h.start()
    await eventually(lambda: len(calls) >= 1)
    answered = asyncio.create_task(probe())
    await eventually(lambda: len(calls) == len(keys))
    await answered
    assert seen_at and seen_at[0] < len(keys) // 2, seen_at
