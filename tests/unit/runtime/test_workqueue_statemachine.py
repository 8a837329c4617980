"""Hypothesis state machine over WorkQueue: the client-go invariants under arbitrary interleavings.

Rules add, delay, advance the fake clock, hand items out and finish them in any order (several items
in progress at once stand for concurrent workers). Checked: no item is handed out while it is in
progress; an item added after its processing began is handed out again after done(); nothing added is
lost; nothing is handed out twice without an add in between; distinct items come out in FIFO order.
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
from sampledb_operator.runtime.workqueue import ShutDown, WorkQueue

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
        self.waiting: list[str] = []  # expected FIFO of items to be handed out
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.delayed: dict[str, tuple[float, int]] = {}  # item -> (earliest deadline, add order)
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

    def model_add(self, item: str) -> None:
        self.adds_since_get[item] = self.adds_since_get.get(item, 0) + 1
        if item in self.processing:
            self.added_during_processing.add(item)
        if item in self.dirty:
            return
        self.dirty.add(item)
        if item not in self.processing:
            self.waiting.append(item)

    # -- rules --------------------------------------------------------------------------------

    @rule(item=KEYS)
    def add(self, item: str) -> None:
        self.call(lambda: self.queue.add(item))
        self.model_add(item)

    @rule(item=KEYS, delay=DELAYS)
    def add_after(self, item: str, delay: float) -> None:
        self.call(lambda: self.queue.add_after(item, delay))
        deadline = self.clock.monotonic() + delay
        if item not in self.delayed or deadline < self.delayed[item][0]:
            self.delayed[item] = (deadline, next(self.seq))

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.5]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        now = self.clock.monotonic()
        due = sorted((entry, item) for item, entry in self.delayed.items() if entry[0] <= now)
        for _, item in due:
            del self.delayed[item]
        expected_delayed = len(self.delayed)

        async def settle() -> None:
            while True:
                if self.queue.delayed == expected_delayed:
                    return
                await asyncio.sleep(0)

        self.run(settle)
        # due items fire in deadline order; ties in the order their deadline was set
        for _, item in due:
            self.model_add(item)

    @precondition(lambda self: bool(self.waiting))
    @rule()
    def get(self) -> None:
        item = self.run(self.queue.get)
        assert item not in self.processing, f"{item} handed out while in progress"
        assert self.adds_since_get.get(item, 0) > 0, f"{item} handed out twice without an add"
        assert item == self.waiting[0], f"FIFO broken: got {item}, expected {self.waiting[0]}"
        self.waiting.pop(0)
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
            self.waiting.append(item)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def waiting_count_matches(self) -> None:
        assert len(self.queue) == len(self.waiting)
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
                    self.waiting.append(item)
            drained: list[str] = []
            while len(self.queue):
                item = self.run(self.queue.get)
                drained.append(item)
                self.queue.done(item)
            assert drained == self.waiting, "items lost or duplicated"
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
