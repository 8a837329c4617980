"""decide/sharding.py: the shard of a key and the rebalancing decision.

The decision is also checked in a simulation of several members sharing one set of shard Leases
(sequentially consistent, as the API server's resourceVersion checks make it): at most one live
member holds a shard, nobody exceeds the fair share, a dead member's shards are taken only once its
Leases have been unchanged for lease_duration, and every shard ends up held.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sampledb_operator.decide.sharding import fair_share, plan_shards, shard_of
from sampledb_operator.model.sharding import ShardPlan, ShardRecord, ShardView

D = 15.0  # lease duration


def free() -> ShardRecord:
    return ShardRecord(holder="", unchanged_for=0.0, duration=1.0)


def held_by(holder: str, unchanged_for: float = 0.0) -> ShardRecord:
    return ShardRecord(holder=holder, unchanged_for=unchanged_for, duration=D)


def view(shards: int, members: int, records: dict[int, ShardRecord], held: set[int] | None = None,
         me: str = "me") -> ShardView:
    return ShardView(shards=shards, me=me, members=members, records=records, held=frozenset(held or ()))


# -- shard_of ----------------------------------------------------------------------------------


def test_shard_of_is_sha256_of_namespace_slash_name_first_8_bytes_mod_shards() -> None:
    import hashlib

    digest = hashlib.sha256(b"team-a/orders").digest()
    assert shard_of("team-a", "orders", 6) == int.from_bytes(digest[:8], "big") % 6
    # pinned: the mapping must never change between versions (a rolling upgrade would split a shard)
    assert [shard_of("ns", f"db-{i}", 6) for i in range(8)] == [3, 1, 2, 4, 0, 4, 5, 1]
    assert shard_of("default", "a", 1) == 0


def test_shard_of_does_not_depend_on_the_process_hash_seed() -> None:
    import subprocess
    import sys

    code = "from sampledb_operator.decide.sharding import shard_of; print(shard_of('ns', 'orders', 1000))"
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout.strip() for seed in ("1", "2")}
    assert seen == {str(shard_of("ns", "orders", 1000))}


@given(st.text(max_size=20), st.text(min_size=1, max_size=40), st.integers(1, 64))
def test_shard_of_is_in_range_and_deterministic(ns: str, name: str, shards: int) -> None:
    s = shard_of(ns, name, shards)
    assert 0 <= s < shards
    assert shard_of(ns, name, shards) == s


def test_shard_of_spreads_keys_over_the_shards() -> None:
    counts = [0] * 6
    for i in range(6000):
        counts[shard_of(f"ns-{i % 7}", f"db-{i}", 6)] += 1
    assert min(counts) > 850 and max(counts) < 1150, counts


def test_shard_of_refuses_zero_shards() -> None:
    with pytest.raises(ValueError):
        shard_of("a", "b", 0)


# -- fair share and the plan -----------------------------------------------------------------


@pytest.mark.parametrize(("shards", "members", "share"), [(6, 1, 6), (6, 2, 3), (6, 3, 2), (6, 4, 2), (6, 5, 2),
                                                          (6, 6, 1), (6, 9, 1), (1, 3, 1), (7, 3, 3), (5, 0, 5)])
def test_fair_share_is_ceil_of_shards_over_members(shards: int, members: int, share: int) -> None:
    assert fair_share(shards, members) == share


def test_a_lone_member_takes_every_free_shard() -> None:
    plan = plan_shards(view(6, 1, {s: free() for s in range(6)}))
    assert plan == ShardPlan(share=6, take=(0, 1, 2, 3, 4, 5))


def test_a_member_takes_only_up_to_its_share() -> None:
    plan = plan_shards(view(6, 3, {s: free() for s in range(6)}))
    assert plan.share == 2 and len(plan.take) == 2


def test_a_member_above_its_share_releases_the_extras_and_renews_the_rest() -> None:
    mine = {s: held_by("me") for s in range(6)}
    plan = plan_shards(view(6, 3, mine, held=set(range(6))))
    assert plan.share == 2
    assert len(plan.renew) == 2 and len(plan.release) == 4
    assert set(plan.renew) | set(plan.release) == set(range(6))
    assert plan.take == () and plan.drop == ()
    # stable: the same view gives the same choice
    assert plan_shards(view(6, 3, mine, held=set(range(6)))) == plan


def test_a_valid_lease_of_another_holder_is_never_taken() -> None:
    records = {0: held_by("other", unchanged_for=D - 0.001), 1: held_by("other", unchanged_for=0.0)}
    assert plan_shards(view(2, 1, records)).take == ()


def test_a_dead_members_shard_is_taken_after_lease_duration_only() -> None:
    before = plan_shards(view(2, 1, {0: held_by("dead", unchanged_for=D - 0.5), 1: held_by("me")}, held={1}))
    assert before.take == () and before.renew == (1,)
    after = plan_shards(view(2, 1, {0: held_by("dead", unchanged_for=D), 1: held_by("me")}, held={1}))
    assert after.take == (0,) and after.renew == (1,)


def test_an_unknown_shard_is_not_taken() -> None:
    assert plan_shards(view(3, 1, {1: free()})).take == (1,)


def test_a_record_naming_us_is_taken_first() -> None:
    records = {s: free() for s in range(6)} | {5: held_by("me", unchanged_for=1.0)}
    assert 5 in plan_shards(view(6, 6, records)).take


def test_a_held_shard_whose_record_names_another_valid_holder_is_dropped() -> None:
    plan = plan_shards(view(2, 1, {0: held_by("other"), 1: held_by("me")}, held={0, 1}))
    assert plan.drop == (0,) and plan.renew == (1,) and plan.take == ()


def test_released_records_are_free() -> None:
    released = ShardRecord(holder="", unchanged_for=0.0, duration=1.0)
    assert plan_shards(view(1, 1, {0: released})).take == (0,)


records_strategy = st.dictionaries(
    st.integers(0, 11),
    st.builds(ShardRecord, holder=st.sampled_from(["", "me", "a", "b"]),
              unchanged_for=st.floats(0, 40), duration=st.sampled_from([1.0, D])),
)


@given(st.integers(1, 12), st.integers(1, 6), records_strategy, st.frozensets(st.integers(0, 11)))
def test_plan_invariants(shards: int, members: int, records: dict[int, ShardRecord], held: frozenset[int]) -> None:
    held = frozenset(s for s in held if s < shards)
    records = {s: r for s, r in records.items() if s < shards}
    plan = plan_shards(ShardView(shards=shards, me="me", members=members, records=records, held=held))
    share = fair_share(shards, members)
    assert plan.share == share
    # every held shard is renewed, released or dropped, exactly once
    parts = [set(plan.renew), set(plan.release), set(plan.drop)]
    assert set().union(*parts) == held and sum(map(len, parts)) == len(held)
    assert not set(plan.take) & held
    assert len(plan.renew) + len(plan.take) <= share
    assert not plan.release or len(plan.renew) == share      # releases only above the share
    for s in plan.take:
        r = records[s]
        assert r.holder in ("", "me") or r.unchanged_for >= r.duration
    # taking stops only at the share or when nothing else is available
    takeable = [s for s in range(shards) if s not in held and s in records
                and (records[s].holder in ("", "me") or records[s].expired)]
    assert len(plan.renew) + len(plan.take) == share or len(plan.take) == len(takeable)


# -- a simulation of several members ---------------------------------------------------------


@dataclass
class Lease:
    holder: str = ""
    changed: int = 0       # round of the last change
    duration: float = 1.0


@dataclass
class World:
    shards: int
    lease_rounds: int
    now: int = 0
    leases: dict[int, Lease] = field(default_factory=dict)
    alive: list[str] = field(default_factory=list)
    died: dict[str, int] = field(default_factory=dict)    # member -> round of death
    beliefs: dict[str, set[int]] = field(default_factory=dict)

    def members_seen(self) -> int:
        """Live members as the heartbeats show them: the dead are counted until lease_rounds passed."""
        recent = [m for m, t in self.died.items() if self.now - t < self.lease_rounds]
        return len(self.alive) + len(recent)

    def records(self) -> dict[int, ShardRecord]:
        return {s: ShardRecord(lease.holder, float(self.now - lease.changed), lease.duration)
                for s, lease in self.leases.items()}

    def step(self, me: str) -> None:
        plan = plan_shards(ShardView(shards=self.shards, me=me, members=self.members_seen(),
                                     records=self.records(), held=frozenset(self.beliefs[me])))
        mine = self.beliefs[me]
        for s in plan.drop:
            mine.discard(s)
        for s in plan.release:
            mine.discard(s)
            self.leases[s] = Lease("", self.now, 1.0)
        for s in plan.renew:
            assert self.leases[s].holder == me
            self.leases[s] = Lease(me, self.now, float(self.lease_rounds))
        for s in plan.take:
            lease = self.leases[s]
            if lease.holder not in ("", me):   # taking a dead member's lease: only once it expired
                assert self.now - lease.changed >= self.lease_rounds, (s, lease, self.now)
                assert lease.holder not in self.alive, "took the valid lease of a live member"
            self.leases[s] = Lease(me, self.now, float(self.lease_rounds))
            mine.add(s)
        self.check()

    def round(self, rng: random.Random) -> None:
        self.now += 1
        order = list(self.alive)
        rng.shuffle(order)
        for me in order:
            self.step(me)

    def check(self) -> None:
        owners: dict[int, str] = {}
        for m in self.alive:
            for s in self.beliefs[m]:
                assert s not in owners, f"shard {s} owned by {owners[s]} and {m}"
                owners[s] = m
                assert self.leases[s].holder == m

    def join(self, name: str) -> None:
        self.alive.append(name)
        self.beliefs[name] = set()

    def kill(self, name: str) -> None:
        self.alive.remove(name)
        self.died[name] = self.now
        self.beliefs.pop(name)


@settings(max_examples=150, deadline=None)
@given(shards=st.integers(1, 12), initial=st.integers(1, 5),
       events=st.lists(st.sampled_from(["round", "round", "round", "join", "kill"]), max_size=40),
       seed=st.integers(0, 1000))
def test_members_share_the_shards_exclusively_and_fairly(shards: int, initial: int, events: list[str],
                                                         seed: int) -> None:
    rng = random.Random(seed)
    world = World(shards=shards, lease_rounds=3, leases={s: Lease() for s in range(shards)})
    names = (f"m{i}" for i in range(100))
    for _ in range(initial):
        world.join(next(names))
    for event in events:
        if event == "join":
            world.join(next(names))
        elif event == "kill" and len(world.alive) > 1:
            world.kill(rng.choice(world.alive))
        world.round(rng)
    for _ in range(world.lease_rounds + 4):   # settle: dead members expire, extras are released and taken
        world.round(rng)
    share = fair_share(shards, len(world.alive))
    held = [len(world.beliefs[m]) for m in world.alive]
    assert sum(held) == shards, ("every shard is held", held)
    assert max(held) <= share, (held, share)


def test_three_members_end_with_two_shards_each_and_a_dead_ones_shards_move_after_the_lease_only() -> None:
    rng = random.Random(7)
    world = World(shards=6, lease_rounds=4, leases={s: Lease() for s in range(6)})
    for name in ("a", "b", "c"):
        world.join(name)
    for _ in range(6):
        world.round(rng)
    assert sorted(len(world.beliefs[m]) for m in world.alive) == [2, 2, 2]
    lost = set(world.beliefs["c"])
    world.kill("c")
    for _ in range(world.lease_rounds - 1):
        world.round(rng)
        assert all(world.leases[s].holder == "c" for s in lost)   # not yet: the Leases are still valid
    for _ in range(3):
        world.round(rng)
    assert sorted(len(world.beliefs[m]) for m in world.alive) == [3, 3]
    assert all(world.leases[s].holder in ("a", "b") for s in lost)
