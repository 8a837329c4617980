"""ShardOwner against an in-memory Lease store (resourceVersion conflicts) on a fake clock.

Members are driven one period at a time (owner.period()) on one shared FakeClock, except where the
run() loop itself is under test; the decision is decide.sharding.plan_shards, as app.py wires it.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from tests.support.aio import eventually

from sampledb_operator.decide.sharding import plan_shards
from sampledb_operator.kube.errors import Conflict, NotFound, ServerError
from sampledb_operator.observability import metrics
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.shard_members import (
    MEMBER_ANNOTATION_PREFIX,
    MemberSeen,
    heartbeat_annotations,
    live_members,
    member_key,
    members_lease_name,
    observe_members,
    shard_lease_name,
    without_member,
)
from sampledb_operator.runtime.shards import ShardOwner, quiet_interval

NS = "sampledb-system"
LEASE = "sdb"
DURATION, DEADLINE, RETRY = 15.0, 10.0, 2.0
QUIET = quiet_interval(DURATION, DEADLINE, RETRY)    # 4 s: every second period at rest


class FakeLeases:
    """get/create/replace of Leases with the API server's optimistic concurrency."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self._rv = 0
        self.fail: Exception | None = None      # raised by every call while set
        self.hold_writes = False                # replaces of shard Leases wait for release_writes()
        self._gate = asyncio.Event()
        self.waiting = 0                        # replaces waiting at the gate
        self.writes: list[tuple[str, str]] = []  # (verb, name)
        self.reads: list[str] = []               # names read
        self.conflicts_left = 0                 # the next replaces of the members Lease conflict

    async def _enter(self, name: str) -> None:
        await asyncio.sleep(0)
        if self.fail is not None:
            raise self.fail

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self._rv)
        self.objects[stored["metadata"]["name"]] = stored
        return copy.deepcopy(stored)

    async def get(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        assert namespace == NS
        await self._enter(name)
        self.reads.append(name)
        found = self.objects.get(name)
        if found is None:
            raise NotFound(404, "NotFound", f"leases {name!r} not found")
        return copy.deepcopy(found)

    async def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        await self._enter(name)
        if name in self.objects:
            raise Conflict(409, "AlreadyExists", "already exists")
        assert "resourceVersion" not in obj["metadata"]
        self.writes.append(("create", name))
        return self._store(obj)

    async def replace(self, obj: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        await self._enter(name)
        if self.hold_writes and name != members_lease_name(LEASE):
            self.waiting += 1
            await self._gate.wait()
        current = self.objects.get(name)
        if current is None:
            raise NotFound(404, "NotFound", "gone")
        if name == members_lease_name(LEASE) and self.conflicts_left > 0:
            self.conflicts_left -= 1
            raise Conflict(409, "Conflict", "injected")
        if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        self.writes.append(("update", name))
        return self._store(obj)

    def release_writes(self) -> None:
        self.hold_writes = False
        self._gate.set()

    def holder(self, shard: int) -> str:
        lease = self.objects.get(shard_lease_name(LEASE, shard))
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def holders(self, shards: int) -> list[str]:
        return [self.holder(i) for i in range(shards)]

    def members(self) -> dict[str, str]:
        lease = self.objects.get(members_lease_name(LEASE)) or {}
        return dict((lease.get("metadata") or {}).get("annotations") or {})


class Client:
    """One member's connection to the shared store: its calls on the Leases in `fail_for` fail."""

    def __init__(self, leases: FakeLeases) -> None:
        self.leases = leases
        self.fail_for: set[str] = set()

    def _check(self, name: str) -> None:
        if name in self.fail_for:
            raise ServerError(500, "InternalError", "injected")

    async def get(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        self._check(name)
        return await self.leases.get(name, namespace)

    async def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self._check(obj["metadata"]["name"])
        return await self.leases.create(obj, namespace)

    async def replace(self, obj: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        self._check(obj["metadata"]["name"])
        return await self.leases.replace(obj)


class Member:
    """One ShardOwner with a record of its on_acquired calls and a settable busy set."""

    def __init__(self, leases: FakeLeases, clock: FakeClock, identity: str, shards: int, **kw: Any) -> None:
        self.acquired: list[int] = []
        self.busy: set[int] = set()
        self.client = Client(leases)
        self.owner = ShardOwner(self.client, lease_name=LEASE, namespace=NS, identity=identity, shards=shards,
                                clock=clock, planner=plan_shards, lease_duration=DURATION,
                                renew_deadline=DEADLINE, retry_period=RETRY, on_acquired=self.acquired.append,
                                busy=lambda shard: shard in self.busy, **kw)
        self.identity = identity

    @property
    def owned(self) -> frozenset[int]:
        return self.owner.owned


async def rounds(clock: FakeClock, members: list[Member], n: int, *, step: float = RETRY) -> None:
    """n periods of every member, in order, the clock moving one retry period between them."""
    for _ in range(n):
        for m in members:
            await m.owner.period()
        clock.advance(step)


def exclusive(members: list[Member]) -> None:
    seen: dict[int, str] = {}
    for m in members:
        for shard in m.owned:
            assert shard not in seen, f"shard {shard} owned by {seen[shard]} and {m.identity}"
            seen[shard] = m.identity


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


def gauge(name: str, **labels: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, labels)


# -- one member ---------------------------------------------------------------------------------


async def test_a_lone_member_takes_every_shard_from_its_second_period(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 4)
    await a.owner.period(take=False)    # run(): the first period only heartbeats
    assert a.owned == frozenset() and leases.holders(4) == ["", "", "", ""]
    assert leases.members() == {member_key("a"): "1"}
    clock.advance(RETRY)
    plan = await a.owner.period()
    assert plan.share == 4 and plan.take == (0, 1, 2, 3)
    assert a.owned == {0, 1, 2, 3}
    assert leases.holders(4) == ["a"] * 4
    assert sorted(a.acquired) == [0, 1, 2, 3]
    assert gauge("sampledb_shards_owned") == 4
    assert gauge("sampledb_shard_owned", shard="2") == 1
    assert gauge("sampledb_shard_members") == 1
    spec = leases.objects[shard_lease_name(LEASE, 0)]["spec"]
    assert spec["leaseDurationSeconds"] == 15 and spec["leaseTransitions"] == 0


async def test_a_member_restarted_with_its_identity_takes_back_only_its_own_shards_in_its_first_period(
        leases: FakeLeases, clock: FakeClock) -> None:
    a, b = Member(leases, clock, "a", 4), Member(leases, clock, "b", 4)
    await rounds(clock, [a, b], 3)
    assert a.owned and b.owned and sorted(a.owned | b.owned) == [0, 1, 2, 3]
    mine = sorted(a.owned)
    # a is killed (no stop(): its records still name it) and started again at once
    restarted = Member(leases, clock, "a", 4)  # the same identity, a new process: nothing held yet
    await restarted.owner.period(take=False)    # run()'s first period
    assert sorted(restarted.owned) == mine and sorted(restarted.acquired) == mine
    assert leases.holders(4) == ["a" if i in mine else "b" for i in range(4)]
    exclusive([restarted, b])


async def test_the_first_period_takes_no_free_shard_a_record_does_not_name_it_for(leases: FakeLeases,
                                                                                  clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 4)
    await rounds(clock, [a], 2)
    assert a.owned == {0, 1, 2, 3}
    await a.owner.stop()  # released: every record empty
    again = Member(leases, clock, "a", 4)
    await again.owner.period(take=False)
    assert again.owned == frozenset() and leases.holders(4) == ["", "", "", ""]


async def test_named_reads_which_shards_name_the_member_without_writing(leases: FakeLeases, clock: FakeClock) -> None:
    a, b = Member(leases, clock, "a", 4), Member(leases, clock, "b", 4)
    await rounds(clock, [a, b], 3)
    restarted = Member(leases, clock, "a", 4)
    writes = list(leases.writes)
    assert await restarted.owner.named() == a.owned
    assert leases.writes == writes and restarted.owned == frozenset()  # reads only: nothing taken
    assert await Member(leases, clock, "c", 4).owner.named() == frozenset()
    leases.fail = ServerError(500, "InternalError", "etcd")
    assert await restarted.owner.named() == frozenset()  # a failed read names nothing


def test_the_quiet_interval_leaves_three_tries_before_the_renew_deadline() -> None:
    assert QUIET == 4.0
    assert quiet_interval(60, 40, 5) == 20.0          # half the renew deadline
    assert quiet_interval(15, 10, 3) == 3.0           # never below one period
    assert quiet_interval(6, 5, 1) == 2.0             # a third of the lease duration
    for duration, deadline, retry in ((15, 10, 2), (60, 40, 5), (15, 10, 3), (30, 20, 4), (6, 5, 1)):
        quiet = quiet_interval(duration, deadline, retry)
        assert (retry <= quiet <= deadline / 2 and quiet <= duration / 3) or quiet == retry
        assert quiet + 3 * retry <= deadline or quiet == retry


async def test_at_rest_renewals_and_heartbeats_are_written_every_quiet_interval(leases: FakeLeases,
                                                                             clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 2)
    await rounds(clock, [a], 2)
    leases.writes.clear()
    await rounds(clock, [a], 6)                  # 12 s: three quiet intervals
    updates = [name for verb, name in leases.writes if verb == "update"]
    assert updates.count(shard_lease_name(LEASE, 0)) == 3
    assert updates.count(shard_lease_name(LEASE, 1)) == 3
    assert updates.count(members_lease_name(LEASE)) == 3
    assert a.owned == {0, 1} and sorted(a.acquired) == [0, 1]    # not acquired again
    assert int(leases.members()[member_key("a")]) == 4


async def test_at_rest_the_others_shards_are_read_every_quiet_interval_and_every_period_when_short(
        leases: FakeLeases, clock: FakeClock) -> None:
    a, b = Member(leases, clock, "a", 4), Member(leases, clock, "b", 4)
    await rounds(clock, [a, b], 8)
    assert (len(a.owned), len(b.owned)) == (2, 2)
    theirs = set(b.owned)
    leases.reads.clear()
    await rounds(clock, [a], 6)                  # (b is idle: its leases stay valid for a)
    shard_reads = [name for name in leases.reads if name != members_lease_name(LEASE)]
    assert sorted(shard_reads) == sorted(shard_lease_name(LEASE, s) for s in theirs for _ in range(3))
    assert leases.reads.count(members_lease_name(LEASE)) == 3
    await b.owner.stop()                          # b leaves: a is short of its share of 4 ...
    leases.reads.clear()
    await rounds(clock, [a], 1)                   # ... sees it at its next heartbeat, then reads every period
    leases.reads.clear()
    await rounds(clock, [a], 1)
    assert a.owned == {0, 1, 2, 3}
    assert leases.reads.count(members_lease_name(LEASE)) == 1


async def test_a_failed_renewal_is_tried_again_the_next_period(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 1)
    await rounds(clock, [a], 2)               # taken at 100; at 102 not due; now 104: due
    name = shard_lease_name(LEASE, 0)
    a.client.fail_for = {name}
    leases.writes.clear()
    await rounds(clock, [a], 1)
    assert ("update", name) not in leases.writes
    a.client.fail_for = set()
    await rounds(clock, [a], 1)               # 106: two seconds after the failed try, not four
    assert ("update", name) in leases.writes
    assert a.owner.owns(0)


async def test_the_run_loop_acquires_after_one_retry_period(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 3)
    task = asyncio.create_task(a.owner.run())
    try:
        await eventually(lambda: clock.pending_sleepers() == 1)
        assert a.owned == frozenset()
        clock.advance(RETRY)
        await eventually(lambda: a.owned == {0, 1, 2})
        await eventually(lambda: clock.pending_sleepers() == 1)
        for _ in range(2):                    # at rest: the next heartbeat one quiet interval later
            clock.advance(RETRY)
            await eventually(lambda: clock.pending_sleepers() == 1)
        await eventually(lambda: int(leases.members()[member_key("a")]) == 3)
    finally:
        task.cancel()
        await asyncio.wait({task})


# -- several members ---------------------------------------------------------------------------


async def test_three_members_share_six_shards_two_each(leases: FakeLeases, clock: FakeClock) -> None:
    members = [Member(leases, clock, name, 6) for name in ("a", "b", "c")]
    for _ in range(12):
        await rounds(clock, members, 1)
        exclusive(members)
    assert sorted(len(m.owned) for m in members) == [2, 2, 2]
    assert sorted(leases.holders(6)) == ["a", "a", "b", "b", "c", "c"]
    assert all(m.owner.members == 3 and m.owner.share == 2 for m in members)


async def test_a_member_above_its_share_releases_to_a_newcomer(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 6)
    await rounds(clock, [a], 2)
    assert len(a.owned) == 6
    b = Member(leases, clock, "b", 6)
    for _ in range(6):
        await rounds(clock, [a, b], 1)
        exclusive([a, b])
    assert (len(a.owned), len(b.owned)) == (3, 3)
    assert sorted(b.acquired) == sorted(b.owned)
    assert gauge("sampledb_shard_transitions_total", event="released") is not None


async def test_a_shard_being_released_is_not_admitted_and_waits_for_its_keys(leases: FakeLeases,
                                                                             clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 2)
    await rounds(clock, [a], 2)
    assert a.owned == {0, 1}
    b = Member(leases, clock, "b", 2)
    await b.owner.period()              # b's heartbeat: a now sees two members, share 1
    a.busy = {0, 1}                     # a key of each shard is being reconciled
    plan = await a.owner.period()
    (released,) = plan.release
    assert a.owner.owned == {1 - released}          # no longer admitted at once ...
    assert not a.owner.admits(released)
    assert a.owner.holds(released)                  # ... still held (its keys may be queued) ...
    assert leases.holder(released) == "a"           # ... and renewed while its key runs
    clock.advance(RETRY)
    await a.owner.period()
    assert leases.holder(released) == "a"
    a.busy = set()
    clock.advance(RETRY)
    await a.owner.period()
    assert leases.holder(released) == ""            # released once idle
    assert not a.owner.holds(released) and a.owner.holds(1 - released)
    await b.owner.period()
    assert b.owned == {released} and leases.holder(released) == "b"
    assert a.owned == {1 - released}


async def test_a_release_waits_at_most_release_wait_for_busy_keys(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 2, release_wait=5.0)
    await rounds(clock, [a], 2)
    b = Member(leases, clock, "b", 2)
    await b.owner.period()
    a.busy = {0, 1}
    plan = await a.owner.period()
    (released,) = plan.release
    clock.advance(4.0)
    await a.owner.period()
    assert leases.holder(released) == "a"
    clock.advance(1.0)
    await a.owner.period()
    assert leases.holder(released) == ""


async def test_a_dead_members_shards_are_taken_after_lease_duration_only(leases: FakeLeases,
                                                                         clock: FakeClock) -> None:
    members = [Member(leases, clock, name, 6) for name in ("a", "b", "c")]
    await rounds(clock, members, 10)
    c = members.pop()
    orphans = set(c.owned)
    assert len(orphans) == 2
    died = clock.monotonic()   # c's last period ran one retry period ago: its records changed then
    waited = 0.0
    while any(leases.holder(s) == "c" for s in orphans):
        await rounds(clock, members, 1)
        waited = clock.monotonic() - died
        exclusive(members)
        if any(leases.holder(s) == "c" for s in orphans):
            continue
        assert waited >= DURATION - RETRY, f"taken {waited}s after c's last renewal"
        assert waited <= DURATION + 3 * RETRY
    assert sorted(len(m.owned) for m in members) == [3, 3]
    assert member_key("c") not in leases.members()        # removed as dead by a heartbeat
    for m in members:
        assert {s for s in orphans if s in m.owned} <= set(m.acquired)


async def test_a_member_that_cannot_renew_stops_admitting_before_another_may_take_the_shard(
        leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 2)
    b = Member(leases, clock, "b", 2)
    c = Member(leases, clock, "c", 2)
    await rounds(clock, [a, b, c], 8)
    owner = next(m for m in (a, b, c) if m.owned == {0})
    others = [m for m in (a, b, c) if m is not owner]
    leases.writes.clear()
    while ("update", shard_lease_name(LEASE, 0)) not in leases.writes:    # until its next renewal
        await rounds(clock, [a, b, c], 1)
    renewed = clock.monotonic() - RETRY
    owner.client.fail_for = {shard_lease_name(LEASE, 0)}     # its heartbeat still works: it stays a member
    stopped = taken = None
    taker = None
    while taken is None:
        await rounds(clock, [a, b, c], 1, step=0.5)
        exclusive([a, b, c])
        if stopped is None and not owner.owner.owns(0):
            stopped = clock.monotonic() - renewed
        if (taker := next((m for m in others if 0 in m.owned), None)) is not None:
            taken = clock.monotonic() - renewed
        assert clock.monotonic() - renewed < 60, "never taken over"
    assert stopped is not None and stopped <= DEADLINE + 0.5
    assert taken >= DURATION and taken <= DURATION + 2 * RETRY     # only once expired, after it stopped
    assert taker is not None and 0 in taker.acquired


async def test_admission_stops_by_time_even_while_the_loop_waits_on_the_api(leases: FakeLeases,
                                                                            clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 1)
    await rounds(clock, [a], 2)
    assert a.owner.owns(0)
    leases.hold_writes = True
    period = asyncio.create_task(a.owner.period())      # renews QUIET after the last renewal
    await eventually(lambda: leases.waiting == 1 and clock.pending_sleepers() == 1)
    clock.advance(DEADLINE - QUIET - 0.1)
    assert a.owner.owns(0)
    clock.advance(0.2)
    assert not a.owner.owns(0)        # the last answered renewal is renew_deadline old: not admitted
    assert not a.owner.admits(0)      # (a key of the shard arrives and is refused)
    leases.release_writes()
    await period
    # the renewal sent QUIET after the previous one was applied: the shard is ours until it is
    # renew_deadline old, and the refused key's shard is enqueued again
    assert a.owner.owns(0)
    assert a.acquired == [0, 0]


async def test_a_renewal_that_never_answers_loses_the_shard(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 1)
    await rounds(clock, [a], 2)
    leases.hold_writes = True
    period = asyncio.create_task(a.owner.period())
    await eventually(lambda: leases.waiting == 1 and clock.pending_sleepers() == 1)
    lost = gauge("sampledb_shard_transitions_total", event="lost") or 0.0
    clock.advance(DEADLINE)
    await period
    assert not a.owner.owns(0)
    assert gauge("sampledb_shard_transitions_total", event="lost") == lost + 1
    assert gauge("sampledb_shards_owned") == 0
    leases.release_writes()


async def test_a_key_refused_during_a_late_renewal_is_enqueued_again_once_renewed(leases: FakeLeases,
                                                                                  clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 1)
    await rounds(clock, [a], 2)
    assert a.acquired == [0]
    clock.advance(DEADLINE - RETRY)          # the last renewal is just too old: a key arrives now
    assert not a.owner.admits(0)
    await a.owner.period()                   # renewed (the record is still ours) ...
    assert a.owner.owns(0)
    assert a.acquired == [0, 0]              # ... and the shard's keys are enqueued again


async def test_a_stolen_shard_is_dropped_at_the_next_renewal(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 1)
    await rounds(clock, [a], 2)
    name = shard_lease_name(LEASE, 0)
    stolen = copy.deepcopy(leases.objects[name])
    stolen["spec"]["holderIdentity"] = "intruder"
    stolen["spec"]["renewTime"] = "2030-01-01T00:00:00.000000Z"
    await leases.replace(stolen)
    await a.owner.period()
    assert not a.owner.owns(0) and leases.holder(0) == "intruder"
    assert gauge("sampledb_shards_owned") == 0
    clock.advance(DURATION - 1)
    await a.owner.period()
    assert leases.holder(0) == "intruder"     # a valid foreign lease is left alone


async def test_a_shard_created_by_another_member_first_is_not_taken(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 1)
    b = Member(leases, clock, "b", 1)
    await a.owner.period(take=False)
    await b.owner.period(take=False)
    clock.advance(RETRY)
    await asyncio.gather(a.owner.period(), b.owner.period())   # both see no Lease and create it
    exclusive([a, b])
    assert len(a.owned) + len(b.owned) == 1


async def test_api_errors_do_not_end_the_loop(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 2)
    leases.fail = ServerError(500, "InternalError", "down")
    await rounds(clock, [a], 3)
    assert a.owned == frozenset()
    leases.fail = None
    await rounds(clock, [a], 1)
    assert a.owned == {0, 1}


async def test_heartbeat_conflicts_are_retried(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 1)
    await rounds(clock, [a], 2)
    leases.conflicts_left = 2
    await rounds(clock, [a], 1)                  # the heartbeat due one quiet interval after the first
    assert leases.members() == {member_key("a"): "2"}


async def test_stop_releases_every_shard_and_leaves_so_the_others_take_over_at_once(leases: FakeLeases,
                                                                                  clock: FakeClock) -> None:
    a, b = Member(leases, clock, "a", 4), Member(leases, clock, "b", 4)
    await rounds(clock, [a, b], 8)
    mine = set(a.owned)
    assert len(mine) == 2
    await a.owner.stop()
    assert a.owned == frozenset()
    assert all(leases.holder(s) == "" for s in mine)
    assert member_key("a") not in leases.members()
    assert leases.objects[shard_lease_name(LEASE, min(mine))]["spec"]["leaseDurationSeconds"] == 1
    await b.owner.period()                     # at once: a is no member any more, its shards are free
    assert b.owned == {0, 1, 2, 3}


async def test_stop_leaves_a_lease_another_member_took_alone(leases: FakeLeases, clock: FakeClock) -> None:
    a = Member(leases, clock, "a", 1)
    await rounds(clock, [a], 2)
    name = shard_lease_name(LEASE, 0)
    taken = copy.deepcopy(leases.objects[name])
    taken["spec"]["holderIdentity"] = "b"
    await leases.replace(taken)
    await a.owner.stop()
    assert leases.holder(0) == "b"


def test_timings_are_checked() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        ShardOwner(FakeLeases(), lease_name=LEASE, namespace=NS, identity="a", shards=2, clock=FakeClock(),
                   planner=plan_shards, lease_duration=10, renew_deadline=10, retry_period=2)


# -- membership helpers -------------------------------------------------------------------------


def test_lease_names() -> None:
    assert shard_lease_name("sampledb-operator", 3) == "sampledb-operator-shard-3"
    assert members_lease_name("sampledb-operator") == "sampledb-operator-members"


def test_member_key_is_the_identity_when_valid_else_a_readable_hash() -> None:
    assert member_key("pod-abc_1234") == MEMBER_ANNOTATION_PREFIX + "pod-abc_1234"
    long = "sampledb-operator-7d9f8c6b5d-abcde_1a2b3c4d" + "x" * 30
    key = member_key(long)
    name = key.removeprefix(MEMBER_ANNOTATION_PREFIX)
    assert len(name) <= 63 and name.startswith("sampledb-operator-")
    assert member_key(long) == key and member_key(long + "y") != key
    odd = member_key("host:1/2").removeprefix(MEMBER_ANNOTATION_PREFIX)
    assert ":" not in odd and "/" not in odd


def test_observe_members_restarts_a_members_clock_only_when_its_counter_changes() -> None:
    a, b = MEMBER_ANNOTATION_PREFIX + "a", MEMBER_ANNOTATION_PREFIX + "b"
    seen = observe_members({}, {a: "1", b: "7", "other": "x"}, now=10.0)
    assert seen == {a: MemberSeen("1", 10.0), b: MemberSeen("7", 10.0)}
    seen = observe_members(seen, {a: "2", b: "7"}, now=12.0)
    assert seen == {a: MemberSeen("2", 12.0), b: MemberSeen("7", 10.0)}
    assert live_members(seen, now=24.9, lease_duration=DURATION) == {a, b}
    assert live_members(seen, now=25.0, lease_duration=DURATION) == {a}
    assert observe_members(seen, {a: "2"}, now=13.0) == {a: MemberSeen("2", 12.0)}


def test_heartbeat_bumps_ours_removes_the_dead_and_keeps_the_rest() -> None:
    me, a, dead = (MEMBER_ANNOTATION_PREFIX + n for n in ("me", "a", "dead"))
    annotations = {me: "4", a: "9", dead: "3", "note": "kept"}
    seen = {me: MemberSeen("4", 20.0), a: MemberSeen("9", 19.0), dead: MemberSeen("3", 0.0)}
    out = heartbeat_annotations(annotations, me, 5, seen, now=20.0, lease_duration=DURATION)
    assert out == {me: "5", a: "9", "note": "kept"}
    assert without_member(out, me) == {a: "9", "note": "kept"}
    assert heartbeat_annotations({}, me, 1, {}, now=0.0, lease_duration=DURATION) == {me: "1"}


