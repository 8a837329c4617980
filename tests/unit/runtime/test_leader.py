"""Leader election against an in-memory Lease store with resourceVersion conflicts and fake clocks."""

from __future__ import annotations

import asyncio
import copy
import random
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from sampledb_operator.kube.errors import Conflict, NotFound, ServerError
from sampledb_operator.observability import metrics
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.leader import LeaderElector
from sampledb_operator.runtime.lease import micro_time

NS = "sampledb-system"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class FakeLeases:
    """get/create/replace of Leases with the API server's optimistic concurrency."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._rv = 0
        self.fail: Exception | None = None      # raised by every call while set
        self.hang = False                       # every call waits forever while set
        self.hold_replaces = False              # replaces wait for `release_replaces()`
        self.waiting_replaces = 0
        self._gate = asyncio.Event()
        self.writes: list[dict[str, Any]] = []

    async def _enter(self) -> None:
        await asyncio.sleep(0)
        if self.hang:
            await asyncio.Event().wait()
        if self.fail is not None:
            raise self.fail

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self._rv)
        self.objects[(stored["metadata"]["namespace"], stored["metadata"]["name"])] = stored
        self.writes.append(copy.deepcopy(stored))
        return copy.deepcopy(stored)

    async def get(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        await self._enter()
        found = self.objects.get((namespace or "", name))
        if found is None:
            raise NotFound(404, "NotFound", f"leases {name!r} not found")
        return copy.deepcopy(found)

    async def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        await self._enter()
        key = (namespace or obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.objects:
            raise Conflict(409, "AlreadyExists", "already exists")
        assert "resourceVersion" not in obj["metadata"]
        return self._store(obj)

    async def replace(self, obj: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        await self._enter()
        if self.hold_replaces:
            self.waiting_replaces += 1
            await self._gate.wait()
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        current = self.objects.get(key)
        if current is None:
            raise NotFound(404, "NotFound", "gone")
        if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        return self._store(obj)

    def release_replaces(self) -> None:
        self.hold_replaces = False
        self._gate.set()

    def spec(self, name: str) -> dict[str, Any]:
        return dict(self.objects[(NS, name)]["spec"])


class NoJitter(random.Random):
    def random(self) -> float:
        return 0.0


async def settle(turns: int = 200) -> None:
    """Let every task run until it blocks again (all I/O here is in memory: no real time passes)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def advance(clocks: list[FakeClock], seconds: float, step: float = 0.5) -> None:
    """Move the clocks forward together in small steps, letting tasks react after each."""
    await settle()                               # tasks just created start (and sleep) at the current time
    moved = 0.0
    while moved < seconds - 1e-9:
        delta = min(step, seconds - moved)
        for clock in clocks:
            clock.advance(delta)
        moved += delta
        await settle()


async def until(condition: Callable[[], bool], clocks: list[FakeClock], limit: float) -> float:
    """Advance the clocks until `condition` holds; return the time it took (fail past `limit`)."""
    waited = 0.0
    while not condition():
        if waited >= limit:
            raise AssertionError(f"condition not reached within {limit}s")
        await advance(clocks, 0.5)
        waited += 0.5
    return waited


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


Make = Callable[..., LeaderElector]


@pytest.fixture
def make(leases: FakeLeases, request: pytest.FixtureRequest) -> Make:
    lease_name = f"lease-{request.node.name[:40]}".replace("_", "-")

    def _make(identity: str, clock: FakeClock, **kw: Any) -> LeaderElector:
        return LeaderElector(leases, name=lease_name, namespace=NS, identity=identity, clock=clock,
                             rng=NoJitter(), **kw)

    return _make


def master_status(elector: LeaderElector) -> float | None:
    return metrics.REGISTRY.get_sample_value("leader_election_master_status", {"name": elector.name})


async def run(tasks: list[asyncio.Task[Any]], body: Callable[[], Awaitable[None]]) -> None:
    try:
        await body()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_single_candidate_creates_the_lease_and_leads(leases: FakeLeases, make: Make) -> None:
    clock = FakeClock(wall_start=datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC))
    elector = make("a", clock)
    assert master_status(elector) == 0
    await asyncio.wait_for(elector.acquire(), timeout=5)
    assert elector.is_leader
    assert master_status(elector) == 1
    spec = leases.spec(elector.name)
    stamp = "2026-01-02T03:04:05.123456Z"
    assert spec == {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": stamp,
                    "renewTime": stamp, "leaseTransitions": 0}


