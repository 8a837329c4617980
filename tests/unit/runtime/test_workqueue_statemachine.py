"""Hypothesis state machine over WorkQueue: the client-go invariants under arbitrary interleavings.

Rules add (plain or urgent), delay, coalesce (add_soon), advance the fake clock, hand items out and finish
them in any order (several items in progress at once stand for concurrent workers). Checked: no item is
handed out while it is in progress; an item added after its processing began is handed out again after
done(); nothing added is lost; nothing is handed out twice without an add in between; items come out in
FIFO order within a priority, urgent ones first but at most URGENT_STREAK in a row while plain ones wait.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.ratelimit import ItemExponentialFailureRateLimiter
from sampledb_operator.runtime.workqueue import URGENT_STREAK, ShutDown, WorkQueue

KEYS = st.sampled_from("abcdef")
DELAYS = st.sampled_from([0.5, 1.0, 2.0, 3.0])
_names = itertools.count()
T = TypeVar("T")


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.queue = WorkQueue[str](
            f"sm-{next(_names)}", clock=self.clock,
            rate_limiter=ItemExponentialFailureRateLimiter[str](1.0, 8.0), controller="sm",
        )
        # the model (a reference implementation of the invariants)
        self.waiting: list[str] = []  # expected FIFO of plain items to be handed out
        self.urgent: list[str] = []  # expected FIFO of urgent items
        self.streak = 0  # urgent items handed out in a row while plain ones waited
        self.urgent_after_done: set[str] = set()
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.delayed: dict[str, tuple[float, int, bool]] = {}  # item -> (earliest deadline, add order, urgent)
        self.seq = itertools.count()
        self.adds_since_get: dict[str, int] = {}
        self.added_during_processing: set[str] = set()

    # -- helpers ------------------------------------------------------------------------------

    def run(self, coro_fn: Callable[[], Awaitable[T]]) -> T:
        """Run a coroutine of the queue inside the loop, bounded in real time."""

        async def wrapper() -> T:
            return await asyncio.wait_for(coro_fn(), 2.0)

        return self.loop.run_until_complete(wrapper())

    def call(self, fn: Callable[[], None]) -> None:
        """Run a synchronous queue operation inside the loop (the queue belongs to one loop)."""

        async def wrapper() -> None:
            fn()

        self.loop.run_until_complete(wrapper())

    def model_urgent(self, item: str) -> None:
        """A dirty item becomes urgent."""
        if item in self.waiting:
            self.waiting.remove(item)
            self.urgent.append(item)
        elif item in self.processing:
            self.urgent_after_done.add(item)

    def model_add(self, item: str, urgent: bool = False) -> None:
        self.adds_since_get[item] = self.adds_since_get.get(item, 0) + 1
        if item in self.processing:
            self.added_during_processing.add(item)
        if item in self.dirty:
            if urgent:
                self.model_urgent(item)
            return
        self.dirty.add(item)
        if item in self.processing:
            if urgent:
                self.urgent_after_done.add(item)
            return
        (self.urgent if urgent else self.waiting).append(item)

    def model_add_after(self, item: str, delay: float, urgent: bool) -> None:
        deadline = self.clock.monotonic() + delay
        current = self.delayed.get(item)
        if current is None or deadline < current[0]:
            self.delayed[item] = (deadline, next(self.seq), urgent or (current is not None and current[2]))
        elif urgent:
            self.delayed[item] = (current[0], current[1], True)

    def model_next(self) -> str:
        """The item get() must hand out, taken off the model."""
        take_urgent = bool(self.urgent) and (not self.waiting or self.streak < URGENT_STREAK)
        self.streak = self.streak + 1 if take_urgent and self.waiting else 0
        return (self.urgent if take_urgent else self.waiting).pop(0)

    # -- rules --------------------------------------------------------------------------------

    @rule(item=KEYS, urgent=st.booleans())
    def add(self, item: str, urgent: bool) -> None:
        self.call(lambda: self.queue.add(item, urgent=urgent))
        self.model_add(item, urgent)

    @rule(item=KEYS, delay=DELAYS, urgent=st.booleans())
    def add_after(self, item: str, delay: float, urgent: bool) -> None:
        self.call(lambda: self.queue.add_after(item, delay, urgent=urgent))
        self.model_add_after(item, delay, urgent)

    @rule(item=KEYS, delay=DELAYS, urgent=st.booleans())
    def add_soon(self, item: str, delay: float, urgent: bool) -> None:
        self.call(lambda: self.queue.add_soon(item, delay, urgent=urgent))
        if item in self.dirty:
            if urgent:
                self.model_urgent(item)
        else:
            self.model_add_after(item, delay, urgent)

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.5]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        now = self.clock.monotonic()
        due = sorted((entry[:2], item, entry[2]) for item, entry in self.delayed.items() if entry[0] <= now)
        for _, item, _urgent in due:
            del self.delayed[item]
        expected_delayed = len(self.delayed)

        async def settle() -> None:
            while True:
                if self.queue.delayed == expected_delayed:
                    return
                await asyncio.sleep(0)

        self.run(settle)
        # due items fire in deadline order; ties in the order their deadline was set
        for _, item, urgent in due:
            self.model_add(item, urgent)

    @precondition(lambda self: bool(self.waiting) or bool(self.urgent))
    @rule()
    def get(self) -> None:
        item = self.run(self.queue.get)
        assert item not in self.processing, f"{item} handed out while in progress"
        assert self.adds_since_get.get(item, 0) > 0, f"{item} handed out twice without an add"
        expected = self.model_next()
        assert item == expected, f"order broken: got {item}, expected {expected}"
        self.dirty.discard(item)
        self.processing.add(item)
        self.adds_since_get[item] = 0
        self.added_during_processing.discard(item)

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        item = data.draw(st.sampled_from(sorted(self.processing)))
        self.call(lambda: self.queue.done(item))
        self.processing.discard(item)
        if item in self.added_during_processing:
            assert item in self.dirty
        if item in self.dirty:
            (self.urgent if item in self.urgent_after_done else self.waiting).append(item)
        self.urgent_after_done.discard(item)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def waiting_count_matches(self) -> None:
        assert len(self.queue) == len(self.waiting) + len(self.urgent)
        assert self.queue.processing == len(self.processing)
        assert self.queue.delayed == len(self.delayed)

    @invariant()
    def added_during_processing_is_pending_again(self) -> None:
        for item in self.added_during_processing:
            assert item in self.dirty

    def teardown(self) -> None:
        """Finish everything: every item still owed must come out, each exactly once, then ShutDown."""
        try:
            for item in sorted(self.processing):
                self.queue.done(item)
                if item in self.dirty:
                    (self.urgent if item in self.urgent_after_done else self.waiting).append(item)
            drained: list[str] = []
            expected: list[str] = []
            while len(self.queue):
                item = self.run(self.queue.get)
                drained.append(item)
                expected.append(self.model_next())
                self.queue.done(item)
            assert drained == expected and not self.waiting and not self.urgent, "items lost or duplicated"
            self.run(lambda: self.queue.shutdown(drain=True, timeout=1.0))

            async def after_shutdown() -> None:
                try:
                    await self.queue.get()
                except ShutDown:
                    return
                raise AssertionError("get() after a drained shutdown must raise ShutDown")

            self.run(after_shutdown)
        finally:
            self.loop.run_until_complete(self.queue.shutdown(drain=False))
            self.loop.close()


QueueMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestWorkQueueStateMachine = QueueMachine.TestCase
