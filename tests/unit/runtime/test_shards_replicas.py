"""Three in-process replicas wired as sharded.py wires them (Sharding, ShardOwner, Controllers with its intake
and admit) over one in-memory Lease store: each database is reconciled only by the replica that owns its shard, and a
crashed replica's databases are reconciled by the others once its Leases expired."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.support.aio import eventually
from tests.unit.runtime.test_shards import DEADLINE, DURATION, LEASE, NS, RETRY, Client, FakeLeases
from tests.unit.runtime.test_shards_admission import FakeWatcher
from tests.unit.runtime.test_shards_app import backup, caches, sampledb

from sampledb_operator.decide.sharding import plan_shards, shard_of
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.reconcilers.context import Caches
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.controller import Controller
from sampledb_operator.runtime.manager import Manager
from sampledb_operator.runtime.shards import ShardOwner
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.sharded import Sharding

SHARDS = 6
_names = itertools.count()


class Replica:
    def __init__(self, identity: str, leases: FakeLeases, clock: FakeClock, cache: Caches, *,
                 journal: list[tuple[str, str, ObjectRef]], replicas: list[Replica]) -> None:
        self.identity = identity
        self.sharding = Sharding(SHARDS, cache)
        self.violations: list[str] = []

        async def reconcile_db(ref: ObjectRef) -> None:   # (an exception here would only be retried)
            owners = [r.identity for r in replicas if r.alive and r.owner.owns(self.sharding.of_database(ref))]
            if owners != [identity]:
                self.violations.append(f"{ref} reconciled by {identity}, its shard owned by {owners}")
            journal.append((identity, "db", ref))
            await asyncio.sleep(0)

        async def reconcile_backup(ref: ObjectRef) -> None:
            journal.append((identity, "backup", ref))

        n = next(_names)
        self.dbs = Controller(f"replica-db-{n}", reconcile_db, clock=clock, workers=2,
                              admit=self.sharding.admit_database, intake=self.sharding.holds_database)
        self.backups = Controller(f"replica-backup-{n}", reconcile_backup, clock=clock,
                                  admit=self.sharding.admit_backup, intake=self.sharding.holds_backup)
        self.sharding.databases, self.sharding.backups = self.dbs, self.backups
        self.owner = ShardOwner(Client(leases), lease_name=LEASE, namespace=NS, identity=identity, shards=SHARDS,
                                clock=clock, planner=plan_shards, lease_duration=DURATION,
                                renew_deadline=DEADLINE, retry_period=RETRY,
                                on_acquired=self.sharding.on_acquired, busy=self.sharding.busy)
        self.sharding.owner = self.owner
        self.tasks = [asyncio.create_task(self.dbs.run()), asyncio.create_task(self.backups.run())]
        self.alive = True
        self.periods = 0

    async def period(self) -> None:
        await self.owner.period(take=self.periods > 0)
        self.periods += 1

    async def crash(self) -> None:
        self.alive = False
        for task in self.tasks:
            task.cancel()
        await asyncio.wait(self.tasks)


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


@pytest.fixture
async def replicas() -> AsyncIterator[list[Replica]]:
    made: list[Replica] = []
    yield made
    for r in made:
        if r.alive:
            await r.crash()


async def test_each_database_is_reconciled_by_its_shards_owner_and_a_crashed_replicas_move(
        replicas: list[Replica]) -> None:
    names = [(ns, f"db-{i}") for ns in ("alpha", "beta") for i in range(12)]
    objs: list[dict[str, Any]] = [sampledb(ns, name) for ns, name in names]
    objs += [backup(ns, f"{name}-b", name) for ns, name in names[:6]]
    cache = caches(objs)
    leases, clock = FakeLeases(), FakeClock(10.0)
    journal: list[tuple[str, str, ObjectRef]] = []
    replicas.extend(Replica(i, leases, clock, cache, journal=journal, replicas=replicas) for i in ("r1", "r2", "r3"))
    for r in replicas:          # the initial list of every watcher wakes every replica for every database
        for ns, name in names:
            r.dbs.enqueue(ObjectRef(ns, name))
        assert len(r.dbs.queue) == 0  # no shard held yet: nothing queued, each shard's keys come with it

    async def rounds(n: int) -> None:
        for _ in range(n):
            for r in replicas:
                if r.alive:
                    await r.period()
                    await settle()
            clock.advance(RETRY)
            await settle()

    await rounds(8)
    assert [v for r in replicas for v in r.violations] == []
    assert sorted(len(r.owner.owned) for r in replicas) == [2, 2, 2]
    assert len({leases.holder(s) for s in range(SHARDS)}) == 3
    owner_of = {s: r.identity for r in replicas for s in r.owner.owned}
    reconciled = {(who, ref) for who, kind, ref in journal if kind == "db"}
    assert {ref for _, ref in reconciled} == {ObjectRef(ns, n) for ns, n in names}   # every database, once owned
    for who, ref in reconciled:
        assert who == owner_of[shard_of(ref.namespace, ref.name, SHARDS)], (who, ref)
    for who, kind, ref in journal:
        if kind == "backup":
            database = ObjectRef(ref.namespace, ref.name.removesuffix("-b"))
            assert who == owner_of[shard_of(database.namespace, database.name, SHARDS)]

    dead = replicas[2]
    orphans = set(dead.owner.owned)
    await dead.crash()
    journal.clear()
    await rounds(int(DURATION / RETRY) + 3)
    survivors = replicas[:2]
    assert sorted(len(r.owner.owned) for r in survivors) == [3, 3]
    assert [v for r in replicas for v in r.violations] == []
    moved = {ObjectRef(ns, n) for ns, n in names if shard_of(ns, n, SHARDS) in orphans}
    assert moved <= {ref for who, kind, ref in journal if kind == "db" and who != dead.identity}


async def test_a_restarted_replicas_owner_takes_its_shards_back_while_its_caches_fill() -> None:
    """app.py runs the ShardOwner early, with the watchers: a restarted replica's Lease requests (it takes back
    the shards its Leases name) overlap its listing instead of following it; no database is reconciled before
    the caches are synced, and every one of them is after."""
    names = [("alpha", f"db-{i}") for i in range(12)]
    leases, clock = FakeLeases(), FakeClock(10.0)
    before = ShardOwner(Client(leases), lease_name=LEASE, namespace=NS, identity="r1", shards=SHARDS, clock=clock,
                        planner=plan_shards, lease_duration=DURATION, renew_deadline=DEADLINE,
                        retry_period=RETRY, on_acquired=lambda shard: None, busy=lambda shard: False)
    await before.period(take=False)
    clock.advance(RETRY)
    await before.period()
    assert before.owned == set(range(SHARDS))           # its life before the restart (then SIGKILLed)

    store = Store("sampledbs")                          # the restarted process: its caches still empty
    cache = Caches(**{kind: StoreSet({None: store if kind == "sampledbs" else Store(kind)})
                      for kind in ("sampledbs", "backups", "statefulsets", "pvcs", "jobs", "services", "configmaps",
                                   "secrets")})
    sharding = Sharding(SHARDS, cache)
    reconciled: list[ObjectRef] = []

    async def reconcile(ref: ObjectRef) -> None:
        reconciled.append(ref)

    dbs = Controller(f"restart-db-{next(_names)}", reconcile, clock=clock, admit=sharding.admit_database)
    owner = ShardOwner(Client(leases), lease_name=LEASE, namespace=NS, identity="r1", shards=SHARDS, clock=clock,
                       planner=plan_shards, lease_duration=DURATION, renew_deadline=DEADLINE, retry_period=RETRY,
                       on_acquired=sharding.on_acquired, busy=sharding.busy)
    sharding.owner, sharding.databases = owner, dbs
    watcher = FakeWatcher([])
    manager = Manager(clock=clock, shutdown_timeout=5.0)
    manager.add_watcher(watcher)
    manager.add_controller(dbs)
    manager.add_runnable("shards", owner, early=True)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop))
    try:
        await eventually(lambda: owner.owned == set(range(SHARDS)))    # its first period, before any sync
        assert not dbs.running and reconciled == []
        for ns, name in names:                          # the listing: stored, then delivered (ADDED)
            store.upsert(sampledb(ns, name))
            dbs.enqueue(ObjectRef(ns, name))
        await settle()
        assert reconciled == []                         # admitted and queued, not reconciled before the sync
        watcher.store.synced.set()
        await eventually(lambda: sorted(reconciled) == sorted(ObjectRef(ns, n) for ns, n in names))
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 5.0) == 0