def test_micro_time_format() -> None:
    assert micro_time(datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC)) == "2026-01-02T03:04:05.120000Z"
    assert MICRO.match(micro_time(datetime.now(UTC)))


async def test_leader_renews_every_retry_period_keeping_acquire_time(leases: FakeLeases, make: Make) -> None:
    clock = FakeClock()
    leader = make("a", clock)
    await leader.acquire()
    first = leases.spec(leader.name)
    holding = asyncio.create_task(leader.hold())
    await run([holding], lambda: advance([clock], 2.0))
    renewed = leases.spec(leader.name)
    assert renewed["renewTime"] > first["renewTime"]
    assert renewed["acquireTime"] == first["acquireTime"]
    assert renewed["leaseTransitions"] == 0 and renewed["holderIdentity"] == "a"
    assert MICRO.match(renewed["renewTime"])


async def test_standby_waits_while_the_leader_renews(leases: FakeLeases, make: Make) -> None:
    clock = FakeClock()
    leader, standby = make("a", clock), make("b", clock)
    await leader.acquire()
    holding = asyncio.create_task(leader.hold())
    waiting = asyncio.create_task(standby.acquire())

    async def body() -> None:
        await advance([clock], 60.0)
        assert not waiting.done() and not standby.is_leader
        assert leader.is_leader and not holding.done()
        assert leases.spec(leader.name)["holderIdentity"] == "a"
        assert standby.observed_holder == "a"
        assert master_status(leader) == 1

    await run([holding, waiting], body)


async def test_standby_takes_over_after_expiry_measured_on_its_own_clock(
    leases: FakeLeases, make: Make
) -> None:
    # The leader's wall clock is years behind the standby's: renewTime would look long expired to
    # the standby if it trusted it. It must wait lease_duration of its own monotonic time instead.
    leader_clock = FakeClock(wall_start=datetime(2020, 1, 1, tzinfo=UTC))
    standby_clock = FakeClock(start=5000.0, wall_start=datetime(2030, 1, 1, tzinfo=UTC))
    leader, standby = make("a", leader_clock), make("b", standby_clock)
    await leader.acquire()                      # and then it dies: no renewals
    waiting = asyncio.create_task(standby.acquire())

    async def body() -> None:
        await settle()
        await advance([standby_clock], 14.0)
        assert not waiting.done(), "took over before lease_duration elapsed on its own clock"
        waited = 14.0 + await until(waiting.done, [standby_clock], limit=10.0)
        assert 15.0 <= waited <= 15.0 + 2.0 * 2.2   # at the first retry after expiry
        assert standby.is_leader
        spec = leases.spec(standby.name)
        assert spec["holderIdentity"] == "b"
        assert spec["leaseTransitions"] == 1
        assert spec["acquireTime"].startswith("2030-01-01")

    await run([waiting], body)


async def test_simultaneous_takeover_conflict_leaves_exactly_one_leader(
    leases: FakeLeases, make: Make
) -> None:
    clock = FakeClock()
    old = make("old", clock)
    await old.acquire()                          # then dies
    b, c = make("b", clock), make("c", clock)
    tasks = {asyncio.create_task(b.acquire()): b, asyncio.create_task(c.acquire()): c}

    async def body() -> None:
        await settle()
        leases.hold_replaces = True
        await advance([clock], 16.0)             # both see the lease expired and try to replace it
        assert leases.waiting_replaces == 2
        leases.release_replaces()
        await settle()
        done = [tasks[t] for t in tasks if t.done()]
        assert len(done) == 1
        winner = done[0]
        loser = c if winner is b else b
        assert [e.is_leader for e in (winner, loser)] == [True, False]
        assert leases.spec(winner.name)["holderIdentity"] == winner.identity
        holding = asyncio.create_task(winner.hold())
        try:
            await advance([clock], 40.0)         # the winner renews: the loser stays standby
            assert not loser.is_leader and winner.is_leader
        finally:
            holding.cancel()
            await asyncio.gather(holding, return_exceptions=True)

    await run(list(tasks), body)


async def test_hold_returns_when_renewals_fail_beyond_renew_deadline(leases: FakeLeases, make: Make) -> None:
    clock = FakeClock()
    leader = make("a", clock)
    await leader.acquire()
    holding = asyncio.create_task(leader.hold())

    async def body() -> None:
        await settle()
        leases.fail = ServerError(500, "InternalError", "etcd unavailable")
        await advance([clock], 11.5)             # renewal cycle starts at 2 s, gives up at 12 s
        assert not holding.done() and leader.is_leader
        await advance([clock], 1.0)
        assert holding.done() and holding.exception() is None
        assert not leader.is_leader
        assert master_status(leader) == 0

    await run([holding], body)


async def test_hold_returns_when_a_renewal_hangs_past_renew_deadline(leases: FakeLeases, make: Make) -> None:
    clock = FakeClock()
    leader = make("a", clock)
    await leader.acquire()
    holding = asyncio.create_task(leader.hold())

    async def body() -> None:
        await settle()
        leases.hang = True
        await advance([clock], 11.5)
        assert not holding.done()
        await advance([clock], 1.0)
        assert holding.done() and not leader.is_leader

    await run([holding], body)


async def test_transient_renewal_failures_within_the_deadline_keep_leadership(
    leases: FakeLeases, make: Make
) -> None:
    clock = FakeClock()
    leader = make("a", clock)
    await leader.acquire()
    holding = asyncio.create_task(leader.hold())

    async def body() -> None:
        await settle()
        leases.fail = ServerError(503, "ServiceUnavailable", "")
        await advance([clock], 8.0)
        leases.fail = None
        await advance([clock], 30.0)
        assert leader.is_leader and not holding.done()

    await run([holding], body)


async def test_leadership_is_lost_at_once_when_another_holder_appears(leases: FakeLeases, make: Make) -> None:
    clock = FakeClock()
    leader = make("a", clock)
    await leader.acquire()
    holding = asyncio.create_task(leader.hold())

    async def body() -> None:
        await settle()
        stored = leases.objects[(NS, leader.name)]
        stored["spec"]["holderIdentity"] = "intruder"
        stored["metadata"]["resourceVersion"] = "999"
        await advance([clock], 2.0)              # first renewal: conflict, read, another valid holder
        assert holding.done() and not leader.is_leader
        assert leader.observed_holder == "intruder"

    await run([holding], body)


async def test_release_lets_the_standby_acquire_without_waiting_for_expiry(
    leases: FakeLeases, make: Make
) -> None:
    clock = FakeClock()
    leader, standby = make("a", clock), make("b", clock)
    await leader.acquire()
    holding = asyncio.create_task(leader.hold())
    waiting = asyncio.create_task(standby.acquire())

    async def body() -> None:
        await advance([clock], 5.0)
        holding.cancel()
        await asyncio.gather(holding, return_exceptions=True)
        await leader.release()
        assert not leader.is_leader and master_status(leader) == 0
        released = leases.spec(leader.name)
        assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1
        waited = await until(waiting.done, [clock], limit=15.0)
        assert waited <= 2.0 * 2.2               # the next retry, not lease_duration
        assert standby.is_leader
        assert leases.spec(standby.name)["holderIdentity"] == "b"
        assert leases.spec(standby.name)["leaseTransitions"] == 1

    await run([holding, waiting], body)


async def test_release_when_not_leader_writes_nothing(leases: FakeLeases, make: Make) -> None:
    elector = make("a", FakeClock())
    await elector.release()
    assert leases.writes == []


async def test_release_failure_is_logged_not_raised(leases: FakeLeases, make: Make) -> None:
    elector = make("a", FakeClock())
    await elector.acquire()
    leases.fail = ServerError(500, "InternalError", "")
    await elector.release()
    assert not elector.is_leader


async def test_acquire_retries_while_the_api_fails(leases: FakeLeases, make: Make) -> None:
    clock = FakeClock()
    elector = make("a", clock)
    leases.fail = ServerError(500, "InternalError", "")
    waiting = asyncio.create_task(elector.acquire())

    async def body() -> None:
        await advance([clock], 10.0)
        assert not waiting.done()
        leases.fail = None
        await until(waiting.done, [clock], limit=5.0)
        assert elector.is_leader

    await run([waiting], body)


@pytest.mark.parametrize(("lease", "renew", "retry"), [(10, 10, 2), (15, 10, 9), (15, 10, 0.5)])
def test_invalid_timings_are_rejected(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError, match="lease_duration"):
        LeaderElector(FakeLeases(), name="x", namespace=NS, identity="a", clock=FakeClock(),
                      lease_duration=lease, renew_deadline=renew, retry_period=retry)
